"""Approval deadlines: a call waiting for a human past its ``approve_within`` is denied by
any worker of the store (``by: "deadline"``), never approved (SPEC §10).

The deadline of a pending call runs from the moment the model step that asked for it was
recorded; the attempt that stops for it writes ``deadline_at`` into each :class:`Pending` of
its outcome, so that a listing shows it and a worker knows when to act without reading the
journal. The deny is an ordinary signal, checked under the journal's lock: a human who
decided first wins, and nothing is written.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

from .durations import exact_duration, format_duration
from .gate import Pending, PolicyGate
from .step_index import StepIndex
from .steps import model_step, step_turn


def with_deadlines(
    pending: Iterable[Pending], index: StepIndex, gate: PolicyGate, default: float | str | None
) -> tuple[Pending, ...]:
    """``pending`` with ``deadline_at`` set on each call that has a deadline: its tool's
    (``@tool(approve_within=)`` / ``PolicyGate(approve_within=)``), else the agent's."""
    out = []
    for p in pending:
        within = gate.approve_within.get(p.tool, default)
        turn = step_turn(p.step)
        asked = index.completed.get(model_step(turn)) if turn is not None else None
        if within is None or asked is None:
            out.append(p)
            continue
        seconds = float(within)
        out.append(replace(p, deadline_at=asked.at + seconds, approve_within=seconds))
    return tuple(out)


def lapse_reason(p: Pending) -> str:
    """The deny's reason, which the model reads: ``no decision within 2h``."""
    if p.approve_within is None:
        return "no decision in time"
    return f"no decision within {exact_duration(p.approve_within)}"


def lapsed(pending: Iterable[Pending], now: float) -> list[Pending]:
    """The calls whose deadline has passed at ``now``."""
    return [p for p in pending if p.deadline_at is not None and p.deadline_at <= now]


def next_deadline(pending: Iterable[Pending]) -> float | None:
    """The earliest deadline among ``pending``, or None."""
    times = [p.deadline_at for p in pending if p.deadline_at is not None]
    return min(times) if times else None


def lapse_text(deadline_at: float, now: float | None = None) -> str:
    """``at 16:02:11 (in 1h)``, or ``at 16:02:11 (passed)``: when an approval lapses."""
    when = time.strftime("%H:%M:%S", time.localtime(deadline_at))
    left = deadline_at - (time.time() if now is None else now)
    return f"at {when} (in {format_duration(left)})" if left > 0 else f"at {when} (passed)"
