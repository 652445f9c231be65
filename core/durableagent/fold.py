"""The one definition of a run's status: a fold over its records, one record at a time.

``Fold`` keeps only what a status needs (open steps, decided markers, counts, times), so a
store can keep it up to date at each append and list 100,000 runs without reading their
journals; ``view_run`` uses the same fold for the status it shows. Its state is plain JSON.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .budget import Budget
from .control import Control, Controls
from .gate import Pending
from .lineage import ForkedFrom, forked_from, unfinished
from .outcome import Outcome, Status
from .record import RUN_COMPLETED, RUN_STARTED, SIGNAL, STEP_COMPLETED, STEP_STARTED, Record

PREVIEW = 80  # characters of the answer kept for a listing (ls --json)
FINISHED_KEPT = 64  # finished steps a fold remembers (see Fold.finished)


class RunStatus(enum.StrEnum):
    """A run's status as a supervisor shows it (the first matching rule wins)."""

    CORRUPT = "corrupt"
    COMPLETED = "completed"
    CANCELLED = "cancelled"  # a cancel signal: terminal, nothing resumes it
    MOVED = "moved"  # copied to another store by `agentrun copy --move`: it lives there now
    RUNNING = "running"
    INDETERMINATE = "indeterminate"
    OVER_BUDGET = "over_budget"  # it stopped at a limit: `agentrun budget` lets it go on
    # A new version cannot take over a call it would run (deploys.py): fork, cancel or
    # accept the change
    INCOMPATIBLE = "incompatible"
    AWAITING_APPROVAL = "awaiting_approval"
    PAUSED = "paused"  # a pause signal: no attempt starts until a resume
    FAILED = "failed"
    READY = "ready"


NEEDS_HUMAN = frozenset(
    {
        RunStatus.CORRUPT,
        RunStatus.INDETERMINATE,
        RunStatus.OVER_BUDGET,
        RunStatus.INCOMPATIBLE,
        RunStatus.AWAITING_APPROVAL,
        RunStatus.FAILED,
    }
)


def held_note(status: RunStatus, waiting_on: str) -> str:
    """What a run whose lease is held waits on, given its status as if the lease were free
    (what the stores keep): a cancel or a pause it is winding down after, else nothing. Both
    stores read their summaries through this."""
    halted = status in (RunStatus.CANCELLED, RunStatus.PAUSED)
    return f"stopping: {waiting_on}" if halted else ""


def approval_text(pending: Sequence[Pending], controls: Controls) -> str:
    """``approve create_ticket (+1)``, and ``· then held: paused`` for a paused run."""
    more = f" (+{len(pending) - 1})" if len(pending) > 1 else ""
    held = " · then held: paused" if controls.paused is not None else ""
    return (f"approve {pending[0].tool}{more}" if pending else "approval") + held


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
    # Steps with a result, while there are at most FINISHED_KEPT; then None for good (in a
    # fold from the journal and in one saved and reloaded alike, so that both count alike).
    finished: set[str] | None = field(default_factory=set)
    origin: ForkedFrom | None = None
    origin_seq: int = 0
    controls: Controls = field(default_factory=Controls)  # cancel, pause, move, budget, spend

    @property
    def moved_to(self) -> str | None:
        """A move signal's destination (agentrun copy --move), or None."""
        moved = self.controls.moved
        return None if moved is None else moved.to or "another store"

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
        self.controls.add(r)
        if t == STEP_STARTED:
            if r.step not in self.open and (self.finished is None or r.step not in self.finished):
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
            elif self.finished is None or r.step not in self.finished:
                self.steps += 1  # a result without a start (a hand-made journal)
            if self.finished is not None:
                self.finished.add(r.step)
                if len(self.finished) > FINISHED_KEPT:
                    self.finished = None
        elif t == SIGNAL:
            self.signals += 1
            name = data.get("name")
            payload = data.get("payload")
            payload = payload if isinstance(payload, dict) else {}
            if name in ("approve", "deny"):
                self.decided.add(str(payload.get("marker")))
            elif name == "accept-change":
                # Each call it names is answered as changed, never run: decided.
                calls = payload.get("calls")
                for c in calls if isinstance(calls, list) else ():
                    if isinstance(c, dict) and c.get("marker"):
                        self.decided.add(str(c["marker"]))
            elif name == "reconcile" and r.step in self.open:
                self.open[r.step][2] = True
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

    def over_budget(self, outcome: Outcome | None) -> bool:
        """The last attempt stopped at a limit, and no budget signal came since."""
        return (
            outcome is not None
            and outcome.status == Status.OVER_BUDGET
            and outcome.seq >= self.controls.budget_seq
        )

    def incompatible(self, outcome: Outcome | None) -> bool:
        """The last attempt found a call this version cannot take over, and nothing was
        recorded since (a signal makes it ready: the next attempt checks again, once)."""
        return (
            outcome is not None
            and outcome.status == Status.INCOMPATIBLE
            and outcome.seq >= self.last_seq
        )

    def status(self, outcome: Outcome | None = None, leased: bool = False) -> RunStatus:
        """The status (SPEC §5, §10), given the last attempt's outcome and whether the lease
        is held: the first rule that matches. (A journal that does not load is ``corrupt``
        before any of them: see :func:`corrupt_summary`.)"""
        c = self.controls
        if self.completed:
            return RunStatus.COMPLETED
        if c.cancelled is not None and not leased:
            return RunStatus.CANCELLED
        if c.moved is not None and not leased:
            return RunStatus.MOVED
        if leased:
            return RunStatus.RUNNING  # winding down, if a cancel or pause came: see stopping
        if self.origin is not None and self.unfinished_fork() is not None:
            return RunStatus.CORRUPT  # half a history: nothing may run it (see lineage.py)
        if self.indeterminate is not None:
            return RunStatus.INDETERMINATE
        if self.over_budget(outcome):
            return RunStatus.OVER_BUDGET
        if self.incompatible(outcome):
            return RunStatus.INCOMPATIBLE
        if self.pending(outcome):
            return RunStatus.AWAITING_APPROVAL
        if c.paused is not None:
            return RunStatus.PAUSED
        failed = outcome is not None and outcome.status == Status.FAILED
        if failed and outcome is not None and outcome.seq == self.last_seq:
            return RunStatus.FAILED
        return RunStatus.READY

    def waiting_on(self, status: RunStatus, outcome: Outcome | None) -> str:
        """One line: what the run waits on (a pending call, the indeterminate step, the error)."""
        if status == RunStatus.FAILED and outcome is not None:
            return outcome.error
        if status == RunStatus.CANCELLED and self.controls.cancelled is not None:
            return self.controls.cancelled.says()
        if status == RunStatus.PAUSED and self.controls.paused is not None:
            return self.controls.paused.says()
        if status in (RunStatus.OVER_BUDGET, RunStatus.INCOMPATIBLE) and outcome is not None:
            return outcome.error
        if status == RunStatus.MOVED:
            return f"moved to {self.moved_to}"
        if status == RunStatus.INDETERMINATE:
            return f"reconcile {self.indeterminate}"
        if status == RunStatus.AWAITING_APPROVAL:
            return approval_text(self.pending(outcome), self.controls)
        return ""

    def to_json(self) -> dict[str, Any]:
        """The state as plain JSON, all of it: a fold saved and reloaded folds the next
        records as the fold of the whole journal would (``finished`` is dropped, in both,
        once it is large: it only guards step counts in hand-made journals)."""
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
            "finished": None if self.finished is None else sorted(self.finished),
            "origin": None if self.origin is None else self.origin.to_dict(),
            "origin_seq": self.origin_seq,
            "controls": self.controls.to_json(),
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
            finished=None if d.get("finished") is None else set(d["finished"]),
            origin=ForkedFrom.from_dict(d.get("origin")),
            origin_seq=int(d.get("origin_seq") or 0),
            controls=_controls(d),
        )

    def listed(self) -> str:
        """What a listing says of the controls (see Summary.controls): "" for a run with
        neither a budget nor a control in force, as most are."""
        c = self.controls
        d: dict[str, Any] = {}
        if c.budget.limited:
            d["budget"] = c.budget.to_dict()
            d["spent"] = c.spend.to_dict()
            if c.started_at is not None:
                d["started_at"] = c.started_at
        halt = c.cancelled or c.paused
        if halt is not None:
            d["halt"] = halt.to_dict()
        return json.dumps(d, separators=(",", ":")) if d else ""


