"""Races between a worker and a human, and a worker stopped mid-step: an accepted deny always
wins, a refused decision changes nothing, a stopped worker never doubles a write."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _child_agents import lines
from procs import WorkerProcess, wait_for

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    Message,
    PolicyGate,
    Reconcile,
    Record,
    RunBusyError,
    RunStatus,
    ScriptedModel,
    SignalError,
    Tool,
    ToolCall,
    run,
    signal,
    submit,
    view_store,
)
from durableagent.journal import steps_still_running
from durableagent.worker import EXIT_STEPS_ABANDONED

WRITE = "tool/1/1/create_ticket"


def agentrun(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args, "--store", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def status(store: FileStore, run_id: str) -> RunStatus:
    return view_store(store, run_id).status


def touch(root: Path, name: str) -> None:
    (root / ".side").mkdir(exist_ok=True)
    (root / ".side" / name).touch()


def result_of(store: FileStore, run_id: str, step: str) -> Any:
    return next(r.data for r in store.load(run_id) if r.type == "step.completed" and r.step == step)


def approved_race(store: FileStore, workers: Callable[..., WorkerProcess]) -> str:
    """A run of the race agent, its write approved by alice, resumed by a worker process that
    is now inside the turn's earlier call (a read held open). Returns the write's marker."""
    submit(store, "r", [Message("user", "access to billing")])
    workers(store.root, "race")
    wait_for(lambda: status(store, "r") == RunStatus.AWAITING_APPROVAL, why="the approval wait")
    (pending,) = view_store(store, "r").pending
    assert pending.step == WRITE
    ok = agentrun(store.root, "approve", "r", pending.marker, "--by", "alice")
    assert ok.returncode == 0, ok.stderr
    wait_for(lambda: lines(store.root, "lookups") == ["begin"], why="the read to start")
    return pending.marker


def test_a_deny_accepted_while_the_turns_earlier_call_runs_stops_the_write(
    store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    marker = approved_race(store, workers)
    denied = agentrun(store.root, "deny", "r", marker, "--by", "bob", "--reason", "not today")
    assert denied.returncode == 0, denied.stderr
    assert "denied" in denied.stdout
    touch(store.root, "go")
    wait_for(lambda: status(store, "r") == RunStatus.COMPLETED, why="the run to finish")
    assert lines(store.root, "tickets") == [], "the write ran after an accepted deny"
    assert result_of(store, "r", WRITE) == {
        "content": "denied by bob: not today",
        "is_error": True,
    }
    started = next(r for r in store.load("r") if r.type == "step.started" and r.step == WRITE)
    assert started.data == {"write": True, "refused": True}  # never called: nothing to reconcile
    answer = view_store(store, "r").answer
    assert answer is not None and "denied by bob" in answer.content


def test_a_deny_after_the_write_started_is_refused_and_names_what_won(
    store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    marker = approved_race(store, workers)
    touch(store.root, "go")
    wait_for(lambda: lines(store.root, "tickets") == ["begin"], why="the write to start")
    before = store.path("r").read_bytes()
    denied = agentrun(store.root, "deny", "r", marker, "--by", "bob")
    assert denied.returncode == 1
    assert "too late to deny" in denied.stderr and "approved by alice" in denied.stderr
    assert store.path("r").read_bytes() == before
    touch(store.root, "go-write")
    wait_for(lambda: status(store, "r") == RunStatus.COMPLETED, why="the run to finish")
    assert lines(store.root, "tickets") == ["begin", "end"]
    assert result_of(store, "r", WRITE) == {"content": "TICKET-1", "is_error": False}


def helpdesk_turn(
    store: FileStore, lookup: Callable[[dict[str, Any]], str], tickets: list[str]
) -> Config:
    """One turn: a lookup and a ticket (needs approval, filed into ``tickets``), then the
    answer."""

    def reply(messages: Any) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message(
                "assistant",
                tool_calls=(
                    ToolCall("r1", "lookup", {}),
                    ToolCall("w1", "create_ticket", {"summary": "billing"}),
                ),
            )
        return Message("assistant", " | ".join(m.content for m in done))

    def create_ticket(args: dict[str, Any]) -> str:
        tickets.append("filed")
        return f"TICKET-{len(tickets)}"

    tools = [Tool("lookup", fn=lookup), Tool("create_ticket", fn=create_ticket)]
    return Config(
        AgentConfig(ScriptedModel(reply), tools), PolicyGate(writes={"create_ticket"}), store
    )


async def test_a_deny_recorded_after_the_attempt_loaded_the_journal_still_stops_the_write(
    store: FileStore,
) -> None:
    """Deterministic: the turn's read itself records the deny, after the attempt loaded the
    journal and before the write's start is recorded."""
    marker: list[str] = []

    def lookup(args: dict[str, Any]) -> str:
        signal(store, "d", "deny", {"marker": marker[0]}, by="bob", reason="no")
        return "policy"

    tickets: list[str] = []
    config = helpdesk_turn(store, lookup, tickets)
    out = await run(config, "d", [Message("user", "billing")])
    marker.append(out.pending[0].marker)
    signal(store, "d", "approve", {"marker": marker[0]}, by="alice")
    done = await run(config, "d", None)
    assert done.status == "completed"
    assert tickets == []
    assert result_of(store, "d", WRITE) == {"content": "denied by bob: no", "is_error": True}
    # The attempt saw the deny land: it belongs to the records the run went on with.
    types = [(r.type, r.step) for r in store.load("d")]
    assert types.index(("signal", WRITE)) < types.index(("step.started", WRITE))


