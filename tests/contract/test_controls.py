"""Cancel, pause and resume (SPEC §10) on both stores: signals in the journal, re-checked
under its lock at each step start, heard live by the running attempt."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from durableagent import (
    AgentConfig,
    Config,
    Message,
    PolicyGate,
    Reconcile,
    RunHalted,
    RunStatus,
    ScriptedModel,
    SignalError,
    Status,
    Store,
    Tool,
    ToolCall,
    ToolContext,
    run,
    signal,
    view_store,
)
from durableagent.record import SIGNAL, STEP_STARTED

INPUT = [Message("user", "look it up, then file it")]


class Agent:
    """``slow_lookup`` (a read that runs until its call is cancelled, or ``read_for``
    seconds), then ``file`` (a write that waits for ``go`` and notes whether it saw
    ``ctx.cancelled``), then the answer."""

    def __init__(self, read_for: float = 60.0) -> None:
        self.read_for = read_for
        self.reads_begun = threading.Event()
        self.read_cancelled = False
        self.write_begun = threading.Event()
        self.go = threading.Event()
        self.write_saw_cancel = False
        self.notice_cancel = 5.0  # how long the write waits to see ctx.cancelled
        self.writes = 0

    def reply(self, messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message("assistant", tool_calls=(ToolCall("a", "slow_lookup", {}),))
        if len(done) == 1:
            return Message("assistant", tool_calls=(ToolCall("b", "file", {}),))
        return Message("assistant", "filed")

    async def slow_lookup(self, args: dict[str, Any]) -> str:
        self.reads_begun.set()
        try:
            await asyncio.sleep(self.read_for)
        except asyncio.CancelledError:
            self.read_cancelled = True
            raise
        return "the policy"

    def file(self, args: dict[str, Any], ctx: ToolContext) -> str:
        self.write_begun.set()
        self.go.wait(30)
        self.write_saw_cancel = ctx.cancelled.wait(self.notice_cancel)
        self.writes += 1
        return "T-1"

    def config(self, store: Store) -> Config:
        tools = [
            Tool("slow_lookup", "look up", {"type": "object"}, self.slow_lookup),
            Tool("file", "file a ticket", {"type": "object"}, self.file),
        ]
        agent = AgentConfig(ScriptedModel(self.reply), tools)
        return Config(agent, PolicyGate(writes={"file"}, approve=()), store)


def after(store: Store, run_id: str, seq: int, rtype: str) -> list[Any]:
    return [r for r in store.load(run_id) if r.seq > seq and r.type == rtype]


async def test_a_cancel_heard_while_a_read_runs_cancels_it_and_no_step_starts_after(
    any_store: Store,
) -> None:
    agent = Agent()
    config = agent.config(any_store)
    attempt = asyncio.create_task(run(config, "c1", INPUT))
    await asyncio.to_thread(agent.reads_begun.wait, 10)
    cancel = await asyncio.to_thread(
        signal, any_store, "c1", "cancel", {}, by="ana", reason="looping on a bad prompt"
    )
    out = await asyncio.wait_for(attempt, 10)  # the read would sleep a minute
    assert out.status == Status.CANCELLED and "cancelled by ana" in out.error
    assert agent.read_cancelled
    assert after(any_store, "c1", cancel.seq, STEP_STARTED) == []
    assert not any(r.step == "tool/1/0/slow_lookup" and r.type == "step.completed"
                   for r in any_store.load("c1"))  # fmt: skip
    view = view_store(any_store, "c1")
    assert view.status == RunStatus.CANCELLED
    assert view.waiting_on.startswith("cancelled by ana at ")
    assert view.waiting_on.endswith(": looping on a bad prompt")
    with pytest.raises(RunHalted, match="cancelled by ana"):
        await run(config, "c1", None)  # nothing resumes it


async def test_a_write_in_flight_is_never_interrupted_it_records_then_the_attempt_stops(
    any_store: Store,
) -> None:
    agent = Agent(read_for=0.0)
    config = agent.config(any_store)
    attempt = asyncio.create_task(run(config, "c2", INPUT))
    await asyncio.to_thread(agent.write_begun.wait, 10)
    cancel = await asyncio.to_thread(signal, any_store, "c2", "cancel", {}, by="bo", reason="x")
    await asyncio.sleep(1.5)  # the attempt hears of it (it looks every second) meanwhile
    assert not attempt.done()
    agent.go.set()
    out = await asyncio.wait_for(attempt, 10)
    assert out.status == Status.CANCELLED
    assert agent.writes == 1 and agent.write_saw_cancel  # ctx.cancelled told the tool
    later = after(any_store, "c2", cancel.seq, "step.completed")
    assert [r.step for r in later] == ["tool/2/0/file"]  # its result, recorded after
    assert after(any_store, "c2", cancel.seq, STEP_STARTED) == []
    assert view_store(any_store, "c2").status == RunStatus.CANCELLED


async def test_pause_holds_a_run_and_resume_lets_it_go_on(any_store: Store) -> None:
    agent = Agent(read_for=0.0)
    agent.go.set()
    config = agent.config(any_store)
    attempt = asyncio.create_task(run(config, "p1", INPUT))
    await asyncio.to_thread(agent.write_begun.wait, 10)
    await asyncio.to_thread(signal, any_store, "p1", "pause", {}, by="cy", reason="checking")
    out = await asyncio.wait_for(attempt, 10)
    assert out.status in (Status.PAUSED, Status.COMPLETED)
    if out.status == Status.COMPLETED:
        pytest.fail("the pause landed after the last step: the run should not have finished")
    view = view_store(any_store, "p1")
    assert view.status == RunStatus.PAUSED and view.waiting_on.startswith("paused by cy")
    with pytest.raises(RunHalted, match="resume it first"):
        await run(config, "p1", None)
    with pytest.raises(SignalError, match="already paused by cy"):
        signal(any_store, "p1", "pause", {}, by="dee", reason="me too")
    signal(any_store, "p1", "resume", {}, by="cy")
    assert view_store(any_store, "p1").status == RunStatus.READY
    with pytest.raises(SignalError, match="not paused"):
        signal(any_store, "p1", "resume", {}, by="cy")
    out = await run(config, "p1", None)
    assert out.status == Status.COMPLETED and agent.writes == 1


async def test_a_cancelled_run_takes_no_signal_but_the_reconcile_of_its_open_write(
    any_store: Store,
) -> None:
    agent = Agent(read_for=0.0)
    agent.notice_cancel = 0.0
    config = agent.config(any_store)
    attempt = asyncio.create_task(run(config, "c3", INPUT))
    await asyncio.to_thread(agent.write_begun.wait, 10)
    attempt.cancel()  # the attempt is killed inside its write: the write stays open
    with pytest.raises(asyncio.CancelledError):
        await attempt
    agent.go.set()
    while any_store.is_leased("c3"):  # kept until the write's thread ended
        await asyncio.sleep(0.05)
    assert view_store(any_store, "c3").status == RunStatus.INDETERMINATE
    signal(any_store, "c3", "cancel", {}, by="ana", reason="wrong customer")
    before = any_store.export_run("c3")
    for name, payload in [
        ("pause", {}),
        ("resume", {}),
        ("cancel", {}),
        ("budget", {"add": {"tokens": 5}}),
        ("reconcile", Reconcile("tool/2/0/file", "retry")),
    ]:
        with pytest.raises(SignalError, match="cancelled by ana") as e:
            signal(any_store, "c3", name, payload, by="bo", reason="why not")
        assert e.value.run_id == "c3"
    assert any_store.export_run("c3") == before  # byte-identical
    signal(any_store, "c3", "reconcile", Reconcile("tool/2/0/file", "done", "T-1"), by="bo")
    assert view_store(any_store, "c3").status == RunStatus.CANCELLED


def test_controls_need_a_reason_and_a_run_that_can_take_them(any_store: Store) -> None:
    from durableagent import submit

    submit(any_store, "r1", INPUT)
    before = any_store.export_run("r1")
    for name in ("cancel", "pause"):
        with pytest.raises(SignalError, match=f"{name} needs a reason"):
            signal(any_store, "r1", name, {}, by="ana")
        with pytest.raises(SignalError, match="needs a reason"):
            signal(any_store, "r1", name, {}, by="ana", reason="  ")
    with pytest.raises(SignalError, match="takes no payload"):
        signal(any_store, "r1", "cancel", {"now": True}, by="ana", reason="x")
    assert any_store.export_run("r1") == before
    signal(any_store, "r1", "cancel", {}, by="ana", reason="not needed")
    records = any_store.load("r1")
    assert records[-1].type == SIGNAL
    assert records[-1].data == {
        "name": "cancel",
        "payload": {},
        "by": "ana",
        "reason": "not needed",
    }


async def test_a_cancel_landing_while_a_read_runs_refuses_its_result_under_the_lock(
    any_store: Store,
) -> None:
    """The listener aside (it looks once a second here), the read's start and result are
    appended under the lock only if no cancel landed meanwhile."""
    cancelled: list[int] = []

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message("assistant", tool_calls=(ToolCall("a", "lookup", {}),))
        return Message("assistant", "done")

    def lookup(args: dict[str, Any]) -> str:
        r = signal(any_store, "c4", "cancel", {}, by="ana", reason="stop now")
        cancelled.append(r.seq)
        return "found"

    tools = [Tool("lookup", "look up", {"type": "object"}, lookup)]
    config = Config(AgentConfig(ScriptedModel(reply), tools), PolicyGate(), any_store)
    started = time.monotonic()
    out = await run(config, "c4", INPUT)
    assert time.monotonic() - started < 5
    assert out.status == Status.CANCELLED
    assert after(any_store, "c4", cancelled[0], STEP_STARTED) == []
    assert not any(r.type == "step.completed" and r.kind == "tool" for r in any_store.load("c4"))


def test_a_held_run_says_it_is_stopping_after_a_cancel_or_a_pause(any_store: Store) -> None:
    """The stores keep a run's summary as if its lease were free; while an attempt holds it
    after a pause (or a cancel), the listing says the run is running and stopping, and why."""
    from durableagent.testing import JournalWriter

    j = JournalWriter(any_store, "h1", 1000.0)
    j.start("look it up")
    with j.attempt("host-a"):
        signal(any_store, "h1", "pause", {}, by="ana", reason="vendor outage")
        (row,) = [s for s in any_store.summaries() if s.run_id == "h1"]
        assert row.status == RunStatus.RUNNING and row.stopping == "pause"
        assert row.waiting_on.startswith("stopping: paused by ana at ")
        assert row.waiting_on.endswith(": vendor outage")
        assert view_store(any_store, "h1").waiting_on == row.waiting_on
    (row,) = [s for s in any_store.summaries() if s.run_id == "h1"]
    assert row.status == RunStatus.PAUSED and row.waiting_on.startswith("paused by ana at ")


async def test_a_cancel_accepted_while_a_write_runs_lets_no_model_call_start_after_it(
    any_store: Store,
) -> None:
    """The write is quick (no listener hears the cancel while it runs): the step after it,
    a model call whose start is not recorded before it runs, re-checks the controls at its
    start and never calls the model."""
    calls: list[int] = []

    def reply(messages: Sequence[Message]) -> Message:
        calls.append(len(messages))
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message("assistant", tool_calls=(ToolCall("a", "file", {}),))
        return Message("assistant", "filed")

    cancelled: list[int] = []

    def file(args: dict[str, Any]) -> str:
        r = signal(any_store, "c5", "cancel", {}, by="ana", reason="wrong customer")
        cancelled.append(r.seq)
        return "T-1"

    tools = [Tool("file", "file a ticket", {"type": "object"}, file)]
    gate = PolicyGate(writes={"file"}, approve=())
    config = Config(AgentConfig(ScriptedModel(reply), tools), gate, any_store)
    out = await run(config, "c5", INPUT)
    assert out.status == Status.CANCELLED and "cancelled by ana" in out.error
    assert len(calls) == 1  # the model was called once, before the write; never after
    later = after(any_store, "c5", cancelled[0], "step.completed")
    assert [r.step for r in later] == ["tool/1/0/file"]  # the write's result is kept
    assert after(any_store, "c5", cancelled[0], STEP_STARTED) == []
    assert view_store(any_store, "c5").status == RunStatus.CANCELLED


async def test_a_pause_landing_while_a_shown_read_runs_cancels_the_read_as_a_cancel_does(
    any_store: Store,
) -> None:
    """The read has run past SHOW_AFTER (its start is in the journal) when the pause lands:
    the attempt hears of it, cancels the read, records nothing of it and stops paused."""
    agent = Agent(read_for=600.0)
    config = agent.config(any_store)
    attempt = asyncio.create_task(run(config, "p2", INPUT))
    shown: list[Any] = []
    for _ in range(600):  # up to a minute for the read's start to be shown
        shown = [
            r
            for r in any_store.load("p2")
            if r.type == STEP_STARTED and r.step.endswith("slow_lookup")
        ]
        if shown:
            break
        await asyncio.sleep(0.1)
    assert shown, "the read's start was never shown"
    pause = await asyncio.to_thread(
        signal, any_store, "p2", "pause", {}, by="cy", reason="vendor outage"
    )
    out = await asyncio.wait_for(attempt, 60)  # the read would sleep ten minutes
    assert out.status == Status.PAUSED and "paused by cy" in out.error
    assert agent.read_cancelled
    assert after(any_store, "p2", pause.seq, STEP_STARTED) == []
    assert not any(
        r.type == "step.completed" and r.step.endswith("slow_lookup") for r in any_store.load("p2")
    )
    assert view_store(any_store, "p2").status == RunStatus.PAUSED