def _controls(d: dict[str, Any]) -> Controls:
    """The controls of a saved fold (one saved before they were kept has its move only)."""
    if "controls" in d:
        return Controls.from_json(d["controls"])
    moved = d.get("moved_to")
    return Controls(moved=Control("move", to=str(moved)) if moved else None)


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
    # The budget, what was spent and the cancel or pause in force, as JSON text ("" for a run
    # with none of them: most runs): read through budget, spent and halt.
    controls: str = ""

    @property
    def needs_human(self) -> bool:
        return self.status in NEEDS_HUMAN

    def _controls(self) -> dict[str, Any]:
        if not self.controls:
            return {}
        try:
            d = json.loads(self.controls)
        except ValueError:
            return {}
        return d if isinstance(d, dict) else {}

    @property
    def budget(self) -> Budget | None:
        """The run's limits, None when it has none."""
        d = self._controls().get("budget")
        return Budget.from_dict(d) if d else None

    @property
    def spent(self) -> dict[str, Any] | None:
        """What a budgeted run spent (tokens, reserved_tokens, model_calls, tool_calls)."""
        d = self._controls().get("spent")
        return d if isinstance(d, dict) else None

    @property
    def halt(self) -> Control | None:
        """The cancel or pause in force, if any."""
        return Control.from_dict(self._controls().get("halt"))

    @property
    def paused(self) -> bool:
        """Whether a pause is in force (SPEC §10: no attempt starts until a resume), whatever
        status shows first: an ``awaiting_approval`` run paused as well (``· then held:
        paused``), a running one winding down after the pause. A completed, cancelled or
        moved run is held by no pause."""
        if self.status == RunStatus.PAUSED:
            return True
        if not self.controls or self.status in _UNHELD:
            return False
        halt = self.halt
        return halt is not None and halt.name == "pause"

    def has_status(self, status: RunStatus) -> bool:
        """The one rule by which ``ls --status``, every query's ``status:`` term and the
        TUI's filter select a run: its status, and ``paused`` for any run whose pause is in
        force (see :attr:`paused`)."""
        return self.status == status or (status == RunStatus.PAUSED and self.paused)

    @property
    def stopping(self) -> str:
        """``cancel`` or ``pause`` while a running run's attempt winds down after one; ""."""
        halt = self.halt if self.status == RunStatus.RUNNING else None
        return "" if halt is None else halt.name


_UNHELD = (RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.MOVED)


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
        controls=f.listed(),
    )


def corrupt_summary(run_id: str, error: str) -> Summary:
    """The summary of a journal that does not load."""
    return Summary(run_id=run_id, status=RunStatus.CORRUPT, waiting_on=error, error=error)
