"""Traces over OTLP/HTTP from real worker processes, one of them SIGKILLed (SPEC §12)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from procs import wait_for
from telemetry_support import Receiver, worker

from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent import signal as send_signal
from durableagent.telemetry import run_trace_id

pytestmark = pytest.mark.slow


def test_a_run_whose_worker_was_killed_between_attempts_is_one_trace(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "r1", [Message("user", "the printer is on fire")])
    log = tmp_path / "worker.log"
    with Receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        first = worker(root, log, **env)
        try:
            wait_for(
                lambda: len(receiver.named("durableagent.attempt")) == 1,
                30,
                "the first attempt's span",
            )
            assert view_store(store, "r1").status == RunStatus.AWAITING_APPROVAL
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        for p in view_store(store, "r1").pending:
            send_signal(store, "r1", "approve", {"marker": p.marker}, by="ana")
        second = worker(root, log, **env)
        try:
            wait_for(
                lambda: len(receiver.named("durableagent.attempt")) == 2,
                30,
                f"the second attempt's span\n{log.read_text()}",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(15)
        spans = list(receiver.spans)
    assert view_store(store, "r1").status == RunStatus.COMPLETED
    trace_id = f"{run_trace_id(store.load('r1')[0]):032x}"
    assert {s["trace_id"] for s in spans} == {trace_id}
    attempts = {
        s["attributes"]["durableagent.attempt"]: s
        for s in spans
        if s["name"] == "durableagent.attempt"
    }
    assert sorted(attempts) == [1, 2]
    assert attempts[1]["attributes"]["durableagent.outcome"] == "awaiting_approval"
    assert attempts[2]["attributes"]["durableagent.outcome"] == "completed"
    assert attempts[1]["parent"] == attempts[2]["parent"]  # the run's own context

    def steps_of(n: int) -> list[tuple[str, bool]]:
        sid = attempts[n]["span_id"]
        return [
            (s["name"], s["attributes"]["durableagent.step.replayed"])
            for s in spans
            if s["parent"] == sid
        ]

    assert steps_of(1) == [("chat gpt-test", False)]
    assert sorted(steps_of(2)) == [
        ("chat gpt-test", False),
        ("chat gpt-test", True),
        ("execute_tool create_ticket", False),
        ("execute_tool lookup", False),
    ]
    replayed = next(s for s in spans if s["attributes"].get("durableagent.step.replayed") is True)
    assert replayed["attributes"]["gen_ai.response.id"] == "resp-0"
    assert "durableagent.step.recorded_start" in replayed["attributes"]


def test_a_worker_killed_mid_step_leaves_its_finished_spans_in_the_runs_trace(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "slow", [Message("user", "a slow question")])
    log = tmp_path / "worker.log"
    with Receiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        first = worker(root, log, **env)
        try:
            wait_for(lambda: bool(receiver.named("chat gpt-test")), 30, "the first model span")
            looking = lambda: any(r.step.startswith("tool/") for r in store.load("slow"))  # noqa: E731
            wait_for(looking, 10, "the lookup under way")
        finally:
            first.send_signal(signal.SIGKILL)  # inside the lookup: the attempt is lost
            first.wait(10)
        (root / ".side").mkdir(exist_ok=True)
        (root / ".side" / "go").write_text("")
        second = worker(root, log, **env)
        try:
            wait_for(
                lambda: bool(receiver.named("durableagent.attempt")),
                30,
                f"the second attempt's span\n{log.read_text()}",
            )
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(15)
        spans = list(receiver.spans)
    trace_id = f"{run_trace_id(store.load('slow')[0]):032x}"
    assert {s["trace_id"] for s in spans} == {trace_id}
    (attempt,) = receiver.named("durableagent.attempt")  # the killed one never ended
    assert attempt["attributes"]["durableagent.attempt"] == 2
    assert attempt["attributes"]["durableagent.outcome"] == "completed"
    ids = {s["span_id"] for s in spans}
    lost = [s for s in spans if s["parent"] not in ids and s["name"] != "durableagent.attempt"]
    assert [(s["name"], s["attributes"]["durableagent.step.replayed"]) for s in lost] == [
        ("chat gpt-test", False)
    ]
    second_steps = sorted(
        (s["name"], s["attributes"]["durableagent.step.replayed"])
        for s in spans
        if s["parent"] == attempt["span_id"]
    )
    assert second_steps == [
        ("chat gpt-test", False),
        ("chat gpt-test", True),
        ("execute_tool lookup", False),
    ]
