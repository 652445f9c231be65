"""The audit of human oversight: every decision a human recorded in a store (approve, deny,
reconcile, retry, and the controls: cancel, pause, resume, budget, move), who made
it, when, on which call, why, and what became of it.

``decisions(records)`` is a pure fold over one journal; ``audit(store)`` reads the journals
that hold signals (the summaries count them), or one run's. Refused decisions are never
written, so none appears here: what the journal holds is what was decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .calls import marker_step, requested_markers
from .errors import DurableAgentError
from .fold import RunStatus
from .ids import check_run_id
from .lineage import forked_from
from .record import SIGNAL, STEP_COMPLETED, STEP_STARTED, Record, signal_fields
from .steps import step_tool_name
from .stores import Store

# What a decision was.
APPROVED = "approved"
DENIED = "denied"
RECONCILED_DONE = "reconciled_done"
RECONCILED_RETRY = "reconciled_retry"
# The controls (SPEC §10), by the signal's name.
CONTROLS = {
    "cancel": "cancelled",
    "pause": "paused",
    "resume": "resumed",
    "budget": "budget",
    "move": "moved",
}
RETRIED = "retried"  # a failed run given a fresh count of worker attempts (agentrun retry)

# What became of it.
APPLIED = "applied"  # the run acted on it: the call ran, was refused, its result recorded, re-ran
PENDING = "pending"  # not yet: the run has not resumed past it
OVERRIDDEN = "overridden"  # an approval that a later deny of the same call beat
UNKNOWN = "unknown"  # a signal this version does not know (a hand-edited journal)


@dataclass(frozen=True)
class Decision:
    """One human decision: a signal record of ``run_id`` and what became of it.

    ``marker`` binds it to one call with exact arguments (for a reconcile, the marker of the
    write's call when the journal has it); ``copied_from`` names the run it was made in when
    this run is a fork that carried it over."""

    run_id: str
    seq: int
    at: float
    by: str | None
    decision: str
    step: str
    tool: str | None
    marker: str | None
    reason: str | None
    result: str | None
    effect: str
    note: str
    copied_from: str | None = None

    @property
    def digest(self) -> str | None:
        """The arguments' digest (the marker after its ``#``)."""
        return self.marker.rpartition("#")[2] if self.marker else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "by": self.by,
            "run_id": self.run_id,
            "seq": self.seq,
            "step": self.step,
            "tool": self.tool,
            "marker": self.marker,
            "digest": self.digest,
            "decision": self.decision,
            "effect": self.effect,
            "note": self.note,
            "reason": self.reason,
            "result": self.result,
            "copied_from": self.copied_from,
        }


@dataclass(frozen=True)
class Audit:
    """The decisions found, oldest first, and the runs whose journal could not be read
    (``(run, why)``: the audit is incomplete without them)."""

    decisions: tuple[Decision, ...]
    unreadable: tuple[tuple[str, str], ...] = ()


