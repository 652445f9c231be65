"""What a journal's records say about its steps, read in one pass: the :class:`StepIndex` that
every replay rule, the plan and the signals' checks read; a human's :class:`Reconcile`; the
words a model reads for a deny and a halt; and the idempotency key a step hands to the systems
it writes to."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .control import Control, Controls
from .record import RUN_STARTED, SIGNAL, STEP_COMPLETED, STEP_STARTED, Record, signal_fields


@dataclass(frozen=True, slots=True)
class Reconcile:
    """A human's verdict on an indeterminate write: ``done`` (with the result they found,
    e.g. the ticket id) or ``retry`` (run the write again)."""

    step: str
    outcome: str
    result: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "outcome": self.outcome, "result": self.result}


def deny_reason(by: str | None, reason: str | None) -> str:
    """What the model reads when a human denied its call."""
    return f"denied by {by or 'a human'}" + (f": {reason}" if reason else "")


def halt_reason(c: Control) -> str:
    """Why a halting signal (a move, a cancel, a pause) stops the run, in words."""
    return f"it was {c.says()}"


def denial_of(marker: str, records: Iterable[Record]) -> str | None:
    """The reason of the first deny signal for ``marker`` among ``records``, else None."""
    for r in records:
        if r.type == SIGNAL:
            name, payload, by, why = signal_fields(r)
            if name == "deny" and payload.get("marker") == marker:
                return deny_reason(by, why)
    return None


def start_digest(run_started: Record | None) -> str:
    """The sha256 (hex) of the run's start: the run's time and input. The idempotency key takes
    its 12 hex digits from it, and the run's trace id its first 32."""
    seed = b""
    if run_started is not None and run_started.type == RUN_STARTED:
        seed = json.dumps([run_started.at, run_started.data], sort_keys=True).encode()
    return hashlib.sha256(seed).hexdigest()


def run_trace_id(run_started: Record | None) -> int:
    """The run's 128-bit trace id: the first 32 hex digits of its start digest, the same for
    every attempt of the run on every worker (never 0: that id is invalid)."""
    return int(start_digest(run_started)[:32], 16) or 1


def idempotency_key(run_id: str, step: str, run_started: Record | None) -> str:
    """The key a step hands to external systems: ``RUN:DIGEST:STEP``, the same every time the
    step runs in this run. DIGEST (12 hex) is taken from the run's ``run.started`` record (its
    time and input), so a run id used again for another run (a deleted journal, another store
    on the same ticket system) never shares a key with the old one. Tools read it from
    :class:`ToolContext`; treat it as opaque."""
    return f"{run_id}:{start_digest(run_started)[:12]}:{step}"


class StepIndex:
    """What the records say about each step, updated as records arrive (one pass, no scans)."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self.started: dict[str, Record] = {}  # the latest step.started
        self.starts: dict[str, int] = {}  # how many step.started records each step has
        self.completed: dict[str, Record] = {}  # the first step.completed
        self.reconciled: dict[str, Record] = {}  # the latest reconcile signal
        self.denied: dict[str, str] = {}  # marker -> what the model reads (the first deny)
        self.controls = Controls()  # cancel, pause, move, the budget and what was spent
        self.kinds: dict[str, str] = {}  # every step's kind, in the order steps first appear
        for r in records:
            self.add(r)

    def add(self, r: Record) -> None:
        self.controls.add(r)
        if r.type == STEP_STARTED:
            self.started[r.step] = r
            self.starts[r.step] = self.starts.get(r.step, 0) + 1
            self.kinds.setdefault(r.step, r.kind)
        elif r.type == STEP_COMPLETED:
            self.completed.setdefault(r.step, r)
            self.kinds.setdefault(r.step, r.kind)
        elif r.type == SIGNAL:
            name, payload, by, why = signal_fields(r)
            if name == "reconcile":
                self.reconciled[r.step] = r
            elif name == "deny":
                self.denied.setdefault(str(payload.get("marker")), deny_reason(by, why))

    @property
    def halt(self) -> Control | None:
        """The signal that stops the run before its next step (a move, a cancel, a pause)."""
        return self.controls.halt

    def is_write(self, step: str) -> bool:
        """The step's latest start recorded a write that may have acted: ``write: true``
        (the record, not today's gate) and not ``refused`` (a denied call runs nothing)."""
        s = self.started.get(step)
        return (
            s is not None
            and isinstance(s.data, dict)
            and s.data.get("write") is True
            and s.data.get("refused") is not True
        )

    def write_class(self, step: str) -> bool:
        """The step's latest start recorded the gate's class as a write (refused or not):
        what a supervisor shows; whether it may have acted is :meth:`is_write`."""
        s = self.started.get(step)
        return s is not None and isinstance(s.data, dict) and s.data.get("write") is True

    def is_idempotent(self, step: str) -> bool:
        """The step's latest start recorded an idempotent write: unfinished, it is run again
        with the same key rather than put to a human (the record decides, not today's gate)."""
        s = self.started.get(step)
        data = s.data if s is not None else None
        return (
            isinstance(data, dict) and data.get("write") is True and data.get("idempotent") is True
        )

    def reconcile_for(self, step: str) -> Reconcile | None:
        """The reconcile that counts: the latest one after the step's latest start."""
        sig, start = self.reconciled.get(step), self.started.get(step)
        if sig is None or start is None or sig.seq < start.seq:
            return None
        p = signal_fields(sig)[1]
        result = p.get("result")
        return Reconcile(step, str(p.get("outcome")), result if isinstance(result, str) else None)

    def indeterminate(self, step: str) -> bool:
        """A write that is not idempotent started, has no result, and no reconcile counts
        for it."""
        return (
            step in self.started
            and step not in self.completed
            and self.is_write(step)
            and not self.is_idempotent(step)
            and self.reconcile_for(step) is None
        )
