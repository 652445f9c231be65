"""``agentrun deploy-check`` at 10,000 unfinished runs (issue 25: "answers within a few
seconds"): ``python bench/bench_deploy_check.py [--runs 10000] [--store URL]``.

The store is filled with copies of three runs that v1 of tests/_deploy_agents.py left
awaiting approval, ready (a read cut off) and indeterminate (every run unfinished: the most
deploy-check has to read), imported under new ids as ``agentrun copy`` would. Then, in the
same run, on the same store, each command is timed as a user runs it (a fresh process,
best of 3): the baseline ``agentrun ls`` (summaries only), and ``agentrun deploy-check
--agent _deploy_agents:v2`` (every unfinished journal read and checked against v2). The
in-process cost of the check alone (``check_store``) is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from _deploy_agents import v1, v2  # noqa: E402

from durableagent import Config, Message, Store, marker_for, open_store, run, signal  # noqa: E402
from durableagent.deploys import check_store  # noqa: E402


async def templates(store: Store, side: Path) -> None:
    agent = v1(side)
    config = Config(agent.config, agent.gate, store, agent.code)
    await run(config, "t-await", [Message("user", "approval: printer")])
    await run(config, "t-indet", [Message("user", "indeterminate: fail")])
    marker = marker_for("tool/1/0/create_ticket", {"title": "indeterminate: fail"})
    signal(store, "t-indet", "approve", {"marker": marker}, by="ann")
    with contextlib.suppress(RuntimeError):
        await run(config, "t-indet", None)
    attempt = asyncio.create_task(run(config, "t-ready", [Message("user", "lookup: hang")]))
    while not any(r.step == "llm/2" for r in store.load("t-ready")):
        await asyncio.sleep(0.01)
    attempt.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await attempt


def fill(store: Store, n: int) -> None:
    sources = ["t-await", "t-ready", "t-indet"]
    copies = [(store.export_run(s), store.attempts(s)) for s in sources]
    for i in range(n - len(sources)):
        lines, attempts = copies[i % len(copies)]
        store.import_run(f"run-{i:06d}", lines, attempts)


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    best, code = float("inf"), 0
    for _ in range(3):
        t = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        best = min(best, time.perf_counter() - t)
        code = out.returncode
    return best, code


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=10_000)
    p.add_argument("--store", default=None, help="a store to fill (default: a temp FileStore)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = args.store or str(Path(tmp) / "runs")
        side = Path(tmp) / "side"
        store = open_store(spec)
        t = time.perf_counter()
        asyncio.run(templates(store, side))
        fill(store, args.runs)
        store.summaries()  # the index is built once, as any first listing would
        print(f"filled {args.runs} unfinished runs in {time.perf_counter() - t:.1f}s ({spec})")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "tests"), env.get("PYTHONPATH")])
        )
        env["AGENTRUN_SIDE"] = str(side)
        base = [sys.executable, "-m", "durableagent.cli", "--store", spec]
        ls, _ = timed([*base, "ls"], env)
        check, code = timed([*base, "deploy-check", "--agent", "_deploy_agents:v2"], env)
        agent = v2(side)
        t = time.perf_counter()
        checks = check_store(store, agent.code, agent.gate)
        alone = time.perf_counter() - t
        store.close()
    print(f"agentrun ls            {ls:6.2f}s  (baseline)")
    print(f"agentrun deploy-check  {check:6.2f}s  ({check / ls:.1f}x ls; exit {code})")
    each = alone / len(checks) * 1e6
    print(f"check_store in-process {alone:6.2f}s  ({len(checks)} runs, {each:.0f} µs a run)")


if __name__ == "__main__":
    main()