class DenyBeforeTheFirstCall(FileStore):
    """The real store, through which a deny of the turn's second call lands (from another
    FileStore on the same directory, as another process's would) just before the turn's
    first call records its start: after the attempt loaded the journal."""

    def __init__(self, root: Path, deny: Callable[[], object]) -> None:
        super().__init__(root)
        self.deny: Callable[[], object] | None = deny

    def append(self, run_id: str, record: Record, **kwargs: Any) -> Record:
        if record.type == "step.started" and record.step == "tool/1/0/create_ticket":
            deny, self.deny = self.deny, None
            if deny is not None:
                deny()
        return super().append(run_id, record, **kwargs)


async def test_a_deny_landing_before_the_turns_first_call_still_stops_the_call_it_names(
    store: FileStore,
) -> None:
    """The first call's start reads the deny (it names the second call): the second call's
    own start must still refuse it, though its check finds nothing new."""
    filed: list[str] = []

    def reply(messages: Any) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message(
                "assistant",
                tool_calls=(
                    ToolCall("a", "create_ticket", {"summary": "first"}),
                    ToolCall("b", "create_ticket", {"summary": "second"}),
                ),
            )
        return Message("assistant", " | ".join(m.content for m in done))

    def create_ticket(args: dict[str, Any]) -> str:
        filed.append(args["summary"])
        return f"filed {args['summary']}"

    def config(on: FileStore) -> Config:
        agent = AgentConfig(ScriptedModel(reply), [Tool("create_ticket", fn=create_ticket)])
        return Config(agent, PolicyGate(writes={"create_ticket"}), on)

    out = await run(config(store), "t", [Message("user", "two tickets")])
    first, second = (p.marker for p in out.pending)
    for marker in (first, second):
        signal(store, "t", "approve", {"marker": marker}, by="alice")
    other = FileStore(store.root)
    racing = DenyBeforeTheFirstCall(
        store.root,
        lambda: signal(other, "t", "deny", {"marker": second}, by="bob", reason="one is enough"),
    )
    done = await run(config(racing), "t", None)
    assert done.status == "completed"
    assert filed == ["first"], "the second call ran though its deny was accepted"
    assert result_of(store, "t", "tool/1/1/create_ticket") == {
        "content": "denied by bob: one is enough",
        "is_error": True,
    }
    types = [(r.type, r.step) for r in store.load("t")]
    assert types.index(("signal", "tool/1/1/create_ticket")) < types.index(
        ("step.started", "tool/1/0/create_ticket")
    )


