"""Every human action on a run, written once: approve, deny, reconcile, retry, cancel, pause,
resume, budget, fork and accept-change.

The command line (one run, or many with ``--where``: durableagent.bulk) and the TUI (one run
in a dialog, or the marked rows) all call these, so an action records the same thing (its
signal, with ``by`` and ``reason``) whichever way a human took it, and ``agentrun audit`` shows
it. Each validates its input once and writes through :func:`durableagent.signals.signal`,
which loads the journal once and checks the signal under the journal's lock; anything wrong
raises (SignalError, RunNotFoundError, ...) and writes nothing. ``expect_seq`` pins a
decision to the journal the human looked at (RunChangedError when it moved on).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .budget import Budget
from .errors import RunNotFoundError, SignalError
from .fold import RunStatus
from .fork import KEEP, ForkPlan, plan_fork, write_fork
from .ids import check_run_id
from .record import Record
from .signals import accept_change as _accept_change
from .signals import signal
from .step_index import Reconcile
from .stores import Store


def approve(
    store: Store,
    run_id: str,
    marker: str,
    *,
    by: str | None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """Approve the pending call ``marker`` names: the next attempt runs it."""
    return signal(
        store, run_id, "approve", {"marker": marker}, by=by, reason=reason, expect_seq=expect_seq
    )


def deny(
    store: Store,
    run_id: str,
    marker: str,
    *,
    by: str | None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """Deny the pending call ``marker`` names: the model reads ``reason`` as the refusal."""
    return signal(
        store, run_id, "deny", {"marker": marker}, by=by, reason=reason, expect_seq=expect_seq
    )


def reconcile(
    store: Store,
    run_id: str,
    decision: Reconcile | Mapping[str, Any],
    *,
    by: str | None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """Settle an open write: it happened (``done`` with its result) or run it again
    (``retry``)."""
    payload = decision if isinstance(decision, Reconcile) else dict(decision)
    return signal(store, run_id, "reconcile", payload, by=by, reason=reason, expect_seq=expect_seq)


def retry(
    store: Store,
    run_id: str,
    *,
    by: str | None,
    reason: str | None = None,
    expect_seq: int | None = None,
    status: RunStatus | None = None,
) -> Record:
    """Give a failed run a fresh count of worker attempts: a ``retry`` signal (the journal's
    record of who asked and why; it alone makes the workers' count stale), then the count
    cleared. Refused unless the run is failed: ``status`` as the caller just listed it (a
    bulk plan's), else the store's summary of it now."""
    from .worker import reset_attempts

    check_run_id(run_id)
    if status is None:
        summary = store.summary(run_id)
        if summary is None:
            raise RunNotFoundError(run_id)
        status = summary.status
    if status != RunStatus.FAILED:
        raise SignalError(run_id, f"run {run_id} is {status}, not failed: nothing to retry")
    written = signal(store, run_id, "retry", {}, by=by, reason=reason, expect_seq=expect_seq)
    reset_attempts(store, run_id)
    return written


def cancel(store: Store, run_id: str, *, by: str | None, reason: str | None) -> Record:
    """Cancel a run: no step of it starts again, ever (a reason is required)."""
    return signal(store, run_id, "cancel", {}, by=by, reason=reason)


def pause(store: Store, run_id: str, *, by: str | None, reason: str | None) -> Record:
    """Hold a run: no attempt or step starts until it is resumed (a reason is required)."""
    return signal(store, run_id, "pause", {}, by=by, reason=reason)


def resume(store: Store, run_id: str, *, by: str | None, reason: str | None = None) -> Record:
    """Lift a run's pause."""
    return signal(store, run_id, "resume", {}, by=by, reason=reason)


def accept_change(
    store: Store,
    run_id: str,
    *,
    by: str | None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """Accept a deploy's change for an ``incompatible`` run (durableagent.signals
    .accept_change): its blocked calls are answered with the change, never run, and the model
    asks again under the new code."""
    return _accept_change(store, run_id, by=by, reason=reason, expect_seq=expect_seq)


def budget(
    store: Store,
    run_id: str,
    how: str,
    limits: Mapping[str, Any],
    *,
    by: str | None,
    reason: str | None,
) -> Record:
    """Raise (``how="add"``) or set (``"set"``) a run's limits (a reason is required)."""
    return signal(store, run_id, "budget", {how: dict(limits)}, by=by, reason=reason)


def fork(
    store: Store,
    run_id: str,
    new_run_id: str,
    *,
    at_step: str,
    signals: str = KEEP,
    by: str | None,
    reason: str | None = None,
    new_budget: Budget | None = None,
) -> ForkPlan:
    """Fork ``run_id`` at ``at_step`` as ``new_run_id`` (durableagent.fork) and return what
    was written: the copies, the signals kept and dropped."""
    check_run_id(run_id)
    check_run_id(new_run_id)
    plan = plan_fork(
        store.load(run_id),
        run_id,
        new_run_id,
        at_step=at_step,
        signals=signals,
        by=by,
        reason=reason,
        budget=new_budget,
    )
    write_fork(store, plan)
    return plan


def act(
    store: Store,
    run_id: str,
    name: str,
    payload: Any,
    *,
    by: str | None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """The action ``name`` with its signal's payload (a bulk plan's, a dialog's): the same
    function its own command calls."""
    p = payload if isinstance(payload, dict) else {}
    if name in ("approve", "deny"):
        decide = approve if name == "approve" else deny
        marker = p.get("marker", "")
        return decide(store, run_id, marker, by=by, reason=reason, expect_seq=expect_seq)
    if name == "reconcile":
        decision = payload if isinstance(payload, Reconcile) else p
        return reconcile(store, run_id, decision, by=by, reason=reason, expect_seq=expect_seq)
    if name == "retry":
        return retry(store, run_id, by=by, reason=reason, expect_seq=expect_seq)
    if expect_seq is not None:
        raise ValueError(f"{name} applies to the run as it is when it lands: no expect_seq")
    if name in ("cancel", "pause"):
        return (cancel if name == "cancel" else pause)(store, run_id, by=by, reason=reason)
    if name == "resume":
        return resume(store, run_id, by=by, reason=reason)
    if name == "budget" and isinstance(payload, dict) and len(payload) == 1:
        ((how, limits),) = payload.items()
        return budget(store, run_id, how, limits, by=by, reason=reason)
    raise SignalError(run_id, f"{name!r} is not a human action")


__all__ = [
    "act",
    "approve",
    "budget",
    "cancel",
    "deny",
    "fork",
    "pause",
    "reconcile",
    "resume",
    "retry",
]
