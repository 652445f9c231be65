"""``agentrun copy --move`` while workers run on both stores, the copying process SIGKILLed at
random points: every run ends up run by exactly one store, its write done once, and running
the same move again finishes it."""

from __future__ import annotations

import random
import signal as sig
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pgserver
import pytest
from procs import WorkerProcess, child_env, wait_for

from durableagent import FileStore, Message, RunStatus, Store, open_store, submit

RUNS = [f"m{i}" for i in range(8)]


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pgserver.fresh_schema() as schema:
        yield pgserver.url(schema)


def move(src: Path, dst: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "durableagent.cli", "copy", "--move", str(src), dst],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def status(store: Store, run_id: str) -> RunStatus | None:
    summary = store.summary(run_id)
    return None if summary is None else summary.status


def calls(side: Path) -> list[tuple[str, str]]:
    path = side / "calls.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(run_id, step) for run_id, step, _ in (line.split() for line in lines)]


@pytest.mark.slow
def test_a_move_killed_at_random_points_leaves_every_run_to_exactly_one_store(
    tmp_path: Path, pg_url: str
) -> None:
    rng = random.Random(20261201)
    src_root, side = tmp_path / "src", tmp_path / "side"
    src = FileStore(src_root)
    for run_id in RUNS:
        submit(src, run_id, [Message("user", f"file it for {run_id}")])
    workers = [
        WorkerProcess(src_root, "moving", tmp_path / "src-worker.log", AGENTRUN_SIDE=str(side)),
        WorkerProcess(pg_url, "moving", tmp_path / "dst-worker.log", AGENTRUN_SIDE=str(side)),
    ]
    dst = open_store(pg_url)
    try:
        wait_for(lambda: len(calls(side)) >= 3, timeout=30, why="the source worker to start")
        killed = 0
        for _ in range(4):  # cut short at random points
            p = move(src_root, pg_url)
            time.sleep(rng.uniform(0.05, 0.8))
            if p.poll() is None:
                p.send_signal(sig.SIGKILL)
                killed += 1
            p.communicate(timeout=60)
        for _ in range(5):  # then the same move again, to its end
            p = move(src_root, pg_url)
            _, err = p.communicate(timeout=120)
            if p.returncode == 0:
                break
        assert p.returncode == 0, err.decode()
        assert killed >= 1
        (side / "release").touch()  # the lookups held every run live until the move was done

        def all_done() -> bool:
            return all(status(dst, r) == RunStatus.COMPLETED for r in RUNS)

        wait_for(all_done, timeout=60, why="every run to complete in the destination")
        for run_id in RUNS:
            # Finished in the source before its move (then copied as it was), or moved out and
            # finished in the destination: never live in both.
            assert status(src, run_id) in (RunStatus.COMPLETED, RunStatus.MOVED), run_id
            if status(src, run_id) == RunStatus.MOVED:
                assert not any(r.type == "run.completed" for r in src.load(run_id)), (
                    f"{run_id} completed in the source after its move"
                )
        writes = Counter(run_id for run_id, step in calls(side) if step.endswith("file_ticket"))
        assert writes == Counter({r: 1 for r in RUNS}), writes  # each write once, in one store
        moved = [r for r in RUNS if status(src, r) == RunStatus.MOVED]
        assert moved == RUNS, "every run was live when moved: each must have moved"
    finally:
        for w in workers:
            w.stop()
        dst.close()
