"""The worker: real worker processes on real stores."""

from __future__ import annotations

import asyncio
import itertools
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from _child_agents import gated, lines
from procs import WorkerProcess, wait_for

from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent import signal as send_signal
from durableagent.record import RUN_COMPLETED, STEP_STARTED
from durableagent.stores.file import run_of_path
from durableagent.worker import (
    Attempts,
    Worker,
    WorkerThread,
    backoff_delay,
    note_failure,
    read_attempts,
    reset_attempts,
)


def status(store: FileStore, run_id: str) -> RunStatus:
    return view_store(store, run_id).status


def ask(store: FileStore, run_id: str, text: str = "") -> None:
    submit(store, run_id, [Message("user", text or f"ticket for {run_id}")])


# -- pure parts -----------------------------------------------------------------------------


def test_backoff_doubles_from_base_and_stops_at_the_cap() -> None:
    assert [backoff_delay(n, 0.5, 3.0) for n in range(6)] == [0.0, 0.5, 1.0, 2.0, 3.0, 3.0]


def test_changed_files_map_to_their_run(tmp_path: Path) -> None:
    root = tmp_path
    assert run_of_path(root, str(root / "a-1.jsonl")) == "a-1"
    assert run_of_path(root, str(root / ".attempts" / "a-1.jsonl")) == "a-1"
    assert run_of_path(root, str(root / ".leases" / "a-1.lock")) == "a-1"
    assert run_of_path(root, str(root / ".worker" / "a-1.json")) == "a-1"
    assert run_of_path(root, str(root / ".worker" / ".a-1.json.77.tmp")) is None
    assert run_of_path(root, str(root / ".summaries" / "index.jsonl")) is None
    assert run_of_path(root, str(root / ".demo" / "tickets.json")) is None
    assert run_of_path(root, str(root / "notes.txt")) is None
    assert run_of_path(root, str(root / "-bad.jsonl")) is None


def test_failure_count_is_shared_and_a_signal_starts_it_again(store: FileStore) -> None:
    ask(store, "r")
    assert note_failure(store, "r", RuntimeError("boom")) == 1
    assert note_failure(store, "r", RuntimeError("boom")) == 2
    got = read_attempts(store, "r")
    assert isinstance(got, Attempts) and got.failures == 2 and "boom" in got.error
    assert reset_attempts(store, "r") is True
    assert read_attempts(store, "r") is None
    assert reset_attempts(store, "r") is False


