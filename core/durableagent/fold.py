"""The one definition of a run's status: a fold over its records, one record at a time.

``Fold`` keeps only what a status needs (open steps, decided markers, counts, times), so a
store can keep it up to date at each append and list 100,000 runs without reading their
journals; ``view_run`` uses the same fold for the status it shows. Its state is plain JSON.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .gate import Pending
from .lineage import ForkedFrom, forked_from, unfinished
from .outcome import Outcome, Status
from .record import RUN_COMPLETED, RUN_STARTED, SIGNAL, STEP_COMPLETED, STEP_STARTED, Record

PREVIEW = 80  # characters of the answer kept for a listing (ls --json)


class RunStatus(enum.StrEnum):
    """A run's status as a supervisor shows it (the first matching rule wins)."""

    CORRUPT = "corrupt"
    COMPLETED = "completed"
    MOVED = "moved"  # copied to another store by `agentrun copy --move`: it lives there now
    RUNNING = "running"
    INDETERMINATE = "indeterminate"
    AWAITING_APPROVAL = "awaiting_approval"
    FAILED = "failed"
    READY = "ready"


NEEDS_HUMAN = frozenset(
    {RunStatus.CORRUPT, RunStatus.INDETERMINATE, RunStatus.AWAITING_APPROVAL, RunStatus.FAILED}
)


