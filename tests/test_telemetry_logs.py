"""Logs (SPEC §12): the worker's lines carry run, attempt, step and owner; --log-format json
prints one JSON object per line."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import signal
from pathlib import Path

import pytest
from procs import wait_for
from telemetry_support import worker

from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent.telemetry import logs


def test_json_lines_carry_the_run_attempt_step_and_owner(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "r1", [Message("user", "the printer is on fire")])
    submit(store, "r2", [Message("user", "a slow question")])
    (root / ".side").mkdir()
    (root / ".side" / "go").write_text("")
    log = tmp_path / "worker.log"
    w = worker(root, log, "--owner", "A", "--log-format", "json", "-v")
    try:
        wait_for(
            lambda: (
                view_store(store, "r1").status == RunStatus.AWAITING_APPROVAL
                and view_store(store, "r2").status == RunStatus.COMPLETED
            ),
            30,
            "the runs",
        )
        wait_for(lambda: "r2: completed" in log.read_text(), 10, "the worker's verdict")
    finally:
        w.send_signal(signal.SIGTERM)
        assert w.wait(15) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]  # every line is JSON
    assert all({"time", "level", "logger", "message", *logs.FIELDS} <= set(x) for x in lines)
    looked = [x for x in lines if x["logger"] == "helpdesk.lookup"]
    assert [(x["run"], x["attempt"], x["step"], x["owner"]) for x in looked] == [
        ("r2", 1, "tool/1/0/lookup", "A")
    ]
    verdicts = {x["run"]: x for x in lines if x["message"].startswith("run r")}
    assert verdicts["r1"]["message"] == "run r1: awaiting_approval"
    assert (verdicts["r1"]["attempt"], verdicts["r1"]["owner"], verdicts["r1"]["step"]) == (
        1,
        "A",
        None,
    )
    serving = [x for x in lines if "serving" in x["message"]]
    assert serving and serving[0]["run"] is None


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_fields_follow_the_task_and_its_step(fmt: str) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(logs.FieldsFilter())
    handler.setFormatter(logs.JsonFormatter() if fmt == "json" else logs.TextFormatter())
    log = logging.getLogger("test.telemetry.fields")
    log.addHandler(handler)
    log.propagate = False
    log.setLevel(logging.INFO)

    def work() -> None:
        log.info("before")
        logs.set_run("r1", "A")
        logs.set_attempt(2)
        token = logs.set_step("llm/1")
        log.info("inside")
        logs.reset(token)
        log.info("after")

    try:
        contextvars.Context().run(work)  # as a worker's task per run has a context of its own
    finally:
        log.removeHandler(handler)
    got = out.getvalue().splitlines()
    if fmt == "json":
        fields = [tuple(json.loads(line)[k] for k in logs.FIELDS) for line in got]
        assert fields == [
            (None, None, None, None),
            ("r1", 2, "llm/1", "A"),
            ("r1", 2, None, "A"),
        ]
    else:
        assert got[0].endswith(" before")
        assert got[1].endswith("inside [run=r1 attempt=2 step=llm/1 owner=A]")
        assert got[2].endswith("after [run=r1 attempt=2 owner=A]")