def test_bad_settings_are_refused(store: FileStore, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        Worker(gated(tmp_path), store, concurrency=0)
    with pytest.raises(ValueError, match="max_attempts"):
        Worker(gated(tmp_path), store, max_attempts=0)


# -- in process -----------------------------------------------------------------------------


async def test_worker_resumes_ready_runs_and_stops_when_asked(store: FileStore) -> None:
    ask(store, "one")
    ask(store, "two")
    worker = Worker(gated(store.root), store, rescan=0.5)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    deadline = time.monotonic() + 10
    while not all(status(store, r) == RunStatus.AWAITING_APPROVAL for r in ("one", "two")):
        assert time.monotonic() < deadline, "runs were not resumed"
        await asyncio.sleep(0.02)
    for run_id in ("one", "two"):
        for p in view_store(store, run_id).pending:
            send_signal(store, run_id, "approve", {"marker": p.marker})
    while not all(status(store, r) == RunStatus.COMPLETED for r in ("one", "two")):
        assert time.monotonic() < deadline, "approved runs were not resumed"
        await asyncio.sleep(0.02)
    stop.set()
    await asyncio.wait_for(serving, 5)
    assert sorted(lines(store.root, "tickets")) == ["ticket for one", "ticket for two"]


def test_worker_thread_serves_in_the_background_and_stops(store: FileStore) -> None:
    ask(store, "bg")
    thread = WorkerThread(Worker(gated(store.root), store, rescan=0.5)).start()
    try:
        wait_for(lambda: status(store, "bg") == RunStatus.AWAITING_APPROVAL, why="bg resumed")
    finally:
        assert thread.stop(5) is True


# -- real processes -------------------------------------------------------------------------


def test_worker_picks_up_a_submitted_run_and_its_approval(
    store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    w = workers(store.root, "gated")
    time.sleep(0.3)  # let it start watching: the pick-up below is the watch's, not a scan's
    ask(store, "late")
    wait_for(lambda: status(store, "late") == RunStatus.AWAITING_APPROVAL, why="submitted run")
    (pending,) = view_store(store, "late").pending
    approved_at = time.monotonic()
    send_signal(store, "late", "approve", {"marker": pending.marker}, by="test")
    wait_for(lambda: status(store, "late") == RunStatus.COMPLETED, why="approved run")
    assert time.monotonic() - approved_at < 2.0
    assert w.stop() == 0
    assert lines(store.root, "tickets") == ["ticket for late"]


def test_failed_run_is_retried_with_backoff_then_left_failed_until_retry(
    store: FileStore, workers: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    ask(store, "flaky")
    w = workers(store.root, "broken", "--backoff", "0.3", "--max-attempts", "3")
    wait_for(lambda: len(lines(store.root, "attempts")) == 3, why="three attempts")
    wait_for(lambda: status(store, "flaky") == RunStatus.FAILED, why="failed status")
    time.sleep(1.5)  # longer than the next backoff would be (1.2 s): no fourth attempt
    times = [float(t) for t in lines(store.root, "attempts")]
    assert len(times) == 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert 0.3 <= gaps[0] < 0.3 + 0.8
    assert 0.6 <= gaps[1] < 0.6 + 0.8
    assert status(store, "flaky") == RunStatus.FAILED

    retried = subprocess.run(
        [sys.executable, "-m", "durableagent.cli", "retry", "flaky", "--store", str(store.root)],
        capture_output=True,
        text=True,
    )
    assert retried.returncode == 0, retried.stderr
    wait_for(lambda: len(lines(store.root, "attempts")) == 6, why="a fresh budget")
    assert w.stop() == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_lets_the_write_in_flight_record_and_starts_no_new_step(
    store: FileStore, workers: Callable[..., WorkerProcess], sig: int
) -> None:
    ask(store, "slow")
    w = workers(store.root, "slow", "--grace", "5", SLOW_WRITE_SECONDS="0.8")
    wait_for(lambda: lines(store.root, "writes") == ["begin"], why="the write to start")
    assert w.stop(sig) == 0
    assert lines(store.root, "writes") == ["begin", "end"]
    records = store.load("slow")
    done = [r for r in records if r.step == "tool/1/0/slow_write"]
    assert [r.type for r in done] == ["step.started", "step.completed"]
    assert not any(r.step == "llm/2" for r in records), "a new step started during shutdown"
    assert status(store, "slow") == RunStatus.READY  # not failed, not indeterminate

    w2 = workers(store.root, "slow", SLOW_WRITE_SECONDS="0.8")
    wait_for(lambda: status(store, "slow") == RunStatus.COMPLETED, why="resume after restart")
    assert w2.stop() == 0
    assert lines(store.root, "writes") == ["begin", "end"]  # the write ran once


def test_two_workers_run_twenty_approved_runs_each_exactly_once(
    store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    ids = [f"run-{i:02d}" for i in range(20)]
    w1 = workers(store.root, "gated", "--concurrency", "3")
    w2 = workers(store.root, "gated", "--concurrency", "3")
    for run_id in ids:
        ask(store, run_id)
    wait_for(
        lambda: all(status(store, r) == RunStatus.AWAITING_APPROVAL for r in ids),
        timeout=30,
        why="every run to wait for approval",
    )
    approver = (
        "import sys\n"
        "from durableagent import FileStore, signal, view_store\n"
        "store = FileStore(sys.argv[1], create=False)\n"
        "for run_id in sys.argv[2:]:\n"
        "    for p in view_store(store, run_id).pending:\n"
        "        signal(store, run_id, 'approve', {'marker': p.marker}, by='approver')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", approver, str(store.root), *ids], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    wait_for(
        lambda: all(status(store, r) == RunStatus.COMPLETED for r in ids),
        timeout=30,
        why="every run to complete",
    )
    assert w1.stop() == 0 and w2.stop() == 0

    assert sorted(lines(store.root, "tickets")) == [f"ticket for {r}" for r in ids]
    model_calls = lines(store.root, "model")
    assert sorted(model_calls) == sorted(f"ticket for {r}" for r in ids for _ in range(2))
    for run_id in ids:
        records = store.load(run_id)
        assert [r.type for r in records].count(RUN_COMPLETED) == 1
        starts = [r.step for r in records if r.type == STEP_STARTED]
        assert starts == ["llm/1", "tool/1/0/create_ticket", "llm/2"], run_id


def test_a_new_signal_gives_a_failed_run_a_fresh_budget(
    store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    ask(store, "f")
    w = workers(store.root, "flaky", "--backoff", "0.2", "--max-attempts", "2")
    wait_for(lambda: status(store, "f") == RunStatus.AWAITING_APPROVAL, why="the approval wait")
    (pending,) = view_store(store, "f").pending
    send_signal(store, "f", "approve", {"marker": pending.marker}, by="alice")
    wait_for(lambda: len(lines(store.root, "attempts")) == 2, why="two failed attempts")
    wait_for(lambda: status(store, "f") == RunStatus.FAILED, why="the run left failed")
    time.sleep(0.8)  # past the next backoff: the budget is spent, no third attempt
    assert len(lines(store.root, "attempts")) == 2
    send_signal(store, "f", "deny", {"marker": pending.marker}, by="bob", reason="not now")
    wait_for(lambda: len(lines(store.root, "attempts")) == 3, why="a fresh budget")
    assert w.stop() == 0


async def test_a_busy_run_never_counts_as_a_failure(store: FileStore) -> None:
    ask(store, "b")
    worker = Worker(gated(store.root), store, max_attempts=1)
    with store.lease("b"):
        await worker._execute("b")  # another runner holds it: RunBusyError, skipped
    assert read_attempts(store, "b") is None
    assert worker._attempts("b") is None
    await worker._execute("b")  # free now: it runs, to its approval wait
    assert status(store, "b") == RunStatus.AWAITING_APPROVAL
