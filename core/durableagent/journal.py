"""Journal: the StepRunner that makes the loop durable by recording every step."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .errors import IndeterminateError, RunStopped
from .loop import StepFn
from .messages import StepKind
from .record import SIGNAL, STEP_COMPLETED, STEP_STARTED, Record, signal_fields
from .store import Store
from .tools import Result


@dataclass(frozen=True, slots=True)
class Reconcile:
    """A human's verdict on an indeterminate write: ``done`` (with the result they found,
    e.g. the ticket id) or ``retry`` (run the write again)."""

    step: str
    outcome: str
    result: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "outcome": self.outcome, "result": self.result}


class StepIndex:
    """What the records say about each step, updated as records arrive (one pass, no scans)."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self.started: dict[str, Record] = {}  # the latest step.started
        self.completed: dict[str, Record] = {}  # the first step.completed
        self.reconciled: dict[str, Record] = {}  # the latest reconcile signal
        for r in records:
            self.add(r)

    def add(self, r: Record) -> None:
        if r.type == STEP_STARTED:
            self.started[r.step] = r
        elif r.type == STEP_COMPLETED:
            self.completed.setdefault(r.step, r)
        elif r.type == SIGNAL and signal_fields(r)[0] == "reconcile":
            self.reconciled[r.step] = r

    def is_write(self, step: str) -> bool:
        """The step's latest start recorded ``write: true`` (the record, not today's gate)."""
        s = self.started.get(step)
        return s is not None and isinstance(s.data, dict) and s.data.get("write") is True

    def reconcile_for(self, step: str) -> Reconcile | None:
        """The reconcile that counts: the latest one after the step's latest start."""
        sig, start = self.reconciled.get(step), self.started.get(step)
        if sig is None or start is None or sig.seq < start.seq:
            return None
        p = signal_fields(sig)[1]
        result = p.get("result")
        return Reconcile(step, str(p.get("outcome")), result if isinstance(result, str) else None)

    def indeterminate(self, step: str) -> bool:
        """A write started, has no result, and no reconcile counts for it."""
        return (
            step in self.started
            and step not in self.completed
            and self.is_write(step)
            and self.reconcile_for(step) is None
        )


class Journal:
    """Runs steps through the store: start recorded before ``fn``, result recorded before it
    is used, completed steps replayed, unrecorded writes never guessed at.

    ``stop``, when given, is asked before each new step starts; once it says True the journal
    raises RunStopped instead of starting one (steps already running finish and record)."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        records: list[Record],
        *,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.records = records
        self.index = StepIndex(records)
        self.stop = stop

    @property
    def last_seq(self) -> int:
        return self.records[-1].seq if self.records else 0

    def is_recorded(self, name: str) -> bool:
        return name in self.index.completed

    async def run_step(self, name: str, kind: StepKind, fn: StepFn, *, write: bool = False) -> Any:
        done = self.index.completed.get(name)
        if done is not None:
            return done.data
        if name in self.index.started and self.index.is_write(name):
            verdict = self.index.reconcile_for(name)
            if verdict is None:
                raise IndeterminateError(name)
            if verdict.outcome == "done":
                result = Result(verdict.result or "").to_dict()
                return (await self.append(Record.make(STEP_COMPLETED, name, kind, result))).data
            # "retry": run it again below; the new start makes the reconcile count no more.
        if self.stop is not None and self.stop():
            raise RunStopped(name)
        started = {"write": write} if kind == StepKind.TOOL else {}
        await self.append(Record.make(STEP_STARTED, name, kind, started))
        value = await fn()
        # The first execution returns what a replay would: the value passed through JSON.
        value = json.loads(json.dumps(value, allow_nan=False))
        return (await self.append(Record.make(STEP_COMPLETED, name, kind, value))).data

    async def append(self, record: Record) -> Record:
        """Append a record to the run's journal and to this view of it."""
        # fsync takes milliseconds: keep it off the event loop (a worker runs many runs on it).
        stored = await asyncio.to_thread(self.store.append, self.run_id, record)
        self.records.append(stored)
        self.index.add(stored)
        return stored
