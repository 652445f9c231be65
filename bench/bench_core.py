"""Core figures, each as a ratio against a baseline measured in the same run.

    python bench/bench_core.py [--dir DIR]

1. durable append vs a raw write + fsync of a line of the same size (target ≤ 1.5×, and
   ≤ 50 µs of lock, tail read and crc on top of the fsync);
2. load of a 100,000-record journal vs reading the file and json.loads per line (≤ 1.5×);
3. replay: resuming a run of 2K turns vs one of K turns (≤ 2.4×: linear).
DIR must be on a real disk (default: a temp dir under the current directory).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

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

N_APPEND = 400
N_LOAD = 100_000


def bench_append(root: Path) -> None:
    store = FileStore(root / "append")
    rec = Record.make(
        "step.completed",
        "tool/1/0/lookup",
        "tool",
        {"content": "Access needs a ticket approved by IT. " * 3, "is_error": False},
    )
    store.append("a", Record.make("run.started", data={"input": []}))
    line = encode_line(rec, 2)
    raw_path = root / "raw.jsonl"
    ours, raw = [], []
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for _ in range(N_APPEND):  # interleaved, so both see the same disk weather
        t = time.perf_counter()
        os.write(fd, line)
        os.fsync(fd)
        raw.append(time.perf_counter() - t)
        t = time.perf_counter()
        store.append("a", rec)
        ours.append(time.perf_counter() - t)
    os.close(fd)
    m_ours, m_raw = statistics.median(ours), statistics.median(raw)
    print(
        f"append   ours {m_ours * 1e6:8.0f} µs   raw write+fsync {m_raw * 1e6:8.0f} µs   "
        f"ratio {m_ours / m_raw:.2f}× (≤ 1.5)   overhead {(m_ours - m_raw) * 1e6:.0f} µs (≤ 50)"
    )


def bench_load(root: Path) -> None:
    store = FileStore(root / "load")
    path = store.path("big")
    with open(path, "wb") as f:
        f.write(
            encode_line(
                Record.make("run.started", data={"input": [{"role": "user", "content": "hi"}]}), 1
            )
        )
        for seq in range(2, N_LOAD + 1):
            kind = "model" if seq % 2 else "tool"
            data = (
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {"id": f"c{seq}", "name": "lookup", "arguments": {"q": "policy"}}
                    ],
                }
                if kind == "model"
                else {"content": "some result text", "is_error": False}
            )
            f.write(encode_line(Record.make("step.completed", f"x/{seq}", kind, data), seq))

    def floor() -> int:
        with open(path, "rb") as fh:
            data = fh.read()
        return len([json.loads(line) for line in data.split(b"\n") if line])

    def ours() -> int:
        return len(store.load("big"))

    assert floor() == ours() == N_LOAD
    f_t = best_of(floor, 5)
    o_t = best_of(ours, 5)
    print(
        f"load     ours {o_t * 1e3:8.1f} ms   read+json.loads {f_t * 1e3:8.1f} ms   "
        f"ratio {o_t / f_t:.2f}× (≤ 1.5)   [{N_LOAD:,} records]"
    )


def best_of(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def turns_journal(store: FileStore, run_id: str, turns: int) -> Config:
    """A run whose `turns` tool turns are all recorded; resuming it replays them and asks the
    model once more for the answer."""

    def model(messages):
        n = sum(1 for m in messages if m.role == "tool")
        if n < turns:
            return Message("assistant", tool_calls=(ToolCall(f"c{n}", "lookup", {"n": n}),))
        return Message("assistant", "done")

    config = Config(
        AgentConfig(ScriptedModel(model), [Tool("lookup", fn=lambda a: "r")], max_turns=turns + 5),
        PolicyGate(),
        store,
    )
    user = Message("user", "go").to_dict()
    with open(store.path(run_id), "wb") as f:
        seq = 0

        def put(rec: Record) -> None:
            nonlocal seq
            seq += 1
            f.write(encode_line(rec, seq))

        put(Record.make("run.started", data={"input": [user]}))
        for t in range(1, turns + 1):
            call = ToolCall(f"c{t - 1}", "lookup", {"n": t - 1})
            put(Record.make("step.started", f"llm/{t}", "model", {}))
            put(
                Record.make(
                    "step.completed",
                    f"llm/{t}",
                    "model",
                    Message("assistant", tool_calls=(call,)).to_dict(),
                )
            )
            put(Record.make("step.started", f"tool/{t}/0/lookup", "tool", {"write": False}))
            put(
                Record.make(
                    "step.completed",
                    f"tool/{t}/0/lookup",
                    "tool",
                    {"content": "r", "is_error": False},
                )
            )
    return config


def bench_replay(root: Path, k: int = 2000) -> None:
    store = FileStore(root / "replay")
    timings = {}
    for turns in (k, 2 * k):
        config = turns_journal(store, f"t{turns}", turns)
        template = store.path(f"t{turns}").read_bytes()

        def resume(turns: int = turns, config: Config = config, template: bytes = template):
            store.path(f"t{turns}").write_bytes(template)  # undo the previous resume's records
            out = asyncio.run(run(config, f"t{turns}", None))
            assert out.status == "completed"

        timings[turns] = best_of(resume, 5)
    ratio = timings[2 * k] / timings[k]
    print(
        f"replay   {k} turns {timings[k] * 1e3:7.1f} ms   {2 * k} turns "
        f"{timings[2 * k] * 1e3:7.1f} ms   ratio {ratio:.2f}× (≤ 2.4)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=None, help="a directory on a real disk")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-core-", dir=args.dir or Path.cwd()))
    try:
        bench_append(root)
        bench_load(root)
        bench_replay(root)
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
