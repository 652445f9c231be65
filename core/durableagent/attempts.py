"""What each attempt of a run did, from its records and the store's attempt log (a pure fold,
no I/O): the TUI's timeline draws it, ``agentrun show`` prints it.

An attempt begins at its lease: the log says who took it and the seq its first record would
get. Its records run up to its outcome's seq, or, for an attempt that never said how it ended
(``lost``: killed), up to its last record before the next attempt. Human signals between
attempts belong to none. Each attempt replayed the steps that had a result before it began,
ran the steps it started first, and re-ran the ones an earlier attempt had started without a
result (cut off by a kill, or reconciled retry). A start that never got its result before the
same step started again was cut off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .record import SIGNAL, STEP_COMPLETED, STEP_STARTED, Record
from .stores.protocol import LOST, STOPPED, Attempt

# How an attempt ended, in words a human reads on the divider.
ENDINGS: dict[str | None, str] = {
    None: "running",
    "completed": "completed",
    "awaiting_approval": "awaiting approval",
    "indeterminate": "indeterminate",
    "failed": "failed",
    "cancelled": "cancelled",
    "paused": "paused",
    "over_budget": "over budget",
    "incompatible": "incompatible",
    "moved": "moved",
    LOST: "lost",
    STOPPED: "stopped",
}
LOST_WHY = "its worker stopped without saying (killed, or its lease was taken over)"


@dataclass(frozen=True)
class Span:
    """One attempt and the part of the journal it wrote: seqs ``first`` to ``last``
    (``last`` < ``first`` when it wrote nothing)."""

    attempt: Attempt
    first: int
    last: int
    replayed: tuple[str, ...] = ()
    ran: tuple[str, ...] = ()
    reran: tuple[str, ...] = ()
    cut: tuple[str, ...] = ()  # started by this attempt, no result when it ended

    @property
    def number(self) -> int:
        return self.attempt.number

    @property
    def ending(self) -> str:
        return ENDINGS.get(self.attempt.ended, str(self.attempt.ended))

    @property
    def lost(self) -> bool:
        return self.attempt.ended == LOST

    def wrote(self) -> bool:
        return self.last >= self.first


def spans(records: Sequence[Record], attempts: Sequence[Attempt]) -> list[Span]:
    """Each attempt's part of the journal and what it did with each step."""
    out: list[Span] = []
    end_of_journal = records[-1].seq if records else 0
    firsts: list[int] = []
    prev_last = 0
    for a in attempts:
        first = a.first_seq if a.first_seq > 0 else prev_last + 1
        firsts.append(first)
        prev_last = a.last_seq if a.last_seq is not None else first - 1
    for i, a in enumerate(attempts):
        first = firsts[i]
        bound = firsts[i + 1] - 1 if i + 1 < len(attempts) else end_of_journal
        if a.last_seq is not None:  # it said how it ended, and at which seq
            last = a.last_seq
        else:
            own = [r.seq for r in records if first <= r.seq <= bound and r.type != SIGNAL]
            last = own[-1] if own else first - 1
        out.append(_what_it_did(records, a, first, last))
    return out


def _what_it_did(records: Sequence[Record], a: Attempt, first: int, last: int) -> Span:
    had_result: dict[str, None] = {}  # steps with a result before the attempt, in order
    started_before: set[str] = set()
    for r in records:
        if r.seq >= first:
            break
        if r.type == STEP_COMPLETED and r.step:
            had_result.setdefault(r.step)
        elif r.type == STEP_STARTED:
            started_before.add(r.step)
    ran: dict[str, None] = {}
    reran: dict[str, None] = {}
    open_: dict[str, None] = {}
    for r in records:
        if r.seq < first or r.seq > last:
            continue
        if r.type == STEP_STARTED:
            if r.step in started_before or r.step in ran or r.step in reran:
                if r.step not in ran:
                    reran.setdefault(r.step)
            else:
                ran.setdefault(r.step)
            open_[r.step] = None
        elif r.type == STEP_COMPLETED:
            open_.pop(r.step, None)
    cut = tuple(open_) if a.ended is not None else ()
    return Span(a, first, last, tuple(had_result), tuple(ran), tuple(reran), cut)


def start_states(records: Sequence[Record]) -> dict[int, tuple[str, int | None]]:
    """For each step.started record (by seq): ``("done", result seq)`` when it got its result
    before the step started again, ``("cut", next start's seq)`` when the step started again
    without one, ``("open", None)`` for a latest start with no result."""
    states: dict[int, tuple[str, int | None]] = {}
    open_start: dict[str, int] = {}
    for r in records:
        if r.type == STEP_STARTED:
            earlier = open_start.get(r.step)
            if earlier is not None:
                states[earlier] = ("cut", r.seq)
            open_start[r.step] = r.seq
            states[r.seq] = ("open", None)
        elif r.type == STEP_COMPLETED:
            start = open_start.pop(r.step, None)
            if start is not None:
                states[start] = ("done", r.seq)
    return states


def reruns(records: Sequence[Record]) -> set[int]:
    """The seqs of step.started records whose step had started before: re-runs."""
    seen: set[str] = set()
    out: set[int] = set()
    for r in records:
        if r.type == STEP_STARTED:
            if r.step in seen:
                out.add(r.seq)
            seen.add(r.step)
    return out


def divider_text(span: Span) -> str:
    """``worker-2 · v2026.12.03 · completed · replayed 4 · ran 2 · re-ran llm/3``: the attempt
    in one line (its code's version when its outcome recorded one)."""
    a = span.attempt
    parts = [a.owner or "owner unknown"]
    if a.outcome is not None and a.outcome.version:
        parts.append(a.outcome.version)  # the code that ran it (deploys.py)
    parts.append(span.ending)
    if span.replayed:
        parts.append(f"replayed {len(span.replayed)}")
    if span.ran:
        parts.append(f"ran {len(span.ran)}")
    if span.reran:
        parts.append("re-ran " + ", ".join(span.reran))
    if span.cut:
        parts.append("cut off " + ", ".join(span.cut))
    if not span.wrote() and a.ended is not None:
        parts.append("wrote nothing")
    return " · ".join(parts)
