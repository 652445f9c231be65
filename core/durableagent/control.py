"""The controls on a run: ``cancel``, ``pause``/``resume``, ``move`` and its budget, as one fold.

Every control is a signal in the journal. :class:`Controls` folds them (with the budget of
``run.started``, the ``budget`` signals, and what the steps spent) one record at a time; the
journal's index, the status fold and the attempt's listener each keep one, so that a worker
re-checks them under the journal's lock at every step start and every screen says the same.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .budget import Budget, Spend
from .durations import format_duration
from .record import RUN_STARTED, SIGNAL, STEP_COMPLETED, STEP_STARTED, Record, signal_fields

# The signals after which no step starts: a move (SPEC §7), a cancel, a pause (until resumed).
HALTS = ("move", "cancel", "pause")
CONTROLS = ("cancel", "pause", "resume", "budget")  # the control signals (SPEC §10)


@dataclass(frozen=True)
class Control:
    """One control signal as a screen tells it: which, by whom, why, when, at which seq."""

    name: str
    by: str | None = None
    reason: str | None = None
    at: float = 0.0
    seq: int = 0
    to: str = ""  # a move's destination

    @classmethod
    def of(cls, r: Record) -> Control:
        name, payload, by, why = signal_fields(r)
        to = payload.get("to") if name == "move" else None
        return cls(name, by, why, r.at, r.seq, to if isinstance(to, str) else "")

    def says(self) -> str:
        """``cancelled by ana at 14:02:11: looping on a bad prompt``."""
        past = {"cancel": "cancelled", "pause": "paused", "move": "moved"}.get(self.name)
        what = past or self.name
        if self.name == "move":
            what = f"moved to {self.to or 'another store'}"
        who = f" by {self.by}" if self.by else ""
        when = time.strftime("%H:%M:%S", time.localtime(self.at)) if self.at else ""
        because = f": {self.reason}" if self.reason else ""
        return f"{what}{who}{f' at {when}' if when else ''}{because}"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"signal": self.name, "by": self.by, "reason": self.reason}
        d |= {"at": self.at, "seq": self.seq}
        return d | ({"to": self.to} if self.to else {})

    @classmethod
    def from_dict(cls, d: Any) -> Control | None:
        if not isinstance(d, dict):
            return None
        return cls(
            str(d.get("signal") or ""),
            d.get("by"),
            d.get("reason"),
            float(d.get("at") or 0.0),
            int(d.get("seq") or 0),
            str(d.get("to") or ""),
        )


@dataclass
class Controls:
    """What the control signals and the steps so far say: a move, a cancel, the pause in
    force (a resume lifts it), the budget (``run.started``'s with the ``budget`` signals
    applied; ``budget_seq`` the latest one's seq) and what was spent."""

    moved: Control | None = None
    cancelled: Control | None = None
    paused: Control | None = None
    budget: Budget = field(default_factory=Budget)
    budget_seq: int = 0
    started_at: float | None = None  # the run.started that starts the budget's deadline
    spend: Spend = field(default_factory=Spend)

    def add(self, r: Record) -> None:
        t = r.type
        if t == STEP_STARTED:
            self.spend.start(r.step, r.kind, r.data)
        elif t == STEP_COMPLETED:
            self.spend.complete(r.step, r.kind, r.data)
        elif t == SIGNAL:
            self.signal(r)
        elif t == RUN_STARTED and self.started_at is None:
            # The first record (a fork's is its own: it carries the budget in force at the
            # cut, and its deadline runs from the fork).
            data = r.data if isinstance(r.data, dict) else {}
            self.started_at = r.at
            self.budget = Budget.from_dict(data.get("budget"))

    def signal(self, r: Record) -> None:
        name, payload, _, _ = signal_fields(r)
        if name == "move":
            self.moved = self.moved or Control.of(r)
        elif name == "cancel":
            self.cancelled = self.cancelled or Control.of(r)
        elif name == "pause":
            self.paused = Control.of(r)
        elif name == "resume":
            self.paused = None
        elif name == "budget":
            for how in ("set", "add"):
                limits = payload.get(how)
                if isinstance(limits, dict):
                    self.budget = self.budget.changed(how, limits)
            self.budget_seq = r.seq

    @property
    def halt(self) -> Control | None:
        """The control that stops the run before its next step: a move, a cancel, a pause."""
        return self.moved or self.cancelled or self.paused

    def copy(self) -> Controls:
        return Controls(
            self.moved,
            self.cancelled,
            self.paused,
            self.budget,
            self.budget_seq,
            self.started_at,
            self.spend.copy(),
        )

    def to_json(self) -> dict[str, Any]:
        def c(x: Control | None) -> dict[str, Any] | None:
            return None if x is None else x.to_dict()

        return {
            "moved": c(self.moved),
            "cancelled": c(self.cancelled),
            "paused": c(self.paused),
            "budget": self.budget.to_dict(),
            "budget_seq": self.budget_seq,
            "started_at": self.started_at,
            "spend": self.spend.to_json(),
        }

    @classmethod
    def from_json(cls, d: Any) -> Controls:
        if not isinstance(d, dict):
            return cls()
        return cls(
            Control.from_dict(d.get("moved")),
            Control.from_dict(d.get("cancelled")),
            Control.from_dict(d.get("paused")),
            Budget.from_dict(d.get("budget")),
            int(d.get("budget_seq") or 0),
            d.get("started_at"),
            Spend.from_json(d.get("spend")),
        )


# Who a lapsed approval's deny is by: the workers, for the deadline (SPEC §10). Such a deny
# never overrules a decision already recorded, as a human's deny may overrule an approval.
DEADLINE = "deadline"


def halts(r: Record) -> bool:
    """Whether ``r`` is a signal that may stop a run (a halt, or a resume lifting one)."""
    return r.type == SIGNAL and signal_fields(r)[0] in (*HALTS, "resume", "budget")


def budget_text(controls: Controls, now: float | None = None) -> str:
    """``tokens 12,400 of 200,000 · model calls 3 of 40 · deadline 2h (1h12m left)``: what
    ``show``, ``agentrun budget`` and the TUI say of a run's spend against its limits."""
    now = time.time() if now is None else now
    spend = controls.spend
    spent = {
        "tokens": spend.tokens,
        "model_calls": spend.model_calls,
        "tool_calls": spend.tool_calls,
    }
    parts = []
    for key, limit in controls.budget.to_dict().items():
        if key == "deadline":
            started = controls.started_at
            left = "" if started is None else _left(started + limit - now)
            parts.append(f"deadline {format_duration(limit)}{left}")
        elif key == "cost":
            parts.append(f"cost limit {limit:.2f} (counted by the worker at its prices)")
        else:
            parts.append(f"{key.replace('_', ' ')} {spent[key]:,} of {int(limit):,}")
    reserved = f" ({spend.reserved:,} reserved by calls without a reply)" if spend.reserved else ""
    if not parts:
        used = f"{spend.tokens:,} tokens, {spend.model_calls} model calls, {spend.tool_calls} "
        return f"no budget; spent {used}tool calls{reserved}"
    return " · ".join(parts) + reserved


def _left(seconds: float) -> str:
    return f" ({format_duration(seconds)} left)" if seconds > 0 else " (passed)"
