"""A durable step at the floor of its disk: each figure a ratio against its floor, measured
interleaved in the same run (the machines are noisy).

    python bench/bench_steps.py [--url URL] [--steps 100] [--rounds 7] [--dir DIR]

FileStore (a directory on the disk ``--dir`` is on, default the current one):
1. append: ``FileStore.append`` as a runner makes it (under the run's lease) and as a human's
   signal makes it (no lease), against a raw ``write`` + ``fsync`` of the same line;
   target <= 1.15x (<= 30 µs over).
2. read step: the per-step time of a read-only run (model calls and lookups, every one a
   read that nobody gates), against the floor of one raw ``write`` of its two lines and one
   ``fsync``; target <= 1.5x, with the fsyncs counted per step (one).
3. write step: the same with writes (each start fsynced before the tool runs): two fsyncs.

PostgreSQL (``--url``, default $AGENTRUN_TEST_PG or the local server; skipped when psycopg
is missing):
4. read step against one statement that inserts its two rows and commits (autocommit: one
   round trip, one commit); target <= 1.5x, with the commits counted per step
   (``pg_stat_database.xact_commit``; lease renewals add a few per run).

The read-only agent is bench_stores's; medians of ``--rounds`` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
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
    Store,
    Tool,
    ToolCall,
    run,
)
from durableagent.record import encode_line

M = statistics.median
LOOKUP = "Access needs a ticket approved by IT. " * 2  # a lookup's result, ~80 bytes


def agent(steps: int, tool: str) -> AgentConfig:
    """``steps`` turns of one ``tool`` call each, then the answer."""

    def reply(messages: Sequence[Message]) -> Message:
        done = len(messages) // 2  # user, then (assistant, tool) per turn
        if done < steps:
            return Message("assistant", tool_calls=(ToolCall(f"c{done}", tool, {"n": done}),))
        return Message("assistant", "done")

    def fn(args: dict[str, Any]) -> str:
        return LOOKUP

    tools = [Tool(tool, fn=fn)]
    return AgentConfig(ScriptedModel(reply), tools, max_turns=steps + 1)


def per_step(store: Store, run_id: str, steps: int, tool: str, gate: PolicyGate) -> float:
    """Seconds per step of one run of ``steps`` turns (its first and last steps' setup, the
    lease and the journal's creation, included: they are part of a run)."""
    config = Config(agent(steps, tool), gate, store)
    t = time.perf_counter()
    out = asyncio.run(run(config, run_id, [Message("user", "look it all up")]))
    elapsed = time.perf_counter() - t
    assert out.status == "completed", out
    return elapsed / (2 * steps + 1)  # a model call and a tool call per turn, then the answer


def warm(store: Store, tool: str, gate: PolicyGate) -> None:
    """A first short run: the store's folders exist after it, as in a store in use."""
    per_step(store, f"warm-{tool}", 3, tool, gate)


def two_lines() -> bytes:
    start = Record.make("step.started", "tool/7/0/lookup", "tool", {"write": False})
    done = Record.make("step.completed", "tool/7/0/lookup", "tool", {"content": LOOKUP})
    return encode_line(start, 14) + encode_line(done, 15)


class Fsyncs:
    """Counts os.fsync calls while it is on (the store's and the floor's alike)."""

    def __init__(self) -> None:
        self.n = 0
        self._real = os.fsync

    def __enter__(self) -> Fsyncs:
        def counting(fd: int) -> None:
            self.n += 1
            self._real(fd)

        os.fsync = counting  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real  # type: ignore[assignment]


def raw_fsync(path: Path, data: bytes, n: int) -> float:
    """Seconds per raw write+fsync of ``data`` to an append-only file, over ``n`` of them in a
    row: a mean, as a run's per-step time is (a disk's fsyncs have a long tail: here a
    twentieth take ten times the median, and a run pays for them all)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        t = time.perf_counter()
        for _ in range(n):
            os.write(fd, data)
            os.fsync(fd)
        return (time.perf_counter() - t) / n
    finally:
        os.close(fd)


def bench_append(root: Path, n: int = 600) -> None:
    store = FileStore(root / "append")
    rec = Record.make("step.completed", "tool/1/0/lookup", "tool", {"content": LOOKUP * 2})
    store.append("leased", Record.make("run.started", data={"input": []}))
    store.append("plain", Record.make("run.started", data={"input": []}))
    line = encode_line(rec, 2)
    fd = os.open(root / "raw.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    ours, plain, raw = [], [], []
    with store.lease("leased") as lease:
        for _ in range(n):  # interleaved: all three see the same disk weather
            t = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            raw.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.append("leased", rec, lease=lease)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.append("plain", rec)
            plain.append(time.perf_counter() - t)
    os.close(fd)
    r, o, p = M(raw), M(ours), M(plain)
    print("1. FileStore append (medians of interleaved samples)")
    print(f"   raw write+fsync            {r * 1e6:7.0f} µs")
    print(
        f"   a runner's (leased)        {o * 1e6:7.0f} µs   {o / r:.2f}x (<= 1.15)   "
        f"{(o - r) * 1e6:+.0f} µs (<= 30)"
    )
    print(f"   a signal's (no lease)      {p * 1e6:7.0f} µs   {p / r:.2f}x")


def bench_file_steps(root: Path, steps: int, rounds: int) -> None:
    data = two_lines()
    for title, tool, gate, floor_fsyncs, target in (
        ("2. FileStore read step", "lookup", PolicyGate(), 1, "<= 1.5"),
        ("3. FileStore write step", "file", PolicyGate(writes={"file"}, approve=()), 2, ""),
    ):
        ours, floor, fsyncs = [], [], 0
        store = FileStore(root / tool)
        warm(store, tool, gate)
        for i in range(rounds):
            with Fsyncs() as f:
                ours.append(per_step(store, f"r{i}", steps, tool, gate))
            fsyncs += f.n
            floor.append(raw_fsync(root / f"floor-{tool}-{i}", data, 2 * steps) * floor_fsyncs)
        o, fl = M(ours), M(floor)
        per = fsyncs / rounds / (2 * steps + 1)
        print(title)
        print(
            f"   ours {o * 1e6:7.0f} µs/step   floor ({floor_fsyncs} write+fsync of its lines) "
            f"{fl * 1e6:6.0f} µs   {o / fl:.2f}x {target}   fsyncs/step {per:.2f}"
        )


def bench_pg_steps(url: str, steps: int, rounds: int) -> None:
    try:
        import psycopg
        from psycopg import sql

        from durableagent.stores.postgres import PostgresStore
    except ImportError as e:
        print(f"4. PostgreSQL: not measured ({e}; pip install 'durableagent[postgres]')")
        return
    schema = f"bench_steps_{secrets.token_hex(4)}"
    conn = psycopg.connect(url, autocommit=True)
    try:
        store = PostgresStore(url, schema=schema)
        table = sql.Identifier(schema, "floor")
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (k text, seq bigint, line bytea, PRIMARY KEY (k, seq))"
            ).format(table)
        )
        insert = sql.SQL("INSERT INTO {} VALUES (%s, %s, %s), (%s, %s, %s)").format(table)
        first, second = two_lines().splitlines()
        seq = iter(range(10**9))

        def commits() -> int:
            row = conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
            assert row is not None
            return int(row[0])

        def floor_once() -> float:
            times = []
            for _ in range(2 * steps):
                t = time.perf_counter()
                conn.execute(insert, ("r", next(seq), first, "r", next(seq), second))
                times.append(time.perf_counter() - t)
            return M(times)

        ours, floor, done = [], [], 0
        warm(store, "lookup", PolicyGate())
        for i in range(rounds):
            before = commits()
            ours.append(per_step(store, f"r{i}", steps, "lookup", PolicyGate()))
            time.sleep(0.6)  # pg_stat_database is updated by the backends every ~0.5 s
            done += commits() - before
            floor.append(floor_once())
        o, fl = M(ours), M(floor)
        per = done / rounds / (2 * steps + 1)
        print("4. PostgreSQL read step")
        print(
            f"   ours {o * 1e6:7.0f} µs/step   floor (one statement: two rows, one commit) "
            f"{fl * 1e6:6.0f} µs   {o / fl:.2f}x <= 1.5   commits/step {per:.2f}"
        )
        store.close()
    finally:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    default_url = os.environ.get("AGENTRUN_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--url", default=default_url)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--dir", default=None, help="a directory on the disk to measure")
    ap.add_argument("--no-pg", action="store_true", help="only the FileStore figures")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-steps-", dir=args.dir or "."))
    try:
        bench_append(root)
        bench_file_steps(root, args.steps, args.rounds)
        if not args.no_pg:
            bench_pg_steps(args.url, args.steps, args.rounds)
    finally:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
