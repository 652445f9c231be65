"""The chaos run's agent and the outside world it writes to (see ``scripts/chaos.py``).

The **ledger** is a system a write reaches, shared by every worker: a folder with an
append-only ``effects.jsonl`` (one line per write that took effect: run, step, idempotency
key, epoch, pid) and ``refused.jsonl`` (a write refused by the fence), both written under an
``flock`` and fsynced. Like the demo's ticket system it honours the fence: a write whose
epoch is lower than the highest it has seen for that run is refused. It does *not*
deduplicate on the key: a second effect with the same key is the doubled write the chaos run
counts. A line torn by a SIGKILL is no effect (its writer never returned) and is cut off by
the next write. ``closed.jsonl`` holds the fences a human raised by hand (:meth:`Ledger.close`).

The **agent** (``chaos_agent:chaos``, the ledger's folder in ``$CHAOS_LEDGER``): a scripted
model that asks two reads, then a write, then a read and a write in one turn, then answers.
Every tool and model step sleeps a little (so faults land inside steps), and every result
names the lease epoch of the attempt that made it (``... epoch N``): the chaos run reads it
back from the journal to tell which attempt appended each record.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from durableagent import Agent, AgentConfig, Message, PolicyGate, Result, Tool, ToolCall
from durableagent.tools import ToolContext, current_context

EFFECTS = "effects.jsonl"
REFUSED = "refused.jsonl"
CLOSED = "closed.jsonl"
WRITES = ("file_ticket", "send_note")


class StaleFenceError(Exception):
    """The ledger refused a write from a holder whose epoch was superseded."""


class Ledger:
    """The shared ledger in ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path | str) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def _locked(self, how: int) -> Iterator[None]:
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, how)
            yield
        finally:
            os.close(fd)

    def write(self, run_id: str, step: str, key: str, epoch: int) -> int:
        """Record one effect; its number (1, 2, ...). StaleFenceError, and a line in
        ``refused.jsonl``, when a higher epoch was seen for the run."""
        with self._locked(fcntl.LOCK_EX):
            effects = self._read(EFFECTS, repair=True)
            seen = [e for e in effects + self._read(CLOSED) if e["run"] == run_id]
            highest = max((e["epoch"] for e in seen), default=0)
            entry = {
                "run": run_id,
                "step": step,
                "key": key,
                "epoch": epoch,
                "pid": os.getpid(),
                "at": time.time(),
            }
            if epoch < highest:
                self._add(REFUSED, {**entry, "highest": highest})
                raise StaleFenceError(
                    f"refused: run {run_id!r} is at epoch {highest} in the ledger; this write "
                    f"carries epoch {epoch} (its worker lost the lease)"
                )
            entry = {"n": len(effects) + 1, **entry}
            self._add(EFFECTS, entry)
            return int(entry["n"])

    @contextmanager
    def inflight(self, ctx: ToolContext) -> Iterator[None]:
        """Mark a write in flight in this process (``inflight/<pid>.<n>``) while it runs: the
        chaos run aims some faults at a worker inside a write. A killed writer leaves its
        mark behind; the chaos run only aims at live workers."""
        folder = self.folder / "inflight"
        folder.mkdir(exist_ok=True)
        mark = folder / f"{os.getpid()}.{time.monotonic_ns()}"
        mark.write_text(f"{ctx.run_id} {ctx.step}\n")
        try:
            yield
        finally:
            mark.unlink(missing_ok=True)

    def writing(self) -> dict[int, list[tuple[str, str]]]:
        """The writes in flight (run, step) by pid (a killed writer's stay listed)."""
        out: dict[int, list[tuple[str, str]]] = {}
        folder = self.folder / "inflight"
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return out
        for n in names:
            try:
                run_id, step = (folder / n).read_text().split()
            except (OSError, ValueError):  # ended meanwhile, or not written yet
                continue
            out.setdefault(int(n.split(".", 1)[0]), []).append((run_id, step))
        return out

    def close(self, run_id: str, below: int) -> None:
        """Refuse from now on every write of the run with an epoch lower than ``below`` (what
        a careful human does before looking up an unfinished write: a holder paused inside
        it may still wake and send it)."""
        with self._locked(fcntl.LOCK_EX):
            self._add(CLOSED, {"run": run_id, "epoch": below, "at": time.time()})

    def effects(self) -> list[dict[str, Any]]:
        with self._locked(fcntl.LOCK_SH):
            return self._read(EFFECTS)

    def refused(self) -> list[dict[str, Any]]:
        with self._locked(fcntl.LOCK_SH):
            return self._read(REFUSED)

    def find(self, key: str) -> list[dict[str, Any]]:
        """The effects recorded under ``key`` (what a human looks up when reconciling)."""
        return [e for e in self.effects() if e["key"] == key]

    def _read(self, name: str, *, repair: bool = False) -> list[dict[str, Any]]:
        path = self.folder / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        whole = data[: data.rfind(b"\n") + 1]
        if repair and len(whole) != len(data):
            with open(path, "r+b") as f:  # a writer killed mid-line: that write never happened
                f.truncate(len(whole))
                os.fsync(f.fileno())
        return [json.loads(line) for line in whole.splitlines()]

    def _add(self, name: str, entry: dict[str, Any]) -> None:
        fd = os.open(self.folder / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)


