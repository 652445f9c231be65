"""A bulk retry of 10,000 failed runs out of 100,000 on FileStore (issue 16's figure: ≤ 10 s,
and ≤ 3× the cost of 10,000 single signals' appends):
``python bench/bench_bulk.py [--runs 100000] [--failed 10000] [--dir DIR]``.

The store is written straight to disk (journals, attempt logs, the workers' failure counts),
then its summary index is built and listed once, as a store written by workers has it.
Measured in the same run, on the same store:

- baseline: 10,000 plain signals, each one ``signal()`` as a single ``agentrun pause RUN``
  writes it (validated under the journal's lock, appended, the index row kept), on 10,000
  other runs (ready ones: a signal on a failed run would be a retry of its own);
- bulk: ``agentrun retry --where status:failed --yes``, in this process (its output to
  /dev/null): the query over every summary, the plan, then each run's retry on its own (its
  summary read again, its failure count cleared).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from durableagent import FileStore, Message, Outcome, Record, Status, signal
from durableagent.cli.main import main as agentrun
from durableagent.record import encode_line
from durableagent.stores.file import logs as file_logs

OWNER = "bench-worker:1"


def run_id(i: int) -> str:
    return f"run-{i:06d}"


def kind_of(i: int, runs: int, failed: int) -> str:
    """Failed and ready runs spread through the ids (one in runs/failed each), the rest done."""
    step = runs // failed
    if i % step == 0:
        return "failed"
    if i % step == 1:
        return "ready"
    return "completed"


def build(root: Path, runs: int, failed: int) -> None:
    """``runs`` journals written directly (no store calls: fast)."""
    root.mkdir(parents=True)
    (root / ".attempts").mkdir()
    (root / ".worker").mkdir()
    at = time.time() - 86_400
    ask = {"input": [Message("user", "I need access to the billing dashboard").to_dict()]}
    start = [
        Record(0, "run.started", "", "", ask, at),
        Record(0, "step.started", "llm/1", "model", {}, at),
    ]
    answer = Message("assistant", "Done: access granted.")
    done = [
        Record(0, "step.completed", "llm/1", "model", answer.to_dict(), at + 1),
        Record(0, "run.completed", "", "", {"message": answer.to_dict()}, at + 2),
    ]
    bodies = {
        "failed": b"".join(encode_line(r, n) for n, r in enumerate(start, 1)),
        "ready": b"".join(encode_line(r, n) for n, r in enumerate(start[:1], 1)),
        "completed": b"".join(encode_line(r, n) for n, r in enumerate(start + done, 1)),
    }
    error = "ServerError: model call failed: 503 Service Unavailable"
    outcomes = {
        "failed": Outcome(Status.FAILED, error=error, seq=2),
        "completed": Outcome(Status.COMPLETED, message=answer, seq=4),
    }
    logs = {
        kind: file_logs.begin_line(1, OWNER, at, 1)
        + file_logs.end_line(1, at + 2, str(o.status), o)
        for kind, o in outcomes.items()
    }
    count = json.dumps({"failures": 5, "signals": 0, "at": at, "error": error}).encode()
    for i in range(runs):
        kind = kind_of(i, runs, failed)
        rid = run_id(i)
        (root / f"{rid}.jsonl").write_bytes(bodies[kind])
        if kind in logs:
            (root / ".attempts" / f"{rid}.jsonl").write_bytes(logs[kind])
        if kind == "failed":
            (root / ".worker" / f"{rid}.json").write_bytes(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--failed", type=int, default=10_000)
    parser.add_argument(
        "--dir", default=None, help="where to build the store (default: a temp dir)"
    )
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-bulk-"))
    root = base / "store"
    shutil.rmtree(root, ignore_errors=True)
    try:
        t = time.perf_counter()
        build(root, args.runs, args.failed)
        print(
            f"built {args.runs:,} runs ({args.failed:,} failed) in {time.perf_counter() - t:.1f} s"
        )
        store = FileStore(root)
        t = time.perf_counter()
        store.summaries()
        built = time.perf_counter() - t
        # The first listing after the index is built lists the directory again (the index's
        # own folder changed the root's mtime); a store in use has that behind it.
        t = time.perf_counter()
        listed = store.summaries()
        print(
            f"summary index built in {built:.1f} s; a listing then "
            f"{time.perf_counter() - t:.2f} s ({len(listed):,} runs)"
        )

        ready = [s.run_id for s in listed if s.status == "ready"][: args.failed]
        # 100,000 new files are still being written back: flush them first, so that neither
        # figure waits behind that (an unlink stalls behind the file system's journal).
        os.sync()
        t = time.perf_counter()
        for rid in ready:
            signal(store, rid, "pause", {}, by="bench", reason="baseline")
        baseline = time.perf_counter() - t
        print(
            f"baseline: {len(ready):,} single signals in {baseline:.2f} s "
            f"({1000 * baseline / len(ready):.2f} ms each)"
        )

        os.sync()
        t = time.perf_counter()
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            code = agentrun(["retry", "--where", "status:failed", "--yes", "--store", str(root)])
        bulk = time.perf_counter() - t
        left = sum(1 for _ in (root / ".worker").iterdir())
        assert code == 0 and left == 0, (code, left)
        failed = args.failed
        print(
            f"bulk retry of {failed:,} failed runs out of {args.runs:,}: {bulk:.2f} s "
            f"({1000 * bulk / failed:.2f} ms a run)  ratio to the baseline {bulk / baseline:.2f}x"
            f"   [target ≤ 10 s and ≤ 3x: {'ok' if bulk <= min(10, 3 * baseline) else 'MISSED'}]"
        )
    finally:
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