@dataclass
class Fold:
    """What the records so far say about a run's status. ``add`` one record at a time.

    ``open`` maps each step that started and has no result to ``[write, start_seq,
    reconciled]`` (the latest start's recorded write flag, its seq, and whether a reconcile
    came after it); a step leaves it at its first result. ``steps`` counts steps by their first
    start (or a result without a start). ``origin`` is where a fork came from (its first
    record's ``forked_from``), ``origin_seq`` that record's seq."""

    last_seq: int = 0
    started_at: float | None = None
    last_at: float | None = None
    steps: int = 0
    model_calls: int = 0
    signals: int = 0
    completed: bool = False
    answer: str = ""
    open: dict[str, list[Any]] = field(default_factory=dict)
    decided: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)  # steps with a result, while few
    origin: ForkedFrom | None = None
    origin_seq: int = 0
    moved_to: str | None = None  # a move signal's destination (agentrun copy --move)

    def add(self, r: Record) -> None:
        """Fold one record in (records arrive in seq order)."""
        first = self.last_seq == 0
        self.last_seq = r.seq
        if self.started_at is None:
            self.started_at = r.at
        # The latest time, not the last record's: a fork's copies keep their original times
        # after its newer run.started, and its last activity is the fork.
        if self.last_at is None or r.at > self.last_at:
            self.last_at = r.at
        t = r.type
        data = r.data if isinstance(r.data, dict) else {}
        if t == STEP_STARTED:
            if r.step not in self.open and r.step not in self.finished:
                self.steps += 1
            # An idempotent write that never finished is re-run with its key, and a refused
            # call never ran: neither is indeterminate.
            write = (
                data.get("write") is True
                and data.get("idempotent") is not True
                and data.get("refused") is not True
            )
            self.open[r.step] = [write, r.seq, False]
            if r.kind == "model":
                self.model_calls += 1
        elif t == STEP_COMPLETED:
            if r.step in self.open:
                del self.open[r.step]
            elif r.step not in self.finished:
                self.steps += 1  # a result without a start (a hand-made journal)
            self.finished.add(r.step)
        elif t == SIGNAL:
            self.signals += 1
            name = data.get("name")
            payload = data.get("payload")
            payload = payload if isinstance(payload, dict) else {}
            if name in ("approve", "deny"):
                self.decided.add(str(payload.get("marker")))
            elif name == "reconcile" and r.step in self.open:
                self.open[r.step][2] = True
            elif name == "move":
                self.moved_to = str(payload.get("to") or "another store")
        elif t == RUN_COMPLETED:
            self.completed = True
            msg = data.get("message")
            content = msg.get("content") if isinstance(msg, dict) else None
            self.answer = content[:PREVIEW] if isinstance(content, str) else ""
        elif t == RUN_STARTED and first:
            self.origin = forked_from(r)
            self.origin_seq = r.seq

    def unfinished_fork(self, run_id: str = "") -> str | None:
        """Why the run is a fork whose copied records are not all there yet, or None."""
        return unfinished(self.origin, self.origin_seq, self.last_seq, run_id)

    @property
    def indeterminate(self) -> str | None:
        """The first write that started, has no result and no reconcile since its start."""
        return next((s for s, (w, _, rec) in self.open.items() if w and not rec), None)

    def pending(self, outcome: Outcome | None) -> list[Pending]:
        """The last outcome's pending calls nobody has decided on yet."""
        if outcome is None or outcome.status != Status.AWAITING_APPROVAL:
            return []
        return [p for p in outcome.pending if p.marker not in self.decided]

    def status(self, outcome: Outcome | None = None, leased: bool = False) -> RunStatus:
        """The status (SPEC §5), given the last attempt's outcome and whether the lease is
        held: the first rule that matches."""
        if self.completed:
            return RunStatus.COMPLETED
        if self.moved_to is not None and not leased:
            return RunStatus.MOVED
        if leased:
            return RunStatus.RUNNING
        if self.origin is not None and self.unfinished_fork() is not None:
            return RunStatus.CORRUPT  # half a history: nothing may run it (see lineage.py)
        if self.indeterminate is not None:
            return RunStatus.INDETERMINATE
        if self.pending(outcome):
            return RunStatus.AWAITING_APPROVAL
        failed = outcome is not None and outcome.status == Status.FAILED
        if failed and outcome is not None and outcome.seq == self.last_seq:
            return RunStatus.FAILED
        return RunStatus.READY

    def waiting_on(self, status: RunStatus, outcome: Outcome | None) -> str:
        """One line: what the run waits on (a pending call, the indeterminate step, the error)."""
        if status == RunStatus.FAILED and outcome is not None:
            return outcome.error
        if status == RunStatus.MOVED:
            return f"moved to {self.moved_to}"
        if status == RunStatus.INDETERMINATE:
            return f"reconcile {self.indeterminate}"
        if status == RunStatus.AWAITING_APPROVAL:
            pending = self.pending(outcome)
            more = f" (+{len(pending) - 1})" if len(pending) > 1 else ""
            return f"approve {pending[0].tool}{more}" if pending else "approval"
        return ""

    def to_json(self) -> dict[str, Any]:
        """The state as plain JSON (the ``finished`` set is dropped once it is large: it only
        guards step counts in hand-made journals)."""
        return {
            "last_seq": self.last_seq,
            "started_at": self.started_at,
            "last_at": self.last_at,
            "steps": self.steps,
            "model_calls": self.model_calls,
            "signals": self.signals,
            "completed": self.completed,
            "answer": self.answer,
            "open": self.open,
            "decided": sorted(self.decided),
            "origin": None if self.origin is None else self.origin.to_dict(),
            "origin_seq": self.origin_seq,
            "moved_to": self.moved_to,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Fold:
        return cls(
            last_seq=int(d["last_seq"]),
            started_at=d.get("started_at"),
            last_at=d.get("last_at"),
            steps=int(d["steps"]),
            model_calls=int(d["model_calls"]),
            signals=int(d.get("signals") or 0),
            completed=bool(d["completed"]),
            answer=str(d.get("answer") or ""),
            open={str(k): list(v) for k, v in dict(d.get("open") or {}).items()},
            decided=set(d.get("decided") or ()),
            origin=ForkedFrom.from_dict(d.get("origin")),
            origin_seq=int(d.get("origin_seq") or 0),
            moved_to=d.get("moved_to"),
        )


def fold(records: list[Record]) -> Fold:
    """The fold of a whole journal."""
    f = Fold()
    for r in records:
        f.add(r)
    return f


class Summary(NamedTuple):
    """One run's status line, what ``agentrun ls`` prints and the TUI's table shows: kept by
    the store at each append, so that listing a store reads no journal whole. (A named tuple:
    a listing makes 100,000 of them, five times faster than a frozen dataclass.)"""

    run_id: str
    status: RunStatus
    steps: int = 0
    model_calls: int = 0
    started_at: float | None = None
    last_activity: float | None = None
    last_seq: int = 0
    waiting_on: str = ""
    error: str = ""
    answer: str = ""  # the final answer's first 80 characters
    leased: bool = False
    pending: tuple[Pending, ...] = ()
    indeterminate: str | None = None
    signals: int = 0  # signal records so far (a new one gives a failed run a fresh budget)
    forked_from: ForkedFrom | None = None  # a fork's origin (its run.started's forked_from)

    @property
    def needs_human(self) -> bool:
        return self.status in NEEDS_HUMAN


def summarize(run_id: str, f: Fold, outcome: Outcome | None, leased: bool = False) -> Summary:
    """The summary of a run from its fold, its last outcome and its lease."""
    status = f.status(outcome, leased)
    error = outcome.error if status == RunStatus.FAILED and outcome is not None else ""
    if status == RunStatus.CORRUPT:
        error = f.unfinished_fork(run_id) or ""
    return Summary(
        run_id=run_id,
        status=status,
        steps=f.steps,
        model_calls=f.model_calls,
        started_at=f.started_at,
        last_activity=f.last_at,
        last_seq=f.last_seq,
        waiting_on=error if status == RunStatus.CORRUPT else f.waiting_on(status, outcome),
        error=error,
        answer=f.answer,
        leased=leased,
        pending=tuple(f.pending(outcome)) if status == RunStatus.AWAITING_APPROVAL else (),
        indeterminate=f.indeterminate if status == RunStatus.INDETERMINATE else None,
        signals=f.signals,
        forked_from=f.origin,
    )


def corrupt_summary(run_id: str, error: str) -> Summary:
    """The summary of a journal that does not load."""
    return Summary(run_id=run_id, status=RunStatus.CORRUPT, waiting_on=error, error=error)
