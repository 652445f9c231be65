"""The races of the "races and hostile stores" issue, repeated with real processes.

- deny race: a gated write is approved; while the turn's earlier call (a read held open) runs
  in an ``agentrun worker`` process, ``agentrun deny`` (another process) denies it. Counts the
  denies accepted and the writes that happened after an accepted deny (must be 0).
- grace race: an ``agentrun worker`` with ``--grace 0.2`` gets SIGTERM while a slow write runs
  in a tool thread; then a human follows the documented procedure (reconcile retry) and a new
  worker finishes the run. Counts the write's effects (must be exactly 1 completed effect).
- ls on a store holding a FIFO and a directory named like journals: its time against ``ls`` on
  the same store without them (bounded, not a hang).

    python bench/bench_races.py [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from durableagent import (
    Agent,
    AgentConfig,
    FileStore,
    Message,
    PolicyGate,
    Reconcile,
    RunStatus,
    ScriptedModel,
    Tool,
    ToolCall,
    submit,
    view_store,
)
from durableagent import signal as send_signal

HERE = Path(__file__).resolve().parent


def note(root: Path, what: str, line: str) -> None:
    with open(root / f".{what}.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def lines(root: Path, what: str) -> list[str]:
    p = root / f".{what}.log"
    return p.read_text().splitlines() if p.exists() else []


def wait_file(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(path)
        time.sleep(0.005)


def race_agent(root: Path) -> Agent:
    """Per run (its request names it): a read held open until ``.go-RUN``, then a gated
    ticket."""

    def reply(messages: Sequence[Message]) -> Message:
        run = next(m.content for m in messages if m.role == "user")
        done = [m for m in messages if m.role == "tool"]
        if not done:
            calls = (
                ToolCall("r", "slow_lookup", {"run": run}),
                ToolCall("w", "create_ticket", {"run": run}),
            )
            return Message("assistant", tool_calls=calls)
        return Message("assistant", " | ".join(m.content for m in done))

    def slow_lookup(args: dict[str, Any]) -> str:
        note(root, "lookups", args["run"])
        wait_file(root / f".go-{args['run']}")
        return "policy"

    def create_ticket(args: dict[str, Any]) -> str:
        note(root, "tickets", args["run"])
        return "TICKET"

    tools = [Tool("slow_lookup", fn=slow_lookup), Tool("create_ticket", fn=create_ticket)]
    return Agent(AgentConfig(ScriptedModel(reply), tools), PolicyGate(writes={"create_ticket"}))


SLOW = float(os.environ.get("BENCH_SLOW_WRITE", "1.0"))


def slow_agent(root: Path) -> Agent:
    """An unattended write that takes BENCH_SLOW_WRITE seconds in a thread."""

    def reply(messages: Sequence[Message]) -> Message:
        if not any(m.role == "tool" for m in messages):
            return Message("assistant", tool_calls=(ToolCall("w", "slow_write", {}),))
        return Message("assistant", "written")

    def slow_write(args: dict[str, Any]) -> str:
        note(root, "writes", "begin")
        time.sleep(SLOW)
        note(root, "writes", "end")
        return "written"

    gate = PolicyGate(writes={"slow_write"}, approve=())
    return Agent(AgentConfig(ScriptedModel(reply), [Tool("slow_write", fn=slow_write)]), gate)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), e.get("PYTHONPATH")]))
    return e


def worker(root: Path, agent: str, *args: str, **extra: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "durableagent.cli", "worker", "--agent", f"bench_races:{agent}"]
    return subprocess.Popen(
        [*cmd, "--store", str(root), *args],
        env={**env(), **extra},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def agentrun(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args, "--store", str(root)],
        capture_output=True,
        text=True,
        env=env(),
    )


def until(what: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            raise TimeoutError("gave up waiting")
        time.sleep(0.005)


def deny_race(runs: int) -> tuple[int, int, int]:
    """(denies accepted, writes after an accepted deny, denies refused as too late)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = FileStore(Path(tmp) / "runs")
        root = store.root
        w = worker(root, "race_agent", "--concurrency", "8")
        accepted = leaked = late = 0
        try:
            for i in range(runs):
                rid = f"r{i:03d}"
                submit(store, rid, [Message("user", rid)])
                until(lambda rid=rid: view_store(store, rid).status == "awaiting_approval")
                (p,) = view_store(store, rid).pending
                send_signal(store, rid, "approve", {"marker": p.marker}, by="alice")
                until(lambda rid=rid: rid in lines(root, "lookups"))
                denied = agentrun(root, "deny", rid, p.marker, "--by", "bob")
                (root / f".go-{rid}").touch()
                until(lambda rid=rid: view_store(store, rid).status == RunStatus.COMPLETED)
                wrote = rid in lines(root, "tickets")
                if denied.returncode == 0:
                    accepted += 1
                    leaked += wrote
                else:
                    late += 1
        finally:
            w.send_signal(signal.SIGTERM)
            w.wait(30)
        return accepted, leaked, late


