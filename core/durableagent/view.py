"""What a supervisor sees: one pure fold from a run's records to its status and details."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .calls import requested_calls
from .control import Control, Controls
from .errors import DurableAgentError, StoreUnavailableError
from .fold import NEEDS_HUMAN, Fold, RunStatus, approval_text
from .gate import Pending
from .ids import check_run_id
from .lineage import ForkedFrom
from .messages import Message, ToolCall
from .outcome import Outcome
from .record import (
    RUN_COMPLETED,
    RUN_STARTED,
    SIGNAL,
    STEP_COMPLETED,
    STEP_STARTED,
    Record,
)
from .step_index import StepIndex
from .stores import Store
from .takeover import late_write_note


@dataclass(frozen=True)
class Tokens:
    """Tokens a model used, as its provider reported them."""

    input: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.input + other.input, self.output + other.output)

    def to_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input, "output_tokens": self.output}


@dataclass(frozen=True)
class StepView:
    """One step of a run: when it started, whether it finished, and with what."""

    name: str
    kind: str
    write: bool
    started: bool
    completed: bool
    result: Any = None
    started_at: float | None = None
    completed_at: float | None = None
    attempts: int = 0
    call: ToolCall | None = None  # for a tool step: the call the model step asked for
    usage: Tokens | None = None  # for a model step: the tokens its recorded reply used
    idempotent: bool = False  # a write that re-runs on its own (its latest start says so)
    hint: str = ""  # a write's: where a human checks whether it happened (journal text)
    model: str | None = None  # for a model step: the model that answered, as reported
    # for a tool step whose class its code did not declare: where the class came from
    # ("annotation", "override", "default", or "gate" when a hand-written PolicyGate
    # overruled it; journal text), as its latest start recorded it
    classified_by: str = ""


@dataclass(frozen=True)
class RunView:
    """Everything a supervisor shows about one run."""

    run_id: str
    status: RunStatus
    records: tuple[Record, ...] = ()
    steps: tuple[StepView, ...] = ()
    pending: tuple[Pending, ...] = ()
    indeterminate: StepView | None = None
    answer: Message | None = None
    input: tuple[Message, ...] = ()
    model_calls: int = 0
    started_at: float | None = None
    last_activity: float | None = None
    error: str = ""
    error_line: int = 0  # corrupt: the 1-based line that does not load
    error_reason: str = ""  # corrupt: what is wrong with that line
    outcome: Outcome | None = None
    leased: bool = False
    signals: tuple[Record, ...] = field(default=())
    forked_from: ForkedFrom | None = None  # a fork's origin; its forks: durableagent.forks_of
    tokens: Tokens | None = None  # the model steps' usage summed; None when none reported
    # indeterminate: why its write may still land (its holder may be paused, not dead); ""
    late_write: str = ""
    moved_to: str | None = None  # where a move signal sent it (agentrun copy --move)
    # The controls: the cancel or pause in force, the budget and what was spent (SPEC §10).
    controls: Controls = field(default_factory=Controls)

    @property
    def last_seq(self) -> int:
        return self.records[-1].seq if self.records else 0

    @property
    def halt(self) -> Control | None:
        """The cancel or pause in force (who, when, why), if any."""
        return self.controls.cancelled or self.controls.paused

    @property
    def stopping(self) -> str:
        """``cancel`` or ``pause`` while the running attempt winds down after one; ""."""
        halt = self.halt if self.status == RunStatus.RUNNING else None
        return "" if halt is None else halt.name

    @property
    def needs_human(self) -> bool:
        return self.status in NEEDS_HUMAN

    @property
    def waiting_on(self) -> str:
        """One line: what the run waits on (a pending call, the indeterminate step, the error)."""
        if self.status == RunStatus.CORRUPT or self.status == RunStatus.FAILED:
            return self.error
        if self.status == RunStatus.INDETERMINATE and self.indeterminate is not None:
            return f"reconcile {self.indeterminate.name}"
        if self.status == RunStatus.AWAITING_APPROVAL:
            return approval_text(self.pending, self.controls)
        if self.status == RunStatus.MOVED:
            return f"moved to {self.moved_to}"
        if self.status in (RunStatus.CANCELLED, RunStatus.PAUSED) and self.halt is not None:
            return self.halt.says()
        if (
            self.status in (RunStatus.OVER_BUDGET, RunStatus.INCOMPATIBLE)
            and self.outcome is not None
        ):
            return self.outcome.error
        if self.stopping and self.halt is not None:
            return f"stopping: {self.halt.says()}"
        return ""


def view_run(
    records: Sequence[Record],
    *,
    outcome: Outcome | None = None,
    leased: bool = False,
    run_id: str = "",
) -> RunView:
    """Fold a run's records (and its last outcome and lease) into a RunView. No I/O."""
    index = StepIndex(records)
    status_fold = Fold()  # the status, as the stores' summaries compute it
    steps: dict[str, dict[str, Any]] = {}
    calls = {step: c.call for step, c in requested_calls(records).items()}
    signals: list[Record] = []
    completed: Message | None = None
    run_input: tuple[Message, ...] = ()
    for r in records:
        status_fold.add(r)
        t = r.type
        if t == STEP_STARTED:
            s = steps.get(r.step)
            if s is None:
                s = steps[r.step] = {
                    "name": r.step,
                    "kind": r.kind,
                    "started_at": r.at,
                    "attempts": 0,
                }
            s["attempts"] += 1
        elif t == STEP_COMPLETED:
            s = steps.setdefault(r.step, {"name": r.step, "kind": r.kind, "attempts": 0})
            if "completed_at" not in s:
                s["completed_at"] = r.at
                s["result"] = r.data
                if r.kind == "model":
                    s["usage"], s["model"] = _usage(r.data)
        elif t == SIGNAL:
            signals.append(r)
        elif t == RUN_COMPLETED:
            completed = _message(r.data.get("message"))
        elif t == RUN_STARTED:
            given = r.data.get("input")
            run_input = (
                tuple(m for m in map(_message, given) if m) if isinstance(given, list) else ()
            )

    step_views = tuple(
        StepView(
            name=n,
            kind=s["kind"],
            write=index.write_class(n),
            idempotent=index.is_idempotent(n),
            hint=_hint(index.started.get(n)),
            classified_by=_started_text(index.started.get(n), "classified_by"),
            started=n in index.started,
            completed="completed_at" in s,
            result=s.get("result"),
            started_at=s.get("started_at"),
            completed_at=s.get("completed_at"),
            attempts=s["attempts"],
            call=calls.get(n),
            usage=s.get("usage"),
            model=s.get("model"),
        )
        for n, s in steps.items()
    )
    used = [v.usage for v in step_views if v.usage is not None]
    status = status_fold.status(outcome, leased)
    stuck_name = status_fold.indeterminate
    stuck = next((v for v in step_views if v.name == stuck_name), None)
    pending = tuple(status_fold.pending(outcome))
    error = outcome.error if status == RunStatus.FAILED and outcome is not None else ""
    if status == RunStatus.CORRUPT:  # an unfinished fork (see lineage.py)
        error = status_fold.unfinished_fork(run_id) or ""
    return RunView(
        run_id=run_id,
        status=status,
        records=tuple(records),
        steps=step_views,
        pending=pending,
        indeterminate=stuck,
        answer=completed,
        input=run_input,
        model_calls=status_fold.model_calls,
        started_at=records[0].at if records else None,
        last_activity=status_fold.last_at,
        moved_to=status_fold.moved_to,
        controls=status_fold.controls,
        error=error,
        outcome=outcome,
        leased=leased,
        signals=tuple(signals),
        forked_from=status_fold.origin,
        tokens=sum(used, Tokens()) if used else None,
    )