def decisions(records: Sequence[Record], run_id: str = "") -> list[Decision]:
    """Every human decision in one journal, in journal order, with what became of it."""
    starts: dict[str, list[int]] = {}
    results: dict[str, list[int]] = {}
    denies: dict[str, Record] = {}
    for r in records:
        if r.type == STEP_STARTED:
            starts.setdefault(r.step, []).append(r.seq)
        elif r.type == STEP_COMPLETED:
            results.setdefault(r.step, []).append(r.seq)
        elif r.type == SIGNAL:
            name, payload, _, _ = signal_fields(r)
            marker = payload.get("marker")
            if name == "deny" and isinstance(marker, str):
                denies.setdefault(marker, r)
    markers = requested_markers(records)
    origin = forked_from(records[0]) if records else None
    copied = range(records[0].seq + 1, records[0].seq + 1 + origin.copied) if origin else range(0)

    def after(seqs: dict[str, list[int]], step: str, seq: int) -> int | None:
        return next((s for s in seqs.get(step, ()) if s > seq), None)

    out = []
    for r in records:
        if r.type != SIGNAL:
            continue
        name, payload, by, reason = signal_fields(r)
        step = r.step
        marker = payload.get("marker") if name in ("approve", "deny") else markers.get(step)
        marker = marker if isinstance(marker, str) else None
        if name in ("approve", "deny") and marker is not None:
            step = marker_step(marker)
        result = None
        if name == "approve":
            decision = APPROVED
            deny = denies.get(marker) if marker else None
            ran = after(starts, step, r.seq)
            if deny is not None:
                who = signal_fields(deny)[2] or "a human"
                effect, note = OVERRIDDEN, f"denied by {who} (seq {deny.seq}); the deny wins"
            elif ran is not None:
                effect, note = APPLIED, f"the call ran (seq {ran})"
            else:
                effect, note = PENDING, "the call has not run yet"
        elif name == "deny":
            decision = DENIED
            ran = after(starts, step, r.seq)
            if ran is not None:
                effect, note = APPLIED, f"the call was refused; the model read why (seq {ran})"
            else:
                effect, note = PENDING, "the run has not reached the call since"
        elif name == "reconcile" and payload.get("outcome") == "done":
            decision = RECONCILED_DONE
            value = payload.get("result")
            result = value if isinstance(value, str) else None
            done = after(results, step, r.seq)
            if done is not None:
                effect, note = APPLIED, f"recorded as the write's result (seq {done})"
            else:
                effect, note = PENDING, "recorded as the result when the run resumes"
        elif name == "reconcile" and payload.get("outcome") == "retry":
            decision = RECONCILED_RETRY
            again = after(starts, step, r.seq)
            if again is not None:
                effect, note = APPLIED, f"the write ran again (seq {again})"
            else:
                effect, note = PENDING, "the write runs again when the run resumes"
        elif name in CONTROLS:
            decision = CONTROLS[name]
            effect, note = APPLIED, _control_note(name, payload, r.seq, records)
        elif name == "retry":
            decision = RETRIED
            again = next((s for ss in starts.values() for s in ss if s > r.seq), None)
            if again is not None:
                effect, note = APPLIED, f"a worker tried the run again (seq {again})"
            else:
                effect, note = PENDING, "the next worker that looks tries the run again"
        else:
            decision, effect, note = name or "?", UNKNOWN, "not a signal this version knows"
        out.append(
            Decision(
                run_id=run_id,
                seq=r.seq,
                at=r.at,
                by=by,
                decision=decision,
                step=step,
                tool=step_tool_name(step),
                marker=marker,
                reason=reason,
                result=result,
                effect=effect,
                note=note,
                copied_from=origin.run if origin and r.seq in copied else None,
            )
        )
    return out


def _control_note(name: str, payload: dict[str, Any], seq: int, records: Sequence[Record]) -> str:
    """What a control did, in words, with the seq that shows it."""
    later = [r for r in records if r.seq > seq]
    if name == "cancel":
        return "the run is cancelled: no step starts after it"
    if name == "pause":
        resume = next(
            (r for r in later if r.type == SIGNAL and signal_fields(r)[0] == "resume"), None
        )
        if resume is None:
            return "in force: no attempt starts until it is resumed"
        return f"lifted by a resume (seq {resume.seq})"
    if name == "resume":
        return "the pause is lifted: workers run it again"
    if name == "budget":
        how = next(iter(payload), "")
        limits = payload.get(how)
        said = ", ".join(f"{k}={v}" for k, v in limits.items()) if isinstance(limits, dict) else ""
        return f"limits {'raised by' if how == 'add' else 'set to'} {said}"
    return f"moved to {payload.get('to')}: that store runs it now"


def audit(
    store: Store,
    *,
    run_id: str | None = None,
    since: float | None = None,
    by: str | None = None,
) -> Audit:
    """Every human decision in ``store`` (or in run ``run_id`` only), oldest first; ``since``
    (epoch seconds) and ``by`` narrow it. Reads only the journals that hold signals (the
    store's summaries count them), or only ``run_id``'s. A journal that does not load is
    named in ``unreadable``, not raised."""
    if run_id is not None:
        ids = [check_run_id(run_id)]
    else:
        ids = [s.run_id for s in store.summaries() if s.signals or s.status == RunStatus.CORRUPT]
    found: list[Decision] = []
    unreadable: list[tuple[str, str]] = []
    for rid in ids:
        try:
            records = store.load(rid)
        except DurableAgentError as e:
            unreadable.append((rid, str(e)))
            continue
        for d in decisions(records, rid):
            if (since is None or d.at >= since) and (by is None or d.by == by):
                found.append(d)
    found.sort(key=lambda d: (d.at, d.run_id, d.seq))
    return Audit(tuple(found), tuple(unreadable))
