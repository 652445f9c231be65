"""Signals: a human's decisions and controls, appended to a run's journal under its lock.

Every signal goes through :func:`signal`: its payload is checked first, then, under the
journal's lock, against the records as they are (a completed, cancelled or moved run takes
none; a marker must name a call the model asked for; a resume needs a pause; ...). Anything
wrong raises and writes nothing. Each name's checks are one entry of ``_SIGNALS``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .budget import LIMITS, check_change
from .calls import marker_for, marker_step, requested_call
from .control import DEADLINE, Control
from .errors import RunChangedError, RunNotFoundError, SignalError
from .ids import check_run_id
from .lineage import unfinished_fork
from .record import RUN_COMPLETED, SIGNAL, Record, signal_fields
from .step_index import Reconcile, StepIndex
from .stores import Store

_PAST = {"approve": "approved", "deny": "denied"}


@dataclass(frozen=True)
class _Kind:
    """How one signal is checked: ``prepare`` (run id, payload) → (step, payload) before the
    lock; ``check`` (run id, step, payload, records, index) under it. ``needs_reason``: a
    human must say why (a control that stops or bounds a run)."""

    prepare: Callable[[str, Any], tuple[str, dict[str, Any]]]
    check: Callable[[str, str, dict[str, Any], list[Record], StepIndex], None]
    needs_reason: bool = False


def signal(
    store: Store,
    run_id: str,
    name: str,
    payload: Any,
    *,
    by: str | None = None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """Append a human's decision to the run's journal, validated under the journal's lock.

    ``approve``/``deny`` take ``{"marker": m}``; ``reconcile`` takes a Reconcile (or its dict);
    ``cancel``, ``pause`` and ``resume`` take ``{}``; ``budget`` takes ``{"add": {...}}`` or
    ``{"set": {...}}`` (keys as in Budget); ``move`` takes ``{"to": store}``; ``retry``
    takes ``{}``. ``cancel``,
    ``pause`` and ``budget`` need a ``reason``. ``expect_seq`` pins the decision to the
    journal the human looked at: if its last seq is another, RunChangedError. Anything wrong
    raises (RunNotFoundError, SignalError) and writes nothing."""
    check_run_id(run_id)
    kind = _SIGNALS.get(name)
    if kind is None:
        raise SignalError(run_id, f"unknown signal {name!r}; use one of {', '.join(SIGNALS)}")
    if isinstance(payload, Reconcile):
        payload = payload.to_dict()
    if by is not None and not isinstance(by, str):
        raise SignalError(run_id, "by must be a string")
    if by is not None and not by.strip():
        raise SignalError(run_id, "by must name someone: a decision by nobody is refused")
    if reason is not None and not isinstance(reason, str):
        raise SignalError(run_id, "reason must be a string")
    if kind.needs_reason and not (reason or "").strip():
        raise SignalError(
            run_id, f"{name} needs a reason (--reason): the journal keeps why, for whoever looks"
        )
    step, payload = kind.prepare(run_id, payload)

    def check(records: list[Record]) -> None:
        if not records:
            raise RunNotFoundError(run_id)
        if any(r.type == RUN_COMPLETED for r in records):
            raise SignalError(run_id, f"run {run_id!r} is completed; a signal cannot change it")
        index = StepIndex(records)
        controls = index.controls
        if controls.moved is not None:
            raise SignalError(
                run_id, f"run {run_id!r} {_moved_text(controls.moved)}; decide on it there"
            )
        if controls.cancelled is not None and not (name == "reconcile" and step in index.started):
            # A cancelled run takes nothing but the record of what an open write really did.
            raise SignalError(
                run_id,
                f"run {run_id!r} was {controls.cancelled.says()}; it takes no {name} "
                "(only a reconcile of a write left open)",
            )
        gap = unfinished_fork(records, run_id)
        if gap is not None:
            raise SignalError(run_id, f"run {run_id!r} is {gap}; decide on it after that")
        if expect_seq is not None and records[-1].seq != expect_seq:
            raise RunChangedError(run_id, expect_seq, records[-1].seq)
        kind.check(run_id, step, payload, records, index)
        if name == "deny" and by == DEADLINE:
            _check_lapse(run_id, step, payload["marker"], records)

    data = {"name": name, "payload": payload, "by": by, "reason": reason}
    stored: Record = store.append(run_id, Record.make(SIGNAL, step, "", data), check=check)
    return stored


def accept_change(
    store: Store,
    run_id: str,
    *,
    by: str | None = None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """Accept a deploy's change for an ``incompatible`` run: an ``accept-change`` signal naming
    the calls its last attempt could not take over, and the version that found them. Each
    of those calls is then answered with an error naming the change (never run with the
    arguments a human saw or approved), and the model, under the new code, asks again with
    the arguments the tool takes now: a gated tool's new call waits for a new approval. A
    run that is not incompatible is refused."""
    check_run_id(run_id)
    last = store.last_outcome(run_id)
    if last is None or last.status != "incompatible" or not last.blocked:
        if not store.load(run_id):
            raise RunNotFoundError(run_id)
        raise SignalError(
            run_id,
            f"run {run_id!r} is not incompatible with a new version; there is no change to "
            "accept (agentrun deploy-check says which runs are)",
        )
    payload: dict[str, Any] = {"version": last.version, "calls": list(last.blocked)}
    if last.fingerprint:
        payload["fingerprint"] = last.fingerprint
    return signal(
        store,
        run_id,
        "accept-change",
        payload,
        by=by,
        reason=reason,
        expect_seq=last.seq if expect_seq is None else expect_seq,
    )


# -- decisions on calls --------------------------------------------------------------------


def _decision(run_id: str, payload: Any, name: str) -> tuple[str, dict[str, Any]]:
    marker = payload.get("marker") if isinstance(payload, dict) else None
    if not isinstance(marker, str) or "#" not in marker:
        raise SignalError(
            run_id,
            f"{name} needs a payload {{'marker': 'tool/T/I/NAME#DIGEST'}}; "
            f"copy the marker from 'agentrun show {run_id}'",
        )
    return marker_step(marker), {"marker": marker}


def _check_decision(
    name: str,
    run_id: str,
    step: str,
    payload: dict[str, Any],
    records: list[Record],
    index: StepIndex,
) -> None:
    marker = payload["marker"]
    call = requested_call(records, step)
    if call is None or marker_for(step, call.arguments) != marker:
        raise SignalError(
            run_id,
            f"run {run_id!r} has no tool call with marker {marker!r}: a marker names one call "
            f"a model step requested, with those exact arguments (see 'agentrun show {run_id}')",
        )
    if step in index.completed:
        raise SignalError(run_id, f"tool call {step!r} already has a result; nothing to {name}")
    if step in index.started:
        started = index.started[step]
        when = time.strftime("%H:%M:%S", time.localtime(started.at))
        approver = next(
            (
                signal_fields(r)[2] or "a human"
                for r in records
                if r.type == SIGNAL
                and signal_fields(r)[0] == "approve"
                and signal_fields(r)[1].get("marker") == marker
            ),
            None,
        )
        how = f" as approved by {approver}" if approver else ""
        raise SignalError(
            run_id,
            f"too late to {name}: tool call {step!r} started at {when}{how} (seq "
            f"{started.seq}); nothing was written. If it never finished, reconcile it instead",
        )
    for r in records:
        if r.type != SIGNAL:
            continue
        earlier, p, by, _ = signal_fields(r)
        # A deny may still overrule an approval (until the call starts); nothing else may
        # overrule a decision.
        if p.get("marker") == marker and earlier in (name, "deny"):
            raise SignalError(
                run_id,
                f"tool call {step!r} was already {_PAST[earlier]}"
                + (f" by {by}" if by else "")
                + "; nothing to change",
            )


def _check_lapse(run_id: str, step: str, marker: str, records: list[Record]) -> None:
    """A deadline's deny comes only where nobody decided: an approval that came first stands
    (a deny by a human may overrule an approval; the clock may not)."""
    for r in records:
        if r.type == SIGNAL:
            earlier, p, by, _ = signal_fields(r)
            if earlier == "approve" and p.get("marker") == marker:
                raise SignalError(
                    run_id,
                    f"tool call {step!r} was approved"
                    + (f" by {by}" if by else "")
                    + " before its deadline; it stands",
                )


def _approve(run_id: str, payload: Any) -> tuple[str, dict[str, Any]]:
    return _decision(run_id, payload, "approve")


def _deny(run_id: str, payload: Any) -> tuple[str, dict[str, Any]]:
    return _decision(run_id, payload, "deny")


def _check_approve(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    _check_decision("approve", run_id, step, payload, records, index)


def _check_deny(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    _check_decision("deny", run_id, step, payload, records, index)


# -- reconcile -------------------------------------------------------------------------------


def _reconcile(run_id: str, payload: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(payload, dict) or not isinstance(payload.get("step"), str):
        raise SignalError(run_id, "reconcile needs a payload {'step', 'outcome', 'result'}")
    outcome = payload.get("outcome")
    if outcome not in ("done", "retry"):
        raise SignalError(run_id, f"reconcile outcome must be 'done' or 'retry', not {outcome!r}")
    result = payload.get("result")
    if outcome == "done" and (not isinstance(result, str) or not result.strip()):
        raise SignalError(
            run_id, "reconcile done needs the result you found (e.g. the ticket id) as text"
        )
    step: str = payload["step"]
    return step, {"step": step, "outcome": outcome, "result": result}


def _check_reconcile(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    if step not in index.started:
        raise SignalError(
            run_id,
            f"step {step!r} of run {run_id!r} never started: only a write that started and "
            "never recorded a result can be reconciled",
        )
    if step in index.completed:
        raise SignalError(run_id, f"step {step!r} already has a result; nothing to reconcile")
    if not index.is_write(step):
        raise SignalError(
            run_id, f"step {step!r} is a read: it is re-run on the next attempt, no human needed"
        )
    prior = index.reconcile_for(step)
    if prior is not None:
        raise SignalError(
            run_id,
            f"step {step!r} was already reconciled ({prior.outcome}); "
            "wait for the run to resume before deciding again",
        )
    cancelled = index.controls.cancelled
    if cancelled is not None and payload["outcome"] == "retry":
        raise SignalError(
            run_id,
            f"run {run_id!r} was {cancelled.says()}: nothing will run {step} again; "
            "reconcile it --done with what you found",
        )


# -- a deploy's change ----------------------------------------------------------------------


def _accept_change(run_id: str, payload: Any) -> tuple[str, dict[str, Any]]:
    calls = payload.get("calls") if isinstance(payload, dict) else None
    version = payload.get("version") if isinstance(payload, dict) else None
    if (
        not isinstance(calls, list)
        or not calls
        or not all(isinstance(c, dict) and isinstance(c.get("marker"), str) for c in calls)
        or not isinstance(version, str)
    ):
        raise SignalError(
            run_id,
            "accept-change needs a payload {'version', 'calls': [{'step', 'marker', 'tool', "
            f"'reason'}}, ...]}}: use 'agentrun accept-change {run_id}', which reads them from "
            "the attempt that found the run incompatible",
        )
    kept = [{k: c.get(k) for k in ("step", "marker", "tool", "reason")} for c in calls]
    fingerprint = payload.get("fingerprint")
    out: dict[str, Any] = {"version": version, "calls": kept}
    if isinstance(fingerprint, dict):
        out["fingerprint"] = fingerprint
    return "", out


def _check_accept_change(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    # Each call must still be the one the model asked for, with those arguments, and have no
    # result: the change is accepted for exactly the calls the human saw.
    for c in payload["calls"]:
        marker = c["marker"]
        at = marker_step(marker)
        call = requested_call(records, at)
        if call is None or marker_for(at, call.arguments) != marker:
            raise SignalError(
                run_id, f"run {run_id!r} has no tool call with marker {marker!r} to accept"
            )
        if at in index.completed:
            raise SignalError(run_id, f"tool call {at!r} already has a result; nothing to accept")


# -- controls --------------------------------------------------------------------------------


def _nothing(run_id: str, payload: Any) -> tuple[str, dict[str, Any]]:
    if payload not in (None, {}):
        raise SignalError(run_id, f"this signal takes no payload, not {payload!r}")
    return "", {}


def _check_cancel(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    pass  # any run that is not completed, cancelled or moved may be cancelled


def _check_pause(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    paused = index.controls.paused
    if paused is not None:
        raise SignalError(run_id, f"run {run_id!r} is already {paused.says()}")


def _check_resume(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    if index.controls.paused is None:
        raise SignalError(run_id, f"run {run_id!r} is not paused; there is nothing to resume")


def _check_retry(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    pass  # the record itself is the retry: any signal makes the workers count afresh


def _budget(run_id: str, payload: Any) -> tuple[str, dict[str, Any]]:
    hows = [h for h in ("add", "set") if isinstance(payload, dict) and h in payload]
    if not isinstance(payload, dict) or len(hows) != 1 or len(payload) != 1:
        raise SignalError(
            run_id, "budget needs a payload {'add': {...}} or {'set': {...}} (one of them)"
        )
    how = hows[0]
    limits = payload[how]
    if not isinstance(limits, dict):
        raise SignalError(run_id, f"budget {how} takes limits by name ({', '.join(LIMITS)})")
    return "", {how: dict(limits)}


def _check_budget(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    how, limits = next(iter(payload.items()))
    why = check_change(index.controls.budget, how, limits)
    if why is not None:
        raise SignalError(run_id, f"run {run_id!r}: {why}")


def _move(run_id: str, payload: Any) -> tuple[str, dict[str, Any]]:
    to = payload.get("to") if isinstance(payload, dict) else None
    if not isinstance(to, str) or not to.strip():
        raise SignalError(run_id, "move needs a payload {'to': 'the destination store'}")
    return "", {"to": to.strip()}


def _check_move(
    run_id: str, step: str, payload: dict[str, Any], records: list[Record], index: StepIndex
) -> None:
    pass  # any run not completed, cancelled or moved may move


def _moved_text(c: Control) -> str:
    """``was moved to DEST by WHO at HH:MM:SS: why``."""
    return f"was {c.says()}"


_SIGNALS: dict[str, _Kind] = {
    "approve": _Kind(_approve, _check_approve),
    "deny": _Kind(_deny, _check_deny),
    "reconcile": _Kind(_reconcile, _check_reconcile),
    "cancel": _Kind(_nothing, _check_cancel, needs_reason=True),
    "pause": _Kind(_nothing, _check_pause, needs_reason=True),
    "resume": _Kind(_nothing, _check_resume),
    "budget": _Kind(_budget, _check_budget, needs_reason=True),
    "move": _Kind(_move, _check_move),
    # A human's "try again" (agentrun retry): its record makes the workers' failure count
    # stale (worker/retry.py, Attempts.stale), so a failed run is retried.
    "retry": _Kind(_nothing, _check_retry),
    # A human accepts a deploy's change for the calls an incompatible attempt named: each is
    # answered as changed (never run) and the run goes on with the new code (deploys.py).
    "accept-change": _Kind(_accept_change, _check_accept_change, needs_reason=True),
}
SIGNALS = tuple(_SIGNALS)