def epoch_of(ctx: ToolContext) -> int:
    if ctx.fence is None:
        raise RuntimeError(f"step {ctx.step} runs without a lease: nothing to fence with")
    return ctx.fence[1]


class ChaosModel:
    """The scripted conversation; each reply's content names the attempt's epoch."""

    def __init__(self, pace: float) -> None:
        self.pace = pace

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        await asyncio.sleep(random.uniform(0, self.pace))
        said = f"epoch {epoch_of(current_context())}"
        done = sum(1 for m in messages if m.role == "tool")
        if done == 0:
            calls = (
                ToolCall("r1", "lookup", {"topic": "a"}),
                ToolCall("r2", "lookup", {"topic": "b"}),
            )
        elif done == 2:
            calls = (ToolCall("w1", "file_ticket", {"summary": "chaos"}),)
        elif done == 3:
            calls = (
                ToolCall("r3", "lookup", {"topic": "c"}),
                ToolCall("w2", "send_note", {"to": "on-call"}),
            )
        else:
            return Message("assistant", f"done after {done} calls; {said}")
        return Message("assistant", said, tool_calls=calls)


def chaos(root: Any) -> Agent:
    """The chaos run's agent (``--agent chaos_agent:chaos``); the ledger is ``$CHAOS_LEDGER``."""
    ledger = Ledger(os.environ["CHAOS_LEDGER"])
    pace = float(os.environ.get("CHAOS_PACE", "0.1"))

    def lookup(args: dict[str, Any], ctx: ToolContext) -> str:
        time.sleep(random.uniform(0, pace))
        return f"policy {args.get('topic')}; epoch {epoch_of(ctx)}"

    def write(name: str) -> Tool:
        def fn(args: dict[str, Any], ctx: ToolContext) -> Result:
            with ledger.inflight(ctx):
                time.sleep(random.uniform(pace / 2, pace))  # the request on its way
                n = ledger.write(ctx.run_id, ctx.step, ctx.idempotency_key, epoch_of(ctx))
                time.sleep(random.uniform(0, pace))  # the answer on its way back
            return Result(f"L{n}; epoch {epoch_of(ctx)}")

        return Tool(name, f"{name} in the ledger", {"type": "object"}, fn)

    tools = [Tool("lookup", "look up a policy", {"type": "object"}, lookup)]
    tools += [write(name) for name in WRITES]
    gate = PolicyGate(writes=set(WRITES), approve=())
    return Agent(AgentConfig(ChaosModel(pace), tools, max_turns=10), gate)