def grace_race(runs: int) -> tuple[int, int, int]:
    """(workers that exited with code 3, runs whose write completed twice, runs completed)."""
    exited = doubled = completed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            store = FileStore(Path(tmp) / f"s{i}")
            root = store.root
            submit(store, "slow", [Message("user", "write")])
            w = worker(root, "slow_agent", "--grace", "0.2")
            until(lambda root=root: lines(root, "writes") == ["begin"])
            w.send_signal(signal.SIGTERM)
            exited += w.wait(30) == 3
            time.sleep(SLOW + 0.1)  # when the write would end had its thread survived
            assert view_store(store, "slow").status == RunStatus.INDETERMINATE
            send_signal(store, "slow", "reconcile", Reconcile("tool/1/0/slow_write", "retry"))
            w2 = worker(root, "slow_agent", BENCH_SLOW_WRITE="0.01")
            until(lambda store=store: view_store(store, "slow").status == RunStatus.COMPLETED)
            w2.send_signal(signal.SIGTERM)
            w2.wait(30)
            completed += 1
            doubled += lines(root, "writes").count("end") != 1
    return exited, doubled, completed


def ls_time(repeat: int = 5) -> tuple[float, float]:
    """Median seconds of ``agentrun ls`` on 200 runs, without and with a FIFO and a
    directory named like journals."""
    with tempfile.TemporaryDirectory() as tmp:
        store = FileStore(Path(tmp) / "runs")
        for i in range(200):
            submit(store, f"run-{i:03d}", [Message("user", "hi")])

        def median() -> float:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                r = subprocess.run(
                    [sys.executable, "-m", "durableagent.cli", "ls", "--store", str(store.root)],
                    capture_output=True,
                    timeout=60,
                )
                times.append(time.perf_counter() - t0)
                assert r.returncode == 0, r.stderr
            return statistics.median(times)

        clean = median()
        os.mkfifo(store.root / "pipe.jsonl")
        os.mkdir(store.root / "folder.jsonl")
        return clean, median()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    accepted, leaked, late = deny_race(args.runs)
    print(f"deny race x{args.runs}: {accepted} denies accepted, {late} refused as too late;")
    print(f"  writes after an accepted deny: {leaked}")
    exited, doubled, completed = grace_race(args.runs)
    print(f"grace race x{args.runs}: {exited} workers exited holding a live write's lease;")
    print(f"  runs completed after reconcile retry: {completed}, writes completed twice: {doubled}")
    clean, hostile = ls_time()
    print(
        f"agentrun ls, 200 runs: {clean * 1000:.0f} ms; with a FIFO and a directory journal: "
        f"{hostile * 1000:.0f} ms ({hostile / clean:.2f}x)"
    )


if __name__ == "__main__":
    main()
