"""On call (issue 17): the figures of SPEC §11, each against a baseline measured in the same
run.

- notice latency: a run enters awaiting_approval → its notice received by a local json://
  webhook, against the change feed's own latency for the same append (FileStore and
  PostgreSQL); target ≤ 1 s.
- heartbeat cost: the CPU of a worker's beats as a share of one core at the default 5 s
  heartbeat, and an idle worker's CPU with beats against one without (a beat every 10⁶ s);
  target ≤ 1 %.
- ``agentrun workers`` on a store of 100,000 runs (and 20 workers), against the same on an
  empty store; target ≤ 0.3 s.

    python bench/bench_oncall.py [--runs 100000] [--trials 10] [--pg URL | --no-pg]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_stores import build_runs  # noqa: E402
from notify_sinks import webhook  # noqa: E402

from durableagent import (  # noqa: E402
    Agent,
    AgentConfig,
    Message,
    PolicyGate,
    ScriptedModel,
    Status,
    Store,
    ToolCall,
    open_store,
)
from durableagent.cli.main import main as agentrun  # noqa: E402
from durableagent.notify import check_targets, parse_kinds  # noqa: E402
from durableagent.notify.notifier import Notifier  # noqa: E402
from durableagent.roster import this_process  # noqa: E402
from durableagent.testing import JournalWriter  # noqa: E402
from durableagent.worker import Worker  # noqa: E402

DEFAULT_PG = os.environ.get("AGENTRUN_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/test"


def awaiting(store: Store, run_id: str, feed_at: dict[str, float]) -> float:
    """A run that asks for approval; its records land first, then (once the feed has told
    them) the outcome that makes it awaiting_approval. Returns when that outcome landed."""
    j = JournalWriter(store, run_id, time.time() - 10)
    j.start("please file it")
    with j.attempt("bench:1"):
        (p,) = j.asks(1, ToolCall("c1", "create_ticket", {"summary": "VPN"}))
        time.sleep(0.3)
        feed_at.pop(run_id, None)
        j.outcome(Status.AWAITING_APPROVAL, pending=(p,))
        return time.time()


def latency(spec: str, trials: int) -> tuple[float, float]:
    """Median seconds from the outcome saved to (the change feed naming the run, the webhook
    receiving its notice). A feed that never named it after the outcome counts as the
    webhook's time (it cannot be later than the notice it caused)."""
    store = open_store(spec, create=True)
    feed_at: dict[str, float] = {}
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    with webhook() as sink:
        notifier = Notifier(store, check_targets([sink.url]), kinds=parse_kinds("approval"))

        async def both() -> None:
            async def feed() -> None:
                async for ids in store.changes(rescan=30):
                    now = time.time()
                    for rid in ids:
                        feed_at.setdefault(rid, now)

            task = asyncio.create_task(feed())
            await notifier.serve(stop)
            task.cancel()

        thread = threading.Thread(target=lambda: loop.run_until_complete(both()), daemon=True)
        thread.start()
        time.sleep(1.5)  # the feed and the notifier are up
        feed, hook = [], []
        for i in range(trials):
            rid = f"lat-{i}"
            t0 = awaiting(store, rid, feed_at)
            sink.wait(lambda ms, rid=rid: any(f"run {rid} " in str(m["message"]) for m in ms))
            got = next(t for t, m in sink.received if f"run {rid} " in str(m["message"]))
            time.sleep(0.2)
            hook.append(got - t0)
            feed.append(feed_at.get(rid, got) - t0)
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
    store.close()
    return statistics.median(feed), statistics.median(hook)


def heartbeat_cost(seconds: float) -> tuple[float, float, float]:
    """(a beat's CPU share of a core at 5 s; idle worker CPU share with beats; without)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "runs"), create=True)
        agent = Agent(AgentConfig(ScriptedModel([Message("assistant", "ok")])), PolicyGate())
        w = Worker(agent, store, owner="bench", heartbeat=5.0)
        w.heartbeat.register()
        t = time.process_time()
        for _ in range(200):
            w.heartbeat.beat()
        per_beat = (time.process_time() - t) / 200

        def idle(heartbeat: float) -> float:
            worker = Worker(agent, store, owner=f"idle-{heartbeat}", heartbeat=heartbeat)

            async def go() -> None:
                stop = asyncio.Event()
                asyncio.get_running_loop().call_later(seconds, stop.set)
                await worker.serve(stop)

            t0, c0 = time.perf_counter(), time.process_time()
            asyncio.run(go())
            return (time.process_time() - c0) / (time.perf_counter() - t0)

        with_beats, without = idle(0.5), idle(1e6)  # 0.5 s: ten times the default's beats
        store.close()
    return per_beat / 5.0, with_beats, without


def workers_time(runs: int) -> tuple[float, float, float, float]:
    """(in-process, subprocess) seconds of ``agentrun workers`` with ``runs`` runs, then the
    same on an empty store."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (runs, 0):
            root = Path(tmp) / f"s{n}"
            if n:
                build_runs(root, n)
            store = open_store(str(root), create=True)
            for i in range(20):
                store.beat(this_process(f"w{i}", agent="bench:agent"))
            devnull = open(os.devnull, "w")  # noqa: SIM115
            stdout, sys.stdout = sys.stdout, devnull
            try:
                t = time.perf_counter()
                agentrun(["workers", "--store", str(root)])
                inproc = time.perf_counter() - t
            finally:
                sys.stdout = stdout
                devnull.close()
            times = []
            for _ in range(5):  # the median: a loaded machine starts interpreters unevenly
                t = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "durableagent.cli", "workers", "--store", str(root)],
                    stdout=subprocess.DEVNULL,
                    check=True,
                )
                times.append(time.perf_counter() - t)
            out += [inproc, statistics.median(times)]
    return out[0], out[1], out[2], out[3]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of an idle worker")
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--no-pg", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        specs = [("FileStore", str(Path(tmp) / "runs"))]
        if not args.no_pg:
            sep = "&" if "?" in args.pg else "?"
            specs.append(("PostgreSQL", f"{args.pg}{sep}schema=bench_{uuid.uuid4().hex[:8]}"))
        for name, spec in specs:
            feed, hook = latency(spec, args.trials)
            print(
                f"notice latency, {name}: webhook {hook * 1000:.0f} ms median, change feed "
                f"{feed * 1000:.0f} ms (×{hook / max(feed, 1e-6):.1f}); target ≤ 1000 ms: "
                f"{'ok' if hook <= 1.0 else 'MISSED'}"
            )
    share, with_beats, without = heartbeat_cost(args.idle)
    print(
        f"heartbeat: {share * 100:.4f} % of a core at 5 s; an idle worker beating every 0.5 s "
        f"uses {with_beats * 100:.2f} %, without beats {without * 100:.2f} %; target ≤ 1 %: "
        f"{'ok' if share <= 0.01 else 'MISSED'}"
    )
    inproc, child, inproc0, child0 = workers_time(args.runs)
    print(
        f"agentrun workers, {args.runs:,} runs and 20 workers: {inproc * 1000:.1f} ms in "
        f"process, {child * 1000:.0f} ms as a command (empty store: {inproc0 * 1000:.1f} ms, "
        f"{child0 * 1000:.0f} ms); target ≤ 300 ms: {'ok' if inproc <= 0.3 else 'MISSED'} "
        f"in process, the runs adding {(child - child0) * 1000:+.0f} ms to the command (whose "
        "time is the interpreter's start: compare agentrun --version)"
    )


if __name__ == "__main__":
    main()
