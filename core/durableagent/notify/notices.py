"""What a notice says and when one is due: a pure function of a run's summary, the time, and
what the store says of its workers and failure count. No I/O.

A notice names the run, what it waits on (the call and its arguments, the open write, the
error), how long it has waited, and the exact command that acts, plus a link when given."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

from .. import hints
from ..budget import overdue, stopped_at
from ..durations import format_duration
from ..fold import RunStatus, Summary

APPROVAL = "approval"
INDETERMINATE = "indeterminate"
FAILED = "failed"
OVER_BUDGET = "over_budget"
CORRUPT = "corrupt"
DEADLINE = "deadline"
STALLED = "stalled"
KINDS = (APPROVAL, INDETERMINATE, FAILED, OVER_BUDGET, CORRUPT, DEADLINE, STALLED)
STALLED_AFTER = 120.0  # ready runs and no live worker this long: stalled
DEADLINE_WARNING = 0.1  # an approval lapsing within this share of its window: warned


def parse_kinds(text: str | None) -> frozenset[str]:
    """``--on approval,failed`` → those kinds (None or ``all``: every kind); ValueError
    naming an unknown one."""
    if text is None or text.strip() in ("", "all"):
        return frozenset(KINDS)
    kinds = {k.strip() for k in text.split(",") if k.strip()}
    unknown = sorted(kinds - set(KINDS))
    if unknown:
        raise ValueError(f"unknown kind {unknown[0]!r}; use some of: {', '.join(KINDS)} (or all)")
    return frozenset(kinds)


@dataclass(frozen=True)
class Notice:
    """One notice: of ``kind``, for the transition at ``seq`` of ``run_id``; ``since``: when
    the wait began. ``escalated``: sent to the escalation targets."""

    run_id: str
    seq: int
    kind: str
    title: str
    waits_on: str
    since: float | None
    commands: tuple[str, ...]
    escalated: bool = False
    subject: str = ""  # the pending call's marker: one notice per call that waits

    @property
    def claimed_as(self) -> str:
        """The kind the store records the notice under: the kind, and for a notice about
        one of a run's calls a digest of its marker (two calls waiting after one model
        turn share the run, seq and kind, and each has its own notice)."""
        if not self.subject:
            return self.kind
        return f"{self.kind}-{hashlib.sha256(self.subject.encode()).hexdigest()[:12]}"

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.run_id, self.seq, self.claimed_as)

    def body(self, now: float, link: str | None = None) -> str:
        """The notice's text, as a human reads it in Slack, a mail or a phone's banner."""
        lines = [self.waits_on]
        if self.since is not None:
            lines.append(f"waiting {format_duration(now - self.since)}")
        if self.escalated:
            lines.append("no human has decided since the first notice: escalated")
        lines += [f"act: {c}" for c in self.commands[:1]]
        lines += [f" or: {c}" for c in self.commands[1:]]
        if link:
            lines.append(f"see: {link}")
        return "\n".join(lines)

    def as_escalation(self) -> Notice:
        return Notice(
            self.run_id,
            self.seq,
            f"escalated_{self.kind}",
            f"ESCALATED: {self.title}",
            self.waits_on,
            self.since,
            self.commands,
            escalated=True,
            subject=self.subject,
        )


def _args(arguments: object) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 300 else text[:299] + "…"


def notices_for(
    s: Summary,
    *,
    now: float,
    store: str,
    exhausted: bool = False,
) -> list[Notice]:
    """The notices due now for the run's current transition (its last seq). ``exhausted``:
    the workers' failure count says the last allowed try failed. (A stalled store is one
    notice for all its ready runs: ``stalled``.)"""
    rid = s.run_id
    since = s.last_activity
    out: list[Notice] = []
    if s.status == RunStatus.AWAITING_APPROVAL:
        for p in s.pending:
            what = f"{p.tool} {_args(p.arguments)} ({p.step})"
            commands = (
                hints.approve(rid, p.marker, store),
                hints.deny(rid, p.marker, store),
            )
            out.append(
                Notice(
                    rid,
                    s.last_seq,
                    APPROVAL,
                    f"{rid} awaits approval: {p.tool}",
                    f"run {rid} waits for approval of {what}",
                    since,
                    commands,
                    subject=p.marker,
                )
            )
            if p.deadline_at is not None and p.approve_within:
                warn_at = p.deadline_at - DEADLINE_WARNING * p.approve_within
                if warn_at <= now < p.deadline_at:
                    out.append(
                        Notice(
                            rid,
                            s.last_seq,
                            DEADLINE,
                            f"{rid}: approval of {p.tool} lapses in "
                            f"{format_duration(p.deadline_at - now)}",
                            f"run {rid}: the approval of {what} is denied by the deadline "
                            f"in {format_duration(p.deadline_at - now)}",
                            since,
                            commands,
                            subject=p.marker,
                        )
                    )
    elif s.status == RunStatus.INDETERMINATE:
        step = s.indeterminate or "?"
        out.append(
            Notice(
                rid,
                s.last_seq,
                INDETERMINATE,
                f"{rid}: a write may or may not have happened",
                f"run {rid} is indeterminate: the write {step} started and never recorded a "
                f"result ({s.waiting_on or 'check whether it happened'})",
                since,
                (
                    hints.reconcile_done(rid, step, store),
                    hints.reconcile_retry(rid, step, store),
                ),
            )
        )
    elif s.status == RunStatus.FAILED and exhausted:
        out.append(
            Notice(
                rid,
                s.last_seq,
                FAILED,
                f"{rid} failed; the workers gave up",
                f"run {rid} failed and the workers gave up: {s.error or s.waiting_on}",
                since,
                (hints.retry(rid, store), hints.show(rid, store)),
            )
        )
    elif s.status == RunStatus.OVER_BUDGET:
        limit = stopped_at(s.budget, s.waiting_on or s.error)
        late = overdue(s.budget, s.started_at, now)
        raising = () if limit is None else (hints.raise_budget(rid, limit, store, overdue=late),)
        out.append(
            Notice(
                rid,
                s.last_seq,
                OVER_BUDGET,
                f"{rid} stopped at its budget",
                f"run {rid} is over budget: "
                f"{(s.waiting_on or s.error).removeprefix('over budget: ')}",
                since,
                (*raising, hints.show(rid, store)),
            )
        )
    elif s.status == RunStatus.CORRUPT:
        out.append(
            Notice(
                rid,
                s.last_seq,
                CORRUPT,
                f"{rid}: its journal is corrupt",
                f"run {rid} is corrupt: {s.waiting_on or s.error}",
                since,
                (hints.show(rid, store),),
            )
        )
    return out


def stalled(
    ready: Iterable[Summary], *, now: float, store: str, no_worker_since: float | None
) -> Notice | None:
    """One notice while ready runs wait and no worker has been live for STALLED_AFTER
    seconds (``no_worker_since``: None while one is live): for the run waiting longest, so
    one stall is told once, not once per run."""
    if no_worker_since is None:
        return None
    runs = sorted(ready, key=lambda s: (s.last_activity or 0.0, s.run_id))
    if not runs:
        return None
    first = runs[0]
    waited_from = max(first.last_activity or 0.0, no_worker_since)
    if now - waited_from < STALLED_AFTER:
        return None
    others = f" and {len(runs) - 1} more" if len(runs) > 1 else ""
    return Notice(
        first.run_id,
        first.last_seq,
        STALLED,
        f"{first.run_id}{others} ready and no worker is live",
        f"run {first.run_id}{others} ready; no live worker has served the store for "
        f"{format_duration(now - no_worker_since)}",
        waited_from,
        (hints.worker(store), hints.workers(store)),
    )


def deadline_denials(
    run_id: str, denials: Iterable[tuple[int, str, float]], store: str
) -> list[Notice]:
    """Notices for approvals denied by their deadline: ``(seq, marker, at)`` each."""
    return [
        Notice(
            run_id,
            seq,
            DEADLINE,
            f"{run_id}: an approval lapsed and was denied",
            f"run {run_id}: nobody decided on {marker} in time; it was denied by the deadline",
            at,
            (hints.show(run_id, store),),
        )
        for seq, marker, at in denials
    ]
