"""How fast does a worker act on a signal?

For each of 20 runs waiting for approval: append the approval and measure

- raw: when a plain ``watchfiles.awatch`` in this process (same debounce and step as the
  worker) reports the journal change, and
- worker: when the first new record of that run, written by an ``agentrun worker`` process,
  was made (its ``at`` stamp),

both from the moment the signal was appended. Prints the medians and what the worker adds on
top of the raw notification (the target is at most 150 ms).

    python bench/bench_worker.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import watchfiles

from durableagent import (
    Agent,
    AgentConfig,
    FileStore,
    Message,
    PolicyGate,
    RunStatus,
    ScriptedModel,
    Tool,
    ToolCall,
    signal,
    submit,
    view_store,
)

DEBOUNCE_MS = 50
STEP_MS = 25


def agent(root: Path) -> Agent:
    """One gated write, then the answer."""

    def reply(messages: Sequence[Message]) -> Message:
        if not any(m.role == "tool" for m in messages):
            return Message("assistant", tool_calls=(ToolCall("t", "create_ticket", {"n": 1}),))
        return Message("assistant", "filed")

    def create_ticket(args: dict[str, Any]) -> str:
        return "TICKET-1"

    tool = Tool("create_ticket", "file a ticket", {"type": "object"}, create_ticket)
    return Agent(AgentConfig(ScriptedModel(reply), [tool]), PolicyGate(writes={"create_ticket"}))


def wait_until(check: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("bench: timed out (is the worker running?)")
        time.sleep(0.001)


def measure(root: Path, ids: list[str]) -> tuple[list[float], list[float]]:
    store = FileStore(root)
    seen: dict[str, float] = {}  # journal path -> first notification time after its mark
    armed: set[str] = set()
    stop = threading.Event()

    def raw_watch() -> None:
        # A thread of its own: the notification is timed the moment watchfiles returns it.
        for changes in watchfiles.watch(
            root, debounce=DEBOUNCE_MS, step=STEP_MS, stop_event=stop, rust_timeout=500
        ):
            now = time.time()
            for _, path in changes:
                if path in armed and path not in seen:
                    seen[path] = now

    watcher = threading.Thread(target=raw_watch, daemon=True)
    watcher.start()
    time.sleep(0.3)  # let the watch start
    raw: list[float] = []
    worker: list[float] = []
    for run_id in ids:
        path = str((root / f"{run_id}.jsonl").resolve())
        (pending,) = view_store(store, run_id).pending
        armed.add(path)
        t0 = time.time()
        sig = signal(store, run_id, "approve", {"marker": pending.marker}, by="bench")
        wait_until(lambda p=path: p in seen)
        wait_until(lambda r=run_id, n=sig.seq: len(store.load(r)) > n)
        raw.append(seen[path] - t0)
        worker.append(store.load(run_id)[sig.seq].at - t0)
        wait_until(lambda r=run_id: view_store(store, r).status == RunStatus.COMPLETED)
        time.sleep(0.1)  # let the run's own events pass before the next mark
    stop.set()
    watcher.join(5)
    return raw, worker


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-worker-") as tmp:
        root = Path(tmp) / "runs"
        store = FileStore(root)
        ids = [f"bench-{i:02d}" for i in range(args.runs)]
        for run_id in ids:
            submit(store, run_id, [Message("user", f"ticket {run_id}")])
        env = dict(os.environ)
        here = str(Path(__file__).resolve().parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
        cmd = [sys.executable, "-m", "durableagent.cli", "worker", "--agent", "bench_worker:agent"]
        cmd += ["--store", str(root)]
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        try:
            wait_until(
                lambda: all(view_store(store, r).status == RunStatus.AWAITING_APPROVAL for r in ids)
            )
            raw, worker = measure(root, ids)
        finally:
            proc.terminate()
            proc.wait(15)
    raw_ms = statistics.median(raw) * 1000
    worker_ms = statistics.median(worker) * 1000
    print(f"runs: {len(raw)}  (watch debounce {DEBOUNCE_MS} ms, step {STEP_MS} ms)")
    print(f"raw watchfiles notification, median: {raw_ms:7.1f} ms")
    print(f"worker's first new record, median:   {worker_ms:7.1f} ms")
    print(f"worker adds:                         {worker_ms - raw_ms:7.1f} ms (target <= 150)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
