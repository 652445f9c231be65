"""FileStore figures of the "stores" issue, each against a baseline measured in the same run.

1. A read step costs one fsync, not two: the per-step time of a read-only agent (model calls
   and lookups, every one a read) against one and two raw write+fsync of lines of that size,
   and the fsyncs counted per step.
2. ``agentrun ls`` on a store of N runs (default 100,000): the first listing (which builds the
   summary index from the journals), the next ones (which read the index), against the floor
   of opening and reading every journal, with the listing process's peak RSS.

    python bench/bench_stores.py [--runs 100000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    Message,
    PolicyGate,
    Record,
    ScriptedModel,
    Tool,
    ToolCall,
    run,
)
from durableagent.record import encode_line

STEPS = 100  # lookups in the read-only run


def read_only_agent() -> AgentConfig:
    def reply(messages: Sequence[Message]) -> Message:
        done = sum(1 for m in messages if m.role == "tool")
        if done < STEPS:
            return Message("assistant", tool_calls=(ToolCall(f"c{done}", "lookup", {"n": done}),))
        return Message("assistant", "done")

    def lookup(args: dict[str, Any]) -> str:
        return "policy text " * 8

    return AgentConfig(ScriptedModel(reply), [Tool("lookup", fn=lookup)], max_turns=STEPS + 1)


def bench_read_steps(root: Path) -> None:
    store = FileStore(root / "reads")
    fsyncs = 0
    real = os.fsync

    def counting(fd: int) -> None:
        nonlocal fsyncs
        fsyncs += 1
        real(fd)

    os.fsync = counting  # type: ignore[assignment]
    try:
        t = time.perf_counter()
        config = Config(read_only_agent(), PolicyGate(), store)
        out = asyncio.run(run(config, "r", [Message("user", "look up everything")]))
        elapsed = time.perf_counter() - t
    finally:
        os.fsync = real  # type: ignore[assignment]
    assert out.status == "completed", out
    steps = 2 * STEPS + 1  # a model call and a lookup per turn, then the answer
    line = encode_line(
        Record.make("step.completed", "tool/1/0/lookup", "tool", {"c": "x" * 120}), 9
    )
    raw_path = root / "raw.jsonl"
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    one = []
    for _ in range(steps):
        t0 = time.perf_counter()
        os.write(fd, line)
        os.fsync(fd)
        one.append(time.perf_counter() - t0)
    os.close(fd)
    per_step = elapsed / steps
    raw1 = statistics.mean(one)
    print(
        f"read step   ours {per_step * 1e6:7.0f} µs/step   one raw fsync {raw1 * 1e6:6.0f} µs   "
        f"two {2 * raw1 * 1e6:6.0f} µs   ratio to two {per_step / (2 * raw1):.2f}x   "
        f"fsyncs/step {fsyncs / steps:.2f}"
    )


def build_runs(root: Path, n: int) -> None:
    """n journals written straight to disk, no index: nine in ten completed (a lookup, then
    the answer), the rest stopped after the lookup (ready), the mix of a store in use."""
    root.mkdir(parents=True)
    now = time.time()
    call = {"id": "c", "name": "lookup", "arguments": {"topic": "access"}}
    asks = {"role": "assistant", "content": "", "tool_calls": [call]}
    found = {"content": "ok", "is_error": False}
    body = [
        Record(0, "run.started", "", "", {"input": [{"role": "user", "content": "hi"}]}, now),
        Record(0, "step.started", "llm/1", "model", {}, now),
        Record(0, "step.completed", "llm/1", "model", asks, now),
        Record(0, "step.started", "tool/1/0/lookup", "tool", {"write": False}, now),
        Record(0, "step.completed", "tool/1/0/lookup", "tool", found, now),
    ]
    answer = {"role": "assistant", "content": "Access needs a ticket."}
    done = [
        Record(0, "step.started", "llm/2", "model", {}, now),
        Record(0, "step.completed", "llm/2", "model", answer, now),
        Record(0, "run.completed", "", "", {"message": answer}, now),
    ]
    ready = b"".join(encode_line(r, i) for i, r in enumerate(body, 1))
    completed = b"".join(encode_line(r, i) for i, r in enumerate(body + done, 1))
    for i in range(n):
        with open(root / f"run-{i:06d}.jsonl", "wb") as f:
            f.write(ready if i % 10 == 0 else completed)


def ls_child(root: Path) -> tuple[float, int]:
    """Seconds and peak RSS (KiB) of one ``agentrun ls`` (its own rusage, from wait4)."""
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "durableagent.cli", "ls", "--store", str(root)],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode == 0, p.returncode
    return elapsed, usage.ru_maxrss


def floor_child(root: Path) -> float:
    code = (
        "import os,sys\n"
        "r=sys.argv[1]\n"
        "for n in os.listdir(r):\n"
        "    if n.endswith('.jsonl'):\n"
        "        with open(os.path.join(r,n),'rb') as f: f.read()\n"
    )
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(root)], check=True)
    return time.perf_counter() - t


def bench_ls(root: Path, n: int) -> None:
    runs = root / "many"
    t = time.perf_counter()
    build_runs(runs, n)
    print(f"built {n:,} runs in {time.perf_counter() - t:.1f} s")
    floor = floor_child(runs)
    first, _ = ls_child(runs)
    later = [ls_child(runs) for _ in range(3)]
    floor2 = floor_child(runs)
    median = statistics.median(t for t, _ in later)
    rss = max(r for _, r in later)
    base = min(floor, floor2)
    print(
        f"ls {n:,} runs   first {first:.2f} s   then {median:.2f} s (median of 3)   "
        f"floor (read every journal) {base:.2f} s   ratio {median / base:.2f}x   "
        f"peak RSS {rss / 1024:.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="a directory on a real disk")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-stores-", dir=args.dir or "."))
    try:
        bench_read_steps(root)
        bench_ls(root, args.runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