def view_store(store: Store, run_id: str) -> RunView:
    """Load and fold one run. A journal that does not load gives status ``corrupt`` with the
    message in ``.error`` (the line in ``.error_line``, what is wrong in ``.error_reason``); it
    never raises for a bad journal. A store that cannot be reached raises
    StoreUnavailableError (with the reason): the server did not answer, which says nothing
    about the journal. A bad run id still raises InvalidRunIdError: that is the caller's
    mistake, not the journal's."""
    check_run_id(run_id)
    try:
        records = store.load(run_id)
    except StoreUnavailableError:
        raise
    except DurableAgentError as e:
        return RunView(
            run_id=run_id,
            status=RunStatus.CORRUPT,
            error=str(e),
            error_line=getattr(e, "line", 0),
            error_reason=getattr(e, "reason", ""),
        )
    view = view_run(
        records,
        outcome=store.last_outcome(run_id),
        leased=store.is_leased(run_id),
        run_id=run_id,
    )
    if view.indeterminate is not None and not store.leases_die_with_holder:
        step, ttl = view.indeterminate.name, store.lease_ttl
        try:
            workers = store.workers()
        except DurableAgentError:
            workers = []  # who is alive is unknown: the note errs on the side of warning
        note = late_write_note(records, store.attempts(run_id), step, ttl, workers=workers)
        if note:
            view = replace(view, late_write=note)
    return view


def _message(d: Any) -> Message | None:
    try:
        return Message.from_dict(d)
    except (ValueError, TypeError, KeyError):
        return None


def _hint(started: Record | None) -> str:
    return _started_text(started, "hint")


def _started_text(started: Record | None, key: str) -> str:
    """A text member of a step.started record's data (journal text: anything else is "")."""
    data = started.data if started is not None else None
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, str) else ""


def _usage(data: Any) -> tuple[Tokens | None, str | None]:
    """A recorded reply's usage and model (journal text: anything odd reads as none)."""
    msg = _message(data)
    if msg is None:
        return None, None
    u = msg.usage or {}
    tokens = Tokens(u.get("input_tokens", 0), u.get("output_tokens", 0)) if u else None
    return tokens, msg.model
