"""Writing a human's decision: re-check the pinned run, then the action's one function in
durableagent.actions (the command line's too); and a failed run's retry. Everything here
blocks: call it from a thread worker, never on the event loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from durableagent import (
    RunChangedError,
    RunStatus,
    RunView,
    Store,
    actions,
    view_store,
)


@dataclass(frozen=True)
class Pin:
    """The run state a dialog was opened on: it acts only if the run is still like this."""

    run_id: str
    last_seq: int
    status: RunStatus

    @classmethod
    def of(cls, view: RunView) -> Pin:
        """Pin the run as ``view`` shows it."""
        return cls(view.run_id, view.last_seq, view.status)


@dataclass(frozen=True)
class Decision:
    """One or more signals a dialog wants written, with the human's name and reason."""

    signals: tuple[tuple[str, Any], ...]
    by: str
    reason: str | None = None
    done: str = ""  # what the toast says when it worked


class ChangedUnderneath(Exception):
    """The run moved on while the dialog was open; nothing was written."""


def write_decision(store: Store, pin: Pin, decision: Decision) -> str:
    """Reload the run; if its last seq or status moved since ``pin``, raise ChangedUnderneath
    and write nothing; otherwise write each signal. Signal refusals propagate (SignalError)."""
    now = view_store(store, pin.run_id)
    if now.last_seq != pin.last_seq or now.status != pin.status:
        raise _changed(pin, f"it is now {now.status} at seq {now.last_seq}")
    # The seq pin is checked again under the journal's lock, so nothing can slip in between.
    for i, (name, payload) in enumerate(decision.signals):
        try:
            actions.act(
                store,
                pin.run_id,
                name,
                payload,
                by=decision.by,
                reason=decision.reason,
                expect_seq=pin.last_seq + i,
            )
        except RunChangedError as e:
            raise _changed(pin, f"it is now at seq {e.actual}", written=i) from None
    return decision.done


@dataclass(frozen=True)
class Failures:
    """What the workers have recorded about a failed run: how many attempts failed since a
    human last acted, when the last one did and with what. ``stale``: a signal came after the
    count was made, so workers count afresh."""

    failures: int
    at: float
    error: str
    stale: bool = False
    retry_after: float | None = None  # what the last failure asked workers to wait, seconds


def failure_state(store: Store, view: RunView) -> Failures | None:
    """The workers' failure count for ``view``'s run (kept in the store, read as the worker
    reads it), or None when none is readable."""
    from durableagent.worker import read_attempts

    attempts = read_attempts(store, view.run_id)
    if attempts is None:
        return None
    stale = attempts.stale(len(view.signals))  # the workers' own rule
    return Failures(attempts.failures, attempts.at, attempts.error, stale, attempts.retry_after)


def retry_failed(store: Store, pin: Pin) -> str:
    """``agentrun retry``: give a failed run a fresh budget of worker attempts, if it is still
    failed as pinned. The one place the TUI resets attempts."""
    from durableagent.people import login_name

    now = view_store(store, pin.run_id)
    if now.last_seq != pin.last_seq or now.status != pin.status:
        raise _changed(pin, f"it is now {now.status} at seq {now.last_seq}")
    # The journal's record of who asked (pinned to the seq the human saw), then the count.
    actions.retry(store, pin.run_id, by=login_name(), expect_seq=pin.last_seq, status=now.status)
    return f"{pin.run_id} will be retried by the next worker that looks (within a second)"


def write_control(store: Store, run_id: str, name: str, by: str, reason: str | None) -> str:
    """``agentrun cancel``, ``pause`` or ``resume``: one signal, validated under the journal's
    lock like every other (a cancel of a finished run, a resume of a run not paused: refused,
    SignalError). Not pinned to a seq: a running run moves on while the dialog is open, and a
    control applies to the run as it is when it lands."""
    actions.act(store, run_id, name, {}, by=by, reason=reason)
    return {
        "cancel": f"cancelled {run_id}: no step of it starts again",
        "pause": f"paused {run_id}: P resumes it",
        "resume": f"resumed {run_id}: a worker picks it up",
    }[name]


def write_budget(store: Store, run_id: str, limits: dict[str, Any], by: str, reason: str) -> str:
    """``agentrun budget RUN --add LIMITS --reason``: one ``budget`` signal, checked under the
    journal's lock (a limit the run does not have cannot be raised: SignalError)."""
    actions.budget(store, run_id, "add", limits, by=by, reason=reason)
    now = view_store(store, run_id)
    go = "; a worker picks it up" if now.status == RunStatus.READY else ""
    return f"budget of {run_id} is now {now.controls.budget.describe()}{go}"


def _changed(pin: Pin, now: str, written: int = 0) -> ChangedUnderneath:
    wrote = f"{written} decision(s) were" if written else "Nothing was"
    return ChangedUnderneath(
        f"Run {pin.run_id} changed underneath: it was {pin.status} at seq {pin.last_seq}, "
        f"{now}. {wrote} written; close this dialog and look again."
    )
