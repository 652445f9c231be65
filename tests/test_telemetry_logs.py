"""Logs (SPEC §12): the worker's lines carry run, attempt, step and owner; --log-format json
prints one JSON object per line."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import signal as signal_
from pathlib import Path

import pytest
from procs import wait_for
from telemetry_support import worker

from durableagent import FileStore, Message, RunStatus, signal, submit, view_store
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
        w.send_signal(signal_.SIGTERM)
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


def test_verbose_logs_every_decision_with_its_step(tmp_path: Path) -> None:
    """`worker -v --log-format json`, two real workers, the first SIGKILLed inside a slow
    read: every decision is a line with its step: ran, stopped for a human (an approval),
    then, in the second worker, replayed, ran (the approved write) and re-ran (the read the
    first worker died in)."""
    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "r1", [Message("user", "the printer is on fire")])
    submit(store, "r2", [Message("user", "a slow question")])
    (root / ".side").mkdir()
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    args = ("--log-format", "json", "-v", "--lease-ttl", "2")
    a = worker(root, first, "--owner", "A", *args)
    try:
        wait_for(
            lambda: (
                view_store(store, "r1").status == RunStatus.AWAITING_APPROVAL
                and any(
                    r.type == "step.started" and r.step == "tool/1/0/lookup"
                    for r in store.load("r2")
                )
            ),
            60,
            "r1 awaiting, r2 inside its slow lookup",
        )
    finally:
        a.kill()
        a.wait(15)
    (pending,) = view_store(store, "r1").pending
    signal(store, "r1", "approve", {"marker": pending.marker}, by="ana")
    (root / ".side" / "go").write_text("")
    b = worker(root, second, "--owner", "B", *args)
    try:
        wait_for(
            lambda: all(view_store(store, r).status == RunStatus.COMPLETED for r in ("r1", "r2")),
            60,
            "both runs completed",
        )
        wait_for(lambda: "r2: completed" in second.read_text(), 15, "the worker's verdict")
    finally:
        b.send_signal(signal_.SIGTERM)
        assert b.wait(15) == 0

    def decisions(log: Path) -> dict[tuple[str, str], str]:
        out = {}
        for line in log.read_text().splitlines():
            x = json.loads(line)
            if x["level"] == "debug" and x["step"] and x["message"].startswith("run "):
                assert x["message"].startswith(f"run {x['run']}: {x['step']} "), x
                assert x["owner"] in ("A", "B") and x["attempt"], x
                out[(x["run"], x["step"])] = x["message"].split(f"{x['step']} ", 1)[1]
        return out

    seen = decisions(first)
    assert seen[("r1", "llm/1")] == "ran"
    assert seen[("r1", pending.step)].startswith("stopped for a human: create_ticket waits")
    assert seen[("r2", "llm/1")] == "ran"
    seen = decisions(second)
    assert seen[("r1", "llm/1")].startswith("replayed")
    assert seen[("r1", "tool/1/0/lookup")] == "ran"  # the turn's calls run once all are decided
    assert seen[("r1", pending.step)] == "ran"
    assert seen[("r1", "llm/2")] == "ran"
    assert seen[("r2", "llm/1")].startswith("replayed")
    assert seen[("r2", "tool/1/0/lookup")].startswith("re-ran: a read")
    assert seen[("r2", "llm/2")] == "ran"


def test_the_worker_says_where_its_traces_go_as_it_does_for_metrics(tmp_path: Path) -> None:
    """A worker with an OTLP endpoint in its environment says so at start, naming where the
    spans go (and they do arrive there); one without says nothing of traces."""
    from telemetry_support import Receiver

    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "r1", [Message("user", "the printer is on fire")])
    quiet, traced = tmp_path / "quiet.log", tmp_path / "traced.log"
    w = worker(root, quiet, "--owner", "Q")
    try:
        wait_for(lambda: "serving" in quiet.read_text(), 30, "the quiet worker's start")
    finally:
        w.send_signal(signal_.SIGTERM)
        assert w.wait(15) == 0
    assert "trac" not in quiet.read_text()
    with Receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        w = worker(root, traced, "--owner", "T", **env)
        try:
            wait_for(lambda: receiver.named("durableagent.attempt"), 30, "a span")
        finally:
            w.send_signal(signal_.SIGTERM)
            assert w.wait(15) == 0
    lines = traced.read_text().splitlines()
    said = f"agentrun worker: traces to {receiver.endpoint}/v1/traces (OTLP/HTTP)"
    assert said in lines
    assert lines.index(said) < next(i for i, x in enumerate(lines) if "serving" in x)


def test_the_traces_endpoint_is_said_without_its_secrets() -> None:
    from durableagent.telemetry import otlp_endpoint

    assert (
        otlp_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://ops:s3cret@otel.example:4318/?k=1"})
        == "https://otel.example:4318/v1/traces"
    )
    assert (
        otlp_endpoint(
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://ignored:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:9999/custom?token=x",
            }
        )
        == "http://collector:9999/custom"
    )
