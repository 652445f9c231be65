"""Fencing with real processes, on every store: a worker paused (SIGSTOP) inside a step past
its lease's ttl, then woken (SIGCONT). No tool effect is doubled, no record of a holder that
lost its lease lands, and the woken worker goes on serving.

In PostgreSQL the paused worker's lease expires: a second worker takes the run over and
finishes it, and none of the first one's records land. On one host the kernel knows the paused
worker is alive (it holds the flock): it is shown as stuck, never taken over, and finishes
the run itself once woken.
"""

from __future__ import annotations

import signal as sig
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from procs import WorkerProcess, child_env, wait_for

from durableagent import (
    FileStore,
    Message,
    Reconcile,
    RunStatus,
    Store,
    signal,
    submit,
    view_store,
)
from durableagent.record import SIGNAL, STEP_COMPLETED, STEP_STARTED

TTL = "1"  # seconds: the paused worker's lease is free soon after it stops renewing


@pytest.fixture
def start(tmp_path: Path, store_spec: str) -> Iterator[Callable[..., WorkerProcess]]:
    """Start ``agentrun worker --agent _child_agents:fenced --owner NAME`` on the store."""
    started: list[WorkerProcess] = []
    side = tmp_path / "side"
    side.mkdir()

    def start_worker(owner: str, hold: str = "") -> WorkerProcess:
        w = WorkerProcess(
            store_spec,
            "fenced",
            tmp_path / f"worker-{owner}.log",
            "--owner",
            owner,
            "--lease-ttl",
            TTL,
            AGENTRUN_SIDE=str(side),
            FENCE_HOLD=hold,
        )
        started.append(w)
        return w

    yield start_worker
    for w in started:
        if w.proc.poll() is None:
            w.proc.send_signal(sig.SIGCONT)
        w.kill()


def lines(side: Path, what: str) -> list[str]:
    p = side / f"{what}.log"
    return p.read_text().splitlines() if p.exists() else []


def log_of(w: WorkerProcess) -> str:
    return w.log.read_text()


def status(store: Store, run_id: str) -> RunStatus:
    summary = store.summary(run_id)
    return RunStatus.READY if summary is None else summary.status


def finished(store: Store, run_id: str) -> bool:
    """The run completed and its attempt's end is logged. The end is written when the lease is
    released, just after the run's last record, so a reader can see one without the other."""
    attempts = store.attempts(run_id)
    return status(store, run_id) == RunStatus.COMPLETED and attempts[-1].ended is not None


def wake_and_watch_it_fail(a: WorkerProcess, store: Store, run_id: str, gate: Path) -> None:
    """Let the paused worker's step finish (its gate opens), wake it, and wait until it has
    tried to record the step and been refused. The journal must not change meanwhile."""
    before = store.load(run_id)
    gate.touch()
    a.proc.send_signal(sig.SIGCONT)
    wait_for(
        lambda: f"run {run_id}: lost the lease" in log_of(a),
        timeout=30,
        why=f"the woken worker to log its lost lease:\n{log_of(a)}",
    )
    assert store.load(run_id) == before
    assert a.proc.poll() is None, "the woken worker must go on serving"


def still_serving(a: WorkerProcess, b: WorkerProcess, store: Store) -> None:
    """Stop the second worker; the first one (woken, fenced off) still runs a new run."""
    assert b.stop() == 0
    submit(store, "after", [Message("user", "and another")])
    wait_for(
        lambda: status(store, "after") == RunStatus.COMPLETED,
        timeout=30,
        why=f"the woken worker to run a new run:\n{log_of(a)}",
    )
    assert [x.owner for x in store.attempts("after")] == ["A"]


