"""The chaos run in small (``scripts/chaos.py``), on every store: real workers, each fault
aimed at a worker inside a write, and a human reconciling from the ledger. No write is
doubled, no record of a holder that lost its lease lands, every journal loads and every run
finishes.

The faults, in order, each on runs submitted for it: a SIGKILL; a SIGSTOP past the lease's
ttl (in PostgreSQL another worker takes the run over and finishes it before the paused one
wakes, so its late write meets the ledger's fence; in a FileStore the paused holder keeps its
flock, shows as stuck, and finishes the run once woken); in PostgreSQL, the holder's own
connections terminated. The server is never restarted here (other tests share it).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pgserver
import pytest
from procs import wait_for

from durableagent import FileStore, RunStatus

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))

from chaos import Chaos, Options, Worker

pytestmark = pytest.mark.slow

TIMEOUT = 45  # seconds for any one state: a loaded 2-core machine starts a worker in seconds


@pytest.fixture(params=["file", "postgres"])
def chaos(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Chaos]:
    """A chaos run on a fresh store of each kind: 2 workers of 2 runs each, a ttl of 1 s,
    steps slow enough (up to 0.3 s, a write twice) to be caught inside; all stopped after."""

    def make(spec: str) -> Chaos:
        opts = Options(
            store=spec,
            workers=2,
            concurrency=2,
            lease_ttl=1.0,
            pace=0.3,
            seed=1,
            workdir=tmp_path / "work",
            quiet=True,
        )
        return Chaos(opts)

    with contextlib.ExitStack() as stack:
        if request.param == "file":
            spec = str(tmp_path / "runs")
        else:
            spec = pgserver.url(stack.enter_context(pgserver.fresh_schema()))
        c = make(spec)
        stack.callback(c.close)
        stack.callback(c.abort)
        yield c


def inside_a_write(chaos: Chaos, runs: int = 2) -> tuple[Worker, str]:
    """Submit ``runs`` more runs and wait until a serving worker is inside a write of one;
    that worker and the run."""
    chaos.submit_up_to(len(chaos.run_ids) + runs)
    found: list[tuple[Worker, str]] = []

    def look() -> bool:
        writing = chaos.ledger.writing()
        found[:] = [(w, writing[w.pid][0][0]) for w in chaos._serving() if w.pid in writing]
        return bool(found)

    waiting(chaos, look, "a worker inside a write")
    return found[0]


def waiting(chaos: Chaos, what: Callable[[], bool], why: str, run_id: str = "") -> None:
    """Wait for ``what``; a worker that exits on its own meanwhile fails the test at once,
    and a timeout says where the run and the workers are."""

    def check() -> bool:
        chaos.reap_exits()
        assert chaos.report.worker_exits == [], chaos.describe_run(run_id or chaos.run_ids[-1])
        return what()

    try:
        wait_for(check, timeout=TIMEOUT, why=why)
    except AssertionError as e:
        if "timed out" not in str(e):
            raise
        raise AssertionError(f"{e}\n{chaos.describe_run(run_id or chaos.run_ids[-1])}") from None


def completed(chaos: Chaos, run_id: str) -> bool:
    summary = chaos.store.summary(run_id)
    return summary is not None and summary.status == RunStatus.COMPLETED


def test_no_write_doubles_and_every_run_finishes_under_faults_inside_writes(chaos: Chaos):
    chaos.start()
    w, _ = inside_a_write(chaos)
    chaos.kill(w)

    w, run_id = inside_a_write(chaos)
    chaos.stop(w, wake=False)
    if isinstance(chaos.store, FileStore):
        # The kernel knows the holder lives: shown as stuck, never taken over.
        holder = chaos.store.lease_holder
        waiting(chaos, lambda: "stuck" in (holder(run_id) or {}), "the holder stuck", run_id)
    else:
        # Its lease expires; another worker finishes the run (the human reconciling the
        # open write from the ledger, warned that the silent holder may still write) before
        # the paused one wakes with its write.
        waiting(chaos, lambda: completed(chaos, run_id), "the takeover", run_id)
    chaos.wake(w)

    if not isinstance(chaos.store, FileStore):
        w, _ = inside_a_write(chaos)
        chaos.terminate(w)
        assert chaos.report.connections_terminated > 0

    report = chaos.finish(TIMEOUT)

    pg = not isinstance(chaos.store, FileStore)
    assert report.faults == {"kill": 1, "stop": 1, **({"terminate": 1} if pg else {})}

    assert report.doubled == [], report.text()
    assert report.unfinished == {}, report.text()
    assert report.stale_records == [], report.text()
    assert report.corrupt == [] and report.lost_effects == [], report.text()
    # The window between the paused holder's lease expiring and a takeover: the human who
    # reconciled its write then was told that it may still land.
    assert report.unwarned == [], report.text()
    if pg:
        assert report.warned >= 1, report.text()
    assert report.worker_exits == [], report.text()
    assert report.finished == report.runs == len(chaos.run_ids) > 0
    assert report.effects == report.write_steps == 2 * report.runs, report.text()
