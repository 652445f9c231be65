"""Leases: one runner per run, in this process and across processes."""

from __future__ import annotations

import itertools
import os
import signal as sig
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pgserver
import pytest
from pgserver import RowHeld, waiting_for_a_row
from procs import wait_for

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    LeaseLostError,
    Message,
    PolicyGate,
    RunBusyError,
    ScriptedModel,
    Status,
    Store,
    Tool,
    ToolCall,
    run,
)
from durableagent.stores.postgres import PostgresStore
from helpdesk import INPUT, Side, helpdesk

HOLDER = """
import sys, time
from durableagent import FileStore
store = FileStore(sys.argv[1])
with store.lease("r1"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_lease_in_this_process_is_refused_at_once(store: FileStore):
    with store.lease("r1"):
        assert store.is_leased("r1")
        with pytest.raises(RunBusyError) as e, store.lease("r1"):
            pass
        assert e.value.run_id == "r1"
        assert f"pid {os.getpid()}" in str(e.value)
        assert store.lease_holder("r1")["pid"] == os.getpid()
    assert not store.is_leased("r1")
    assert store.lease_holder("r1") is None
    with store.lease("r1"):  # free again once released
        pass


def test_a_lease_held_by_another_process_excludes_and_dies_with_it(store: FileStore):
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "held"
        assert store.is_leased("r1")
        with pytest.raises(RunBusyError, match=f"pid {child.pid}"), store.lease("r1"):
            pass
    finally:
        child.send_signal(sig.SIGKILL)
        child.wait()
        child.stdout.close()
    assert not store.is_leased("r1")  # the kernel dropped the flock with the process
    with store.lease("r1"):
        assert store.is_leased("r1")


async def test_run_refuses_a_busy_run_and_saves_no_outcome(store: FileStore, side: Side):
    config, model = helpdesk(store, side)
    from durableagent import submit

    submit(store, "r1", INPUT)
    with store.lease("r1"), pytest.raises(RunBusyError):
        await run(config, "r1", None)
    assert model.calls == 0
    assert store.last_outcome("r1") is None
    assert len(store.load("r1")) == 1


def test_is_leased_is_false_for_unknown_runs(store: FileStore):
    assert not store.is_leased("never")


class SlowStart(FileStore):
    """A disk that takes ``delay`` seconds to record the write's start (the holder's clock
    moves on meanwhile, as it does for a holder paused right after its fenced start)."""

    delay = 0.0

    def append(self, run_id, record, **kwargs):  # type: ignore[no-untyped-def]
        stored = super().append(run_id, record, **kwargs)
        if record.type == "step.started" and record.step == "tool/2/0/create_ticket":
            time.sleep(self.delay)
        return stored


async def test_a_holder_whose_lease_may_have_lapsed_during_the_start_calls_nothing(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):
    """The fenced start landed, but by the holder's own clock its lease may be another's by
    now (it could not renew for longer than its ttl): it stops before calling the write."""
    from durableagent import LeaseLostError, StoreError, signal
    from durableagent.stores.file.leases import FileLease

    store = SlowStart(tmp_path / "runs", lease_ttl=0.3)
    side = Side(tmp_path / "side")
    config, _ = helpdesk(store, side)
    out = await run(config, "a1", INPUT)
    signal(store, "a1", "approve", {"marker": out.pending[0].marker}, by="alice")

    def unreachable(self: FileLease) -> None:
        raise StoreError("the disk does not answer")

    monkeypatch.setattr(FileLease, "renew", unreachable)
    store.delay = 0.6  # two ttls, with no renewal
    with pytest.raises(LeaseLostError):
        await run(config, "a1", None)
    assert side.tickets() == []  # the write was never called
    last = store.load("a1")[-1]
    assert (last.type, last.step) == ("step.started", "tool/2/0/create_ticket")


def one_tool_then_answer(store: Store, tool: Tool) -> tuple[Config, ScriptedModel]:
    """An agent that calls ``tool`` (a read) once, then answers."""

    def reply(messages: list[Message]) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message("assistant", "done")
        return Message("assistant", tool_calls=(ToolCall("c", tool.name, {}),))

    model = ScriptedModel(reply)
    return Config(AgentConfig(model, [tool]), PolicyGate(), store), model


@pytest.fixture
def pg_schema() -> Iterator[str]:
    with pgserver.fresh_schema() as name:
        yield name


def steps_of(store: Store) -> list[tuple[str, str]]:
    return [(r.type, r.step) for r in store.load("r") if r.step]


async def test_an_attempt_whose_lease_went_unrenewed_past_its_ttl_starts_no_next_step(
    pg_schema: str,
):
    """The lease's renewal is stuck (another transaction holds the run's row) while a step
    runs; once a ttl has passed since the renewal was sent, another runner may take the
    run. The attempt stops before its next step: the model is not called again."""
    ttl = 0.75
    store = PostgresStore.from_url(pgserver.url(pg_schema), lease_ttl=ttl)

    def stall_the_renewal(args: dict[str, Any]) -> str:
        # A slow read's start shows while it runs: let it land before the row is held.
        wait_for(lambda: ("step.started", "tool/1/0/lookup") in steps_of(store), why="a start")
        held = RowHeld(pg_schema, "r")
        try:
            wait_for(lambda: waiting_for_a_row(os.getpid()) == 1, why="a renewal to be stuck")
            stuck_since = time.monotonic()  # the renewal was sent before this
            wait_for(lambda: time.monotonic() > stuck_since + ttl + 0.05, why="a ttl to pass")
        finally:
            held.release()
        return "looked"

    config, model = one_tool_then_answer(store, Tool("lookup", fn=stall_the_renewal))
    try:
        with pytest.raises(LeaseLostError):
            await run(config, "r", [Message("user", "look it up")])
        assert model.calls == 1
        steps = [(r.type, r.step) for r in store.load("r") if r.step]
        assert steps == [
            ("step.started", "llm/1"),
            ("step.completed", "llm/1"),
            ("step.started", "tool/1/0/lookup"),
            ("step.completed", "tool/1/0/lookup"),
        ]
    finally:
        store.close()


async def test_a_running_attempt_renews_its_lease_every_third_of_its_ttl(tmp_path: Path):
    """The FileStore's lease file's mtime is its last renewal, what another runner reads to
    decide whether it may break the lease: during a step it moves on well within a ttl."""
    ttl = 0.6
    store = FileStore(tmp_path / "runs", lease_ttl=ttl)
    lock = store.root / ".leases" / "r.lock"
    renewed: list[int] = []

    def watch_the_lease(args: dict[str, Any]) -> str:
        last = lock.stat().st_mtime_ns
        deadline = time.monotonic() + 6 * ttl
        while len(renewed) < 4 and time.monotonic() < deadline:
            mtime = lock.stat().st_mtime_ns
            if mtime != last:
                renewed.append(mtime)
                last = mtime
            time.sleep(0.005)
        return "watched"

    config, _ = one_tool_then_answer(store, Tool("watch", fn=watch_the_lease))
    out = await run(config, "r", [Message("user", "watch")])
    assert out.status == Status.COMPLETED
    assert len(renewed) >= 3, renewed
    gaps = [(b - a) / 1e9 for a, b in itertools.pairwise(renewed)]
    # Every third of a ttl: a gap can only grow (a busy machine), so the shortest tells.
    assert min(gaps) < 0.75 * ttl, gaps


def test_the_late_write_warning_holds_for_an_attempt_that_ran_long_before_its_write() -> None:
    """An attempt that began an hour before its write, lost inside the write and taken over
    a second after the write began: its worker may be paused, not dead, and the warning
    says so. It is the attempt's last sign of life (the write's start) that counts, not its
    beginning; a takeover long after that last sign says nothing."""
    from durableagent.record import Record
    from durableagent.stores.protocol import LOST, Attempt
    from durableagent.takeover import late_write_note

    t = 1_000_000.0
    write = "tool/2/0/create_ticket"
    records = [
        Record(1, "run.started", "", "", {"input": []}, t),
        Record(2, "step.started", "llm/1", "model", {}, t + 1),
        Record(3, "step.completed", "llm/1", "model", {"role": "assistant"}, t + 2),
        Record(4, "step.started", write, "tool", {"write": True}, t + 3600),
    ]
    holder = Attempt(1, "host-a", 1, t, 1, ended_at=t + 3601, ended=LOST)

    def taken_over_at(at: float) -> list[Attempt]:
        return [holder, Attempt(2, "host-b", 2, at, 5)]

    note = late_write_note(records, taken_over_at(t + 3601), write, ttl=30.0)
    assert "owner host-a, epoch 1" in note and "may still land" in note
    assert "1s after its last record" in note
    assert late_write_note(records, taken_over_at(t + 3600 + 61), write, ttl=30.0) == ""