class SlipIn:
    """A FileStore through which a competing decision lands just before the next append: the
    window between a signal's own load and its append."""

    def __init__(self, inner: FileStore, compete: Callable[[], object]) -> None:
        self.inner = inner
        self.compete: Callable[[], object] | None = compete

    def load(self, run_id: str) -> list[Record]:
        return self.inner.load(run_id)

    def append(self, run_id: str, record: Record, *, check: Any = None) -> Record:
        if self.compete is not None:
            compete, self.compete = self.compete, None
            compete()
        return self.inner.append(run_id, record, check=check)


async def test_signal_checks_run_under_the_journal_lock(store: FileStore) -> None:
    config = helpdesk_turn(store, lambda args: "policy", [])
    out = await run(config, "s", [Message("user", "billing")])
    marker = out.pending[0].marker
    slipping = SlipIn(store, lambda: signal(store, "s", "deny", {"marker": marker}, by="bob"))
    with pytest.raises(SignalError, match="already denied by bob"):
        signal(slipping, "s", "approve", {"marker": marker}, by="alice")  # type: ignore[arg-type]
    decisions = [r.data["name"] for r in store.load("s") if r.type == "signal"]
    assert decisions == ["deny"]


# -- a worker stopped while a step runs ----------------------------------------------------


def test_a_worker_out_of_grace_exits_rather_than_free_the_lease_of_a_live_write(
    store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    submit(store, "slow", [Message("user", "write it")])
    w = workers(store.root, "slow", "--grace", "0.3", SLOW_WRITE_SECONDS="2.5")
    wait_for(lambda: lines(store.root, "writes") == ["begin"], why="the write to start")
    assert store.is_leased("slow")
    stopped_at = time.monotonic()
    assert w.stop() == EXIT_STEPS_ABANDONED
    assert time.monotonic() - stopped_at < 2.0, "the worker waited for the write"
    assert "exiting the process without releasing their leases" in w.log.read_text()
    assert not store.is_leased("slow")  # the kernel freed it with the process
    assert status(store, "slow") == RunStatus.INDETERMINATE
    time.sleep(2.8)  # when the write would have ended, had its thread outlived the worker
    assert lines(store.root, "writes") == ["begin"]

    # The documented procedure: nothing happened, so retry; the write runs once more.
    signal(store, "slow", "reconcile", Reconcile("tool/1/0/slow_write", "retry"), by="oncall")
    w2 = workers(store.root, "slow", SLOW_WRITE_SECONDS="0.1")
    wait_for(lambda: status(store, "slow") == RunStatus.COMPLETED, why="the retried run")
    assert w2.stop() == 0
    assert lines(store.root, "writes") == ["begin", "begin", "end"]


async def test_a_cancelled_attempt_keeps_the_lease_until_its_tool_thread_ends(
    store: FileStore,
) -> None:
    began, finish = threading.Event(), threading.Event()
    effects: list[str] = []

    def write(args: dict[str, Any]) -> str:
        began.set()
        finish.wait(10)
        effects.append("written")
        return "done"

    def reply(messages: Any) -> Message:
        if not any(m.role == "tool" for m in messages):
            return Message("assistant", tool_calls=(ToolCall("w", "write", {}),))
        return Message("assistant", "ok")

    config = Config(
        AgentConfig(ScriptedModel(reply), [Tool("write", fn=write)]),
        PolicyGate(writes={"write"}, approve=()),
        store,
    )
    attempt = asyncio.create_task(run(config, "c", [Message("user", "go")]))
    assert await asyncio.to_thread(began.wait, 10)
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert store.is_leased("c"), "the lease was freed under a live tool thread"
    assert steps_still_running() == 1
    with pytest.raises(RunBusyError):
        await run(config, "c", None)
    finish.set()
    deadline = time.monotonic() + 10
    while store.is_leased("c"):
        assert time.monotonic() < deadline, "the lease was never freed"
        await asyncio.sleep(0.01)
    assert steps_still_running() == 0
    assert effects == ["written"]
    assert status(store, "c") == RunStatus.INDETERMINATE  # its result was never recorded