def agentrun(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    """``agentrun ARGS --store`` this store, its stdin not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args, "--store", store.description],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=child_env(),
        timeout=60,
    )


def started(store: Store, run_id: str, step: str) -> bool:
    return any(r.type == STEP_STARTED and r.step == step for r in store.load(run_id))


def stuck_and_kept(store: Store, a: WorkerProcess, b: WorkerProcess, run_id: str) -> None:
    """On one host: the paused holder is shown as stuck and nobody takes its run over."""
    wait_for(
        lambda: "stuck" in (store.lease_holder(run_id) or {}),
        timeout=30,
        why="A to show as stuck",
    )
    (summary,) = [s for s in store.summaries() if s.run_id == run_id]
    assert summary.status == RunStatus.RUNNING
    assert summary.waiting_on.startswith("stuck: A ") and "end that process" in summary.waiting_on
    time.sleep(3)  # three ttls, with B looking: the flock is A's while A lives
    assert [x.owner for x in store.attempts(run_id)] == ["A"], log_of(b)


def test_a_worker_paused_inside_a_write_is_fenced_off_and_its_write_is_reconciled_once(
    any_store: Store, start: Callable[..., WorkerProcess], tmp_path: Path
):
    store, side = any_store, tmp_path / "side"
    submit(store, "f1", [Message("user", "file it")])
    a = start("A", hold="write")
    wait_for(lambda: lines(side, "tickets") != [], timeout=30, why="A inside create_ticket")
    a.proc.send_signal(sig.SIGSTOP)
    pid_a = str(a.proc.pid)

    if isinstance(store, FileStore):
        b = start("B")
        stuck_and_kept(store, a, b, "f1")
        (side / "go-write").touch()
        a.proc.send_signal(sig.SIGCONT)
        wait_for(lambda: finished(store, "f1"), timeout=30, why=f"the run:\n{log_of(a)}")
        records = store.load("f1")
        ticket = [r for r in records if r.step == "tool/2/0/create_ticket"]
        assert [r.type for r in ticket] == [STEP_STARTED, STEP_COMPLETED]
        assert ticket[1].data["content"] == "TICKET-1"  # A's own result, recorded once
        assert lines(side, "tickets") == [f"begin {pid_a}", f"end {pid_a}"]
        assert store.attempts("f1")[0].owner == "A"
        still_serving(a, b, store)
        return

    # A stops renewing; once its ttl passed the run is nobody's, and its open write shows.
    wait_for(lambda: not store.is_leased("f1"), timeout=30, why="A's lease to expire")
    summary = store.summary("f1")
    assert summary is not None and summary.status == RunStatus.INDETERMINATE
    assert summary.indeterminate == "tool/2/0/create_ticket"
    # A may wake and still send its write: the human is told, and a retry is asked twice.
    # However long the silence lasts (here past two ttls since A's last record): until a
    # takeover, nothing says A is dead rather than paused. (The readers judge by their own
    # store's ttl, the default: longer than A's.)
    last = store.load("f1")[-1].at
    ttls = 2 * max(store.lease_ttl, float(TTL)) + 1
    wait_for(lambda: time.time() - last > ttls, timeout=ttls + 30, why="two ttls of silence")
    assert "owner A" in view_store(store, "f1").late_write
    assert status(store, "f1") == RunStatus.INDETERMINATE
    shown = agentrun(store, "show", "f1")
    assert shown.returncode == 0, shown.stderr
    (warning,) = [x for x in shown.stdout.splitlines() if x.strip().startswith("warning")]
    assert "owner A" in warning and "may still land" in warning, shown.stdout
    before = store.load("f1")
    retry = agentrun(store, "reconcile", "f1", "tool/2/0/create_ticket", "--retry")
    assert retry.returncode == 1 and "owner A" in retry.stderr and "--yes" in retry.stderr
    assert "may still land" in retry.stderr
    assert store.load("f1") == before

    b = start("B")
    signal(store, "f1", "reconcile", Reconcile("tool/2/0/create_ticket", "done", "T-7"), by="op")
    wait_for(
        lambda: finished(store, "f1"),
        timeout=30,
        why=f"B to finish the run:\n{log_of(b)}",
    )
    wake_and_watch_it_fail(a, store, "f1", side / "go-write")

    records = store.load("f1")
    ticket = [r for r in records if r.step == "tool/2/0/create_ticket" and r.type != SIGNAL]
    assert [r.type for r in ticket] == [STEP_STARTED, STEP_COMPLETED]
    assert ticket[1].data["content"] == "T-7"  # the human's result, not A's late one
    assert view_store(store, "f1").answer.content == "filed T-7"  # type: ignore[union-attr]
    assert lines(side, "tickets") == [f"begin {pid_a}", f"end {pid_a}"]  # one ticket, A's
    attempts = store.attempts("f1")
    ended = [(x.owner, x.ended) for x in attempts]
    assert ended == [("A", "lost"), ("B", "completed")], log_of(a) + log_of(b)
    assert attempts[1].epoch > attempts[0].epoch
    still_serving(a, b, store)


def test_a_worker_paused_inside_a_read_is_fenced_off_and_the_read_runs_again(
    any_store: Store, start: Callable[..., WorkerProcess], tmp_path: Path
):
    store, side = any_store, tmp_path / "side"
    submit(store, "f1", [Message("user", "look it up")])
    a = start("A", hold="read")
    wait_for(lambda: lines(side, "lookups") != [], timeout=30, why="A inside lookup")
    # A slow read's start shows while it runs (a fast one's travels with its result).
    wait_for(lambda: started(store, "f1", "tool/1/0/lookup"), timeout=30, why="the read shown")
    a.proc.send_signal(sig.SIGSTOP)
    pid_a = str(a.proc.pid)

    if isinstance(store, FileStore):
        b = start("B")
        stuck_and_kept(store, a, b, "f1")
        (side / "go-read").touch()
        a.proc.send_signal(sig.SIGCONT)
        wait_for(lambda: finished(store, "f1"), timeout=30, why=f"the run:\n{log_of(a)}")
        lookup = [r for r in store.load("f1") if r.step == "tool/1/0/lookup"]
        # Woken past its ttl, A records the read it made (its lease was never anyone else's)
        # or, its own clock saying the lease may be lost, calls nothing more and the read
        # runs again: either way, one ticket.
        assert lookup[0].type == STEP_STARTED
        assert lookup[-1].type == STEP_COMPLETED
        assert lines(side, "lookups")[0] == f"begin {pid_a}"
        assert len([t for t in lines(side, "tickets") if t.startswith("end")]) == 1
        still_serving(a, b, store)
        return

    wait_for(lambda: not store.is_leased("f1"), timeout=30, why="A's lease to expire")
    assert status(store, "f1") == RunStatus.READY  # an unfinished read is simply run again

    b = start("B")
    wait_for(
        lambda: finished(store, "f1"),
        timeout=30,
        why=f"B to take the run over:\n{log_of(b)}",
    )
    wake_and_watch_it_fail(a, store, "f1", side / "go-read")

    records = store.load("f1")
    lookup = [r for r in records if r.step == "tool/1/0/lookup" and r.type != SIGNAL]
    assert [r.type for r in lookup] == [STEP_STARTED, STEP_STARTED, STEP_COMPLETED]
    pid_b = str(b.proc.pid)
    assert lines(side, "lookups") == [f"begin {pid_a}", f"begin {pid_b}"]
    assert lines(side, "tickets") == [f"begin {pid_b}", f"end {pid_b}"]
    assert [(x.owner, x.ended) for x in store.attempts("f1")] == [
        ("A", "lost"),
        ("B", "completed"),
    ]
    still_serving(a, b, store)


def test_a_worker_never_starts_a_run_one_of_its_own_calls_is_still_inside(
    any_store: Store, start: Callable[..., WorkerProcess], tmp_path: Path
):
    """A pause ends the attempt during a read, but the read's thread cannot be stopped: it
    goes on, blocked on its gate. Resumed, the run is ready again, and the worker must not
    start it (a second attempt of one run in one process, the old call still inside it)
    until that call returns; then it runs the run to its end."""
    store, side = any_store, tmp_path / "side"
    submit(store, "f1", [Message("user", "look it up")])
    a = start("A", hold="read")
    wait_for(lambda: lines(side, "lookups") != [], timeout=30, why="A inside lookup")
    pid_a = str(a.proc.pid)

    paused = agentrun(store, "pause", "f1", "--reason", "checking", "--by", "ana")
    assert paused.returncode == 0, paused.stderr
    wait_for(
        lambda: [x.ended for x in store.attempts("f1")] == ["paused"],
        timeout=30,
        why=f"A's attempt to end paused:\n{log_of(a)}",
    )
    resumed = agentrun(store, "resume", "f1", "--by", "ana")
    assert resumed.returncode == 0, resumed.stderr
    wait_for(
        lambda: "run f1: a call of an earlier attempt is still running" in log_of(a),
        timeout=30,
        why=f"A to see its own call still in flight:\n{log_of(a)}",
    )
    assert status(store, "f1") == RunStatus.READY
    assert lines(side, "lookups") == [f"begin {pid_a}"]  # the old call, and nothing more
    assert [x.ended for x in store.attempts("f1")] == ["paused"]

    (side / "go-read").touch()  # the old call returns: now the run starts again
    wait_for(lambda: finished(store, "f1"), timeout=30, why=f"the run:\n{log_of(a)}")
    assert lines(side, "lookups") == [f"begin {pid_a}", f"begin {pid_a}"]
    assert lines(side, "tickets") == [f"begin {pid_a}", f"end {pid_a}"]
    assert [x.ended for x in store.attempts("f1")] == ["paused", "completed"]
