"""How fast a cancel stops a run in a read, against the change feed's own latency, measured in
one run on both stores.

    python bench/bench_control.py [--rounds 15] [--url URL] [--dir DIR] [--only files|postgres]

Each round: a run's attempt is inside a read (an async tool that would sleep a minute), run
as a worker runs it (``run(..., wake=)``, the wake set by a follower of ``Store.changes``);
then ``signal(cancel)`` from a thread. Measured from the moment the cancel was accepted
(``signal`` returned: it is durable):

- feed: when the change feed yields the run's id to a second follower (the baseline: how
  soon anything can hear of a signal);
- stop: when ``run()`` returned ``Outcome(cancelled)``, its read cancelled.

Each round also checks that no step started after the cancel's seq. The figure is the median
and the worst over rounds; SPEC §10 asks stop ≤ 100 ms beyond the feed. PostgreSQL is
$AGENTRUN_TEST_PG or postgresql://postgres@127.0.0.1:5432/test, in a scratch schema, dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from durableagent import (
    AgentConfig,
    Config,
    Message,
    PolicyGate,
    ScriptedModel,
    Status,
    Store,
    Tool,
    ToolCall,
    open_store,
    run,
    signal,
)
from durableagent.record import STEP_STARTED

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"


def reply(messages: Sequence[Message]) -> Message:
    if not any(m.role == "tool" for m in messages):
        return Message("assistant", tool_calls=(ToolCall("a", "hang", {}),))
    return Message("assistant", "done")


async def follow(store: Store, seen: dict[str, asyncio.Event], stop: asyncio.Event) -> None:
    """Set ``seen[run_id]`` when the change feed names the run."""
    async for ids in store.changes(rescan=30.0):
        for rid in ids & seen.keys():
            seen[rid].set()
        if stop.is_set():
            return


async def one_round(
    store: Store, i: int, feeds: list[dict[str, asyncio.Event]]
) -> tuple[float, float]:
    """(feed, stop) seconds after the cancel was accepted, for run ``k{i}``."""
    rid = f"k{i}"
    begun = asyncio.Event()

    async def hang(args: dict[str, Any]) -> str:
        begun.set()
        await asyncio.sleep(60)
        return "never"

    agent = AgentConfig(ScriptedModel(reply), [Tool("hang", "wait", {"type": "object"}, hang)])
    config = Config(agent, PolicyGate(), store)
    wake, seen = asyncio.Event(), asyncio.Event()
    worker_feed, bench_feed = feeds
    worker_feed[rid], bench_feed[rid] = wake, seen
    attempt = asyncio.create_task(run(config, rid, [Message("user", f"round {i}")], wake=wake))
    await asyncio.wait_for(begun.wait(), 10)
    await asyncio.sleep(0.05)  # well inside the read
    wake.clear()
    seen.clear()
    cancel = await asyncio.to_thread(signal, store, rid, "cancel", {}, by="bench", reason="bench")
    accepted = time.perf_counter()
    stopped_at = feed_at = None

    async def on_feed() -> None:
        nonlocal feed_at
        await seen.wait()
        feed_at = time.perf_counter()

    watcher = asyncio.create_task(on_feed())
    out = await asyncio.wait_for(attempt, 10)
    stopped_at = time.perf_counter()
    await asyncio.wait_for(watcher, 10)
    assert out.status == Status.CANCELLED, out
    late = [r for r in store.load(rid) if r.seq > cancel.seq and r.type == STEP_STARTED]
    assert not late, f"a step started after the cancel: {late}"
    assert feed_at is not None
    return feed_at - accepted, stopped_at - accepted


async def measure(store: Store, rounds: int) -> list[tuple[float, float]]:
    worker_feed: dict[str, asyncio.Event] = {}
    bench_feed: dict[str, asyncio.Event] = {}
    stop = asyncio.Event()
    followers = [
        asyncio.create_task(follow(store, worker_feed, stop)),
        asyncio.create_task(follow(store, bench_feed, stop)),
    ]
    await asyncio.sleep(0.3)  # the followers are listening
    try:
        await one_round(store, 0, [worker_feed, bench_feed])  # warm up
        return [await one_round(store, i, [worker_feed, bench_feed]) for i in range(1, rounds + 1)]
    finally:
        stop.set()
        for f in followers:
            f.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await f


def report(name: str, got: list[tuple[float, float]]) -> None:
    ms = 1000.0
    feed = [f * ms for f, _ in got]
    stop = [s * ms for _, s in got]
    beyond = [s - f for f, s in zip(feed, stop, strict=True)]
    print(
        f"{name:<10} feed {statistics.median(feed):7.1f} ms (worst {max(feed):6.1f})   "
        f"stop {statistics.median(stop):7.1f} ms (worst {max(stop):6.1f})   "
        f"stop - feed {statistics.median(beyond):6.1f} ms (worst {max(beyond):6.1f}; "
        f"target <= 100)   no step after the cancel: {len(got)}/{len(got)} rounds"
    )


@contextlib.contextmanager
def file_store(where: str) -> Iterator[Store]:
    root = Path(tempfile.mkdtemp(prefix="bench-control-", dir=where))
    store = open_store(str(root))
    try:
        yield store
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def pg_store(url: str) -> Iterator[Store]:
    import psycopg
    from psycopg import sql

    schema = f"bench_control_{secrets.token_hex(4)}"
    store = open_store(f"{url}{'&' if '?' in url else '?'}schema={schema}")
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def amain(args: argparse.Namespace) -> int:
    print(f"cancel -> the attempt in a read stops; {args.rounds} rounds a store")
    kinds: list[tuple[str, Any]] = []
    if args.only in (None, "files"):
        kinds.append(("FileStore", lambda: file_store(args.dir)))
    if args.only in (None, "postgres"):
        kinds.append(("Postgres", lambda: pg_store(args.url)))
    for name, make in kinds:
        try:
            with make() as store:
                report(name, await measure(store, args.rounds))
        except ImportError as e:
            print(f"{name:<10} skipped: {e}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--url", default=os.environ.get("AGENTRUN_TEST_PG") or DEFAULT_URL)
    ap.add_argument("--dir", default=".", help="where FileStore's scratch directory goes")
    ap.add_argument("--only", choices=("files", "postgres"))
    return asyncio.run(amain(ap.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
