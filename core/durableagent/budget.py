"""Budgets: what a run may spend, and what it has spent, as a fold over its journal.

A run's :class:`Budget` is recorded in its ``run.started`` and changed only by ``budget``
signals, so no restart, worker or fork can reset it. What it has spent (:class:`Spend`) is
folded from its records: the usage each model step's reply reports, and for every model call
that started and never recorded its reply (lost in a crash, perhaps billed all the same) the
**reservation** its ``step.started`` recorded before the call. Before each step the journal
asks :func:`over_budget` whether spent plus the step's own reservation fits every limit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .durations import format_duration, parse_duration
from .errors import DurableAgentError

LIMITS = ("tokens", "model_calls", "tool_calls", "cost", "deadline")
_COUNTS = ("tokens", "model_calls", "tool_calls")
# The longest deadline a human may give: beyond it a number is a slip, not a plan.
MAX_DEADLINE = 365 * 86400.0
_FORMS = (
    "tokens=200000 (or 200k, 1.5M), model_calls=40, tool_calls=100 (whole numbers from 1), "
    "cost=5.00 (above 0, in the units of the agent's prices), deadline=2h (above 0 and up to "
    "365d: 90s, 30m, 2h, 1d, 1w, or plain seconds, after the run started)"
)
# What each limit takes, said when a value is refused (one grammar: submit --budget, budget
# --add/--set, the TUI's B dialog and a budget signal).
ALLOWED = {
    "tokens": "a whole number from 1: 200000, 200k or 1.5M",
    "model_calls": "a whole number from 1, e.g. model_calls=40",
    "tool_calls": "a whole number from 1, e.g. tool_calls=100",
    "cost": "a number above 0 in the units of the agent's prices, e.g. cost=5.00",
    "deadline": "a duration above 0 and up to 365d: 90s, 30m, 2h, 1d, 1w, or plain seconds",
}
_COUNT = re.compile(r"(\d+(?:_\d+)*(?:\.\d+)?)([kKmM]?)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# What a model call reserves when its adapter does not say how long a reply may be.
DEFAULT_OUTPUT_LIMIT = 4096
CHARS_PER_TOKEN = 4  # the input's estimate: a token is about four characters of text

Prices = Mapping[str, tuple[float, float]]  # model -> (per million input, per million output)


class BudgetError(DurableAgentError, ValueError):
    """A budget that does not parse; the message says what it takes."""


@dataclass(frozen=True)
class Budget:
    """A run's limits; None means no limit. ``deadline`` is seconds after ``run.started``;
    ``cost`` is in the units of the agent's ``prices``."""

    tokens: int | None = None
    model_calls: int | None = None
    tool_calls: int | None = None
    cost: float | None = None
    deadline: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                _check_value(f.name, value)

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return any(getattr(self, k) is not None for k in LIMITS)

    def to_dict(self) -> dict[str, Any]:
        """The limits set, as ``run.started`` records them."""
        return {k: getattr(self, k) for k in LIMITS if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: Any) -> Budget:
        """A recorded budget (journal text: a key or value it does not know reads as no
        limit, so an odd record never stops a run from loading)."""
        if not isinstance(d, dict):
            return cls()
        return cls(**{k: v for k, v in d.items() if k in LIMITS and _valid(k, v)})

    def changed(self, how: str, limits: Mapping[str, Any]) -> Budget:
        """This budget with a ``budget`` signal's ``add`` or ``set`` applied (``set`` to None
        lifts a limit). Limits it cannot apply are left as they are (see :func:`check_change`)."""
        new: dict[str, Any] = {}
        for k, v in limits.items():
            if k not in LIMITS or not (v is None or _valid(k, v)):
                continue
            old = getattr(self, k)
            if how == "set":
                new[k] = v
            elif how == "add" and v is not None and old is not None:
                new[k] = old + v
        return replace(self, **new)

    def describe(self) -> str:
        """``tokens 200,000 · model calls 40 · deadline 2h``; ``no limits``."""
        parts = [f"{_label(k)} {_figure(k, getattr(self, k))}" for k in self.to_dict()]
        return " · ".join(parts) or "no limits"


def _label(key: str) -> str:
    return key.replace("_", " ")


def _figure(key: str, value: float | int) -> str:
    if key == "deadline":
        return format_duration(value)
    if key == "cost":
        return f"{value:.2f}"
    return f"{int(value):,}"


def _valid(key: str, value: Any) -> bool:
    try:
        _check_value(key, value)
    except BudgetError:
        return False
    return True


def _check_value(key: str, value: Any) -> None:
    if key in _COUNTS:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    else:
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        )
    if not ok:
        raise BudgetError(f"budget {key} must be a number >= 0, not {value!r}")


def parse_budget(text: str, *, lifting: bool = False) -> dict[str, Any]:
    """The limits in ``tokens=200000,model_calls=40,deadline=2h`` (commas or spaces between
    them). ``lifting``: ``tokens=none`` is allowed and means no limit (``agentrun budget
    --set``). A key it does not know, a value that does not parse or a key given twice raises
    BudgetError naming what it takes."""
    items = [p for p in text.replace(",", " ").split() if p]
    if not items:
        raise BudgetError(f"an empty budget; give one or more of: {_FORMS}")
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise BudgetError(f"budget {item!r}: give key=value, the keys being {_FORMS}")
        if key not in LIMITS:  # exactly as written: TOKENS or model-calls is a slip
            raise BudgetError(
                f"budget {item!r}: unknown limit {key!r}; give key=value, the keys being {_FORMS}"
            )
        if key in out:
            raise BudgetError(f"budget {item!r}: {key} is given twice")
        out[key] = _parse_value(key, value.strip(), item, lifting)
    return out


def _parse_value(key: str, value: str, item: str, lifting: bool) -> Any:
    if value.lower() == "none":
        if lifting:
            return None
        raise BudgetError(f"budget {item!r}: 'none' lifts a limit only with --set")
    try:
        parsed: float | int
        if key == "deadline":
            parsed = parse_duration(value)
        elif key == "cost":
            if _NUMBER.fullmatch(value) is None:
                raise ValueError(value)
            parsed = float(value)
        else:
            parsed = _count(value)
        check_limit(key, parsed)
    except (ValueError, BudgetError):
        raise BudgetError(f"budget {item!r}: {key} takes {ALLOWED[key]}") from None
    return parsed


def check_limit(key: str, value: Any) -> None:
    """Refuse (BudgetError) a limit a human gives that means nothing: a count below 1, a
    cost or a deadline not above 0, a deadline beyond MAX_DEADLINE. (A recorded budget is
    read more leniently: see :meth:`Budget.from_dict`.)"""
    _check_value(key, value)
    if key in _COUNTS:
        ok = value >= 1
    elif key == "deadline":
        ok = 0 < value <= MAX_DEADLINE
    else:
        ok = value > 0
    if not ok:
        raise BudgetError(f"budget {key} takes {ALLOWED[key]}, not {value!r}")


def _count(value: str) -> int:
    """``200000``, ``200_000``, ``200k``, ``1.5M``: no sign, no exponent, a whole result."""
    m = _COUNT.fullmatch(value)
    if m is None:
        raise ValueError(value)
    scale = {"k": 1_000, "m": 1_000_000}.get(m.group(2).lower(), 1)
    n = float(m.group(1).replace("_", "")) * scale
    if not math.isfinite(n) or n != int(n):
        raise ValueError(value)
    return int(n)


def check_change(budget: Budget, how: str, limits: Mapping[str, Any]) -> str | None:
    """Why a ``budget`` signal cannot apply to ``budget`` (None when it can): ``add`` needs
    limits that are set (there is nothing to raise), ``set`` anything that parses."""
    if how not in ("add", "set"):
        return f"a budget signal takes 'add' or 'set', not {how!r}"
    if not limits:
        return "a budget signal needs at least one limit"
    for k, v in limits.items():
        if k not in LIMITS:
            return f"unknown budget limit {k!r}; the limits are {', '.join(LIMITS)}"
        if v is None and how == "add":
            return f"--add {k}=none adds nothing; lift a limit with --set {k}=none"
        if v is not None:
            try:
                check_limit(k, v)
            except BudgetError as e:
                return str(e)
        if how == "add" and getattr(budget, k) is None:
            return f"the run has no {_label(k)} limit to raise; set one with --set {k}=..."
    return None


# -- what a run spent ------------------------------------------------------------------------


@dataclass
class Spend:
    """What a run's records say it spent. ``used`` maps each model (as its replies name it;
    "" when they do not) to ``[input, output]`` tokens reported; ``lost`` counts the
    reservations of model calls that started and never recorded a reply, by the model they
    reserved for; ``open`` is the reservation of each model step's latest start that has no
    reply yet ([tokens, model]). A start of a step that is still open closes the earlier one
    as lost: each call counts once, whichever way it ended."""

    used: dict[str, list[int]] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    open: dict[str, tuple[int, str]] = field(default_factory=dict)
    model_calls: int = 0
    tool_calls: int = 0

    def start(self, step: str, kind: str, data: Any) -> None:
        """A step.started: a model call (with its reservation) or a tool call that acts."""
        data = data if isinstance(data, dict) else {}
        if kind == "model":
            self.model_calls += 1
            self._lose(step)
            reserve = data.get("reserve")
            tokens = reserve.get("tokens") if isinstance(reserve, dict) else None
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
                model = reserve.get("model") if isinstance(reserve, dict) else None
                self.open[step] = (tokens, model if isinstance(model, str) else "")
        elif kind == "tool" and data.get("refused") is not True:
            self.tool_calls += 1

    def complete(self, step: str, kind: str, data: Any) -> None:
        """A step.completed: a model reply's usage replaces its reservation."""
        if kind != "model":
            return
        self.open.pop(step, None)
        if not isinstance(data, dict):
            return
        usage = data.get("usage")
        if not isinstance(usage, dict):
            return
        named = data.get("model")
        model = named if isinstance(named, str) else ""
        counts = self.used.setdefault(model, [0, 0])
        for i, key in enumerate(("input_tokens", "output_tokens")):
            n = usage.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                counts[i] += n

    def _lose(self, step: str) -> None:
        earlier = self.open.pop(step, None)
        if earlier is not None:
            self.lost[earlier[1]] = self.lost.get(earlier[1], 0) + earlier[0]

    @property
    def tokens(self) -> int:
        """Tokens reported, plus those reserved by calls without a reply."""
        used = sum(i + o for i, o in self.used.values())
        return used + sum(self.lost.values()) + sum(t for t, _ in self.open.values())

    @property
    def reserved(self) -> int:
        """The part of :attr:`tokens` that is reservations (calls without a reply)."""
        return sum(self.lost.values()) + sum(t for t, _ in self.open.values())

    def cost(self, prices: Prices) -> float:
        """What the tokens cost at ``prices``. A model the prices do not name is priced at
        the dearest of them (a budget errs on the side of stopping); a reservation at the
        dearer of its model's two prices."""
        if not prices:
            return 0.0
        total = 0.0
        for model, (i, o) in self.used.items():
            p_in, p_out = _price(prices, model)
            total += (i * p_in + o * p_out) / 1e6
        reserved: dict[str, int] = dict(self.lost)
        for t, model in self.open.values():
            reserved[model] = reserved.get(model, 0) + t
        for model, t in reserved.items():
            total += t * max(_price(prices, model)) / 1e6
        return total

    def to_dict(self, prices: Prices | None = None) -> dict[str, Any]:
        """What ``ls --json`` and ``show --json`` say under ``spent``."""
        d: dict[str, Any] = {
            "tokens": self.tokens,
            "reserved_tokens": self.reserved,
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
        }
        if prices:
            d["cost"] = round(self.cost(prices), 6)
        return d

    def to_json(self) -> dict[str, Any]:
        return {
            "used": self.used,
            "lost": self.lost,
            "open": {k: list(v) for k, v in self.open.items()},
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
        }

    @classmethod
    def from_json(cls, d: Any) -> Spend:
        if not isinstance(d, dict):
            return cls()
        return cls(
            used={str(k): [int(x) for x in v] for k, v in dict(d.get("used") or {}).items()},
            lost={str(k): int(v) for k, v in dict(d.get("lost") or {}).items()},
            open={str(k): (int(v[0]), str(v[1])) for k, v in dict(d.get("open") or {}).items()},
            model_calls=int(d.get("model_calls") or 0),
            tool_calls=int(d.get("tool_calls") or 0),
        )

    def copy(self) -> Spend:
        return Spend.from_json(self.to_json())


def _price(prices: Prices, model: str) -> tuple[float, float]:
    if model in prices:
        p_in, p_out = prices[model]
        return float(p_in), float(p_out)
    return max(float(p[0]) for p in prices.values()), max(float(p[1]) for p in prices.values())


def over_budget(
    budget: Budget,
    spend: Spend,
    *,
    step: str,
    kind: str,
    reserve: int = 0,
    model: str = "",
    started_at: float | None,
    now: float,
    prices: Prices | None = None,
) -> str | None:
    """Why starting ``step`` (a model call reserving ``reserve`` tokens, or a tool call)
    would break a limit, in words with the figures; None when it fits them all."""
    if budget.deadline is not None and started_at is not None:
        elapsed = now - started_at
        if elapsed >= budget.deadline:
            return (
                f"deadline: {format_duration(elapsed)} since the run started, the limit is "
                f"{format_duration(budget.deadline)}"
            )
    if kind == "model":
        if budget.model_calls is not None and spend.model_calls + 1 > budget.model_calls:
            return f"model calls: {spent_of(spend.model_calls)} of a limit of {budget.model_calls}"
        if budget.tokens is not None and spend.tokens + reserve > budget.tokens:
            return (
                f"tokens: {spend.tokens:,} spent + {reserve:,} reserved for {step} would pass "
                f"the limit of {budget.tokens:,}"
            )
        if budget.cost is not None and prices:
            after = spend.copy()
            after.open[step + "#next"] = (reserve, model)
            cost = after.cost(prices)
            if cost > budget.cost:
                return (
                    f"cost: {spend.cost(prices):.4f} spent, {cost:.4f} with {step}'s "
                    f"reservation, would pass the limit of {budget.cost:.2f}"
                )
    elif kind == "tool" and budget.tool_calls is not None and spend.tool_calls >= budget.tool_calls:
        return f"tool calls: {spent_of(spend.tool_calls)} of a limit of {budget.tool_calls}"
    return None


def stopped_at(budget: Budget | None, reason: str) -> str | None:
    """The limit a run stopped at: the one its over-budget reason names (as
    :func:`over_budget` words it), else the first limit the budget has; None without one."""
    why = reason.rpartition("over budget: ")[2]
    named = next((k for k in LIMITS if why.startswith(f"{_label(k)}:")), None)
    if named is not None:
        return named
    return next(iter(budget.to_dict()), None) if budget is not None else None


def overdue(budget: Budget | None, started_at: float | None, now: float) -> float:
    """How far past its deadline a run is (s), 0 when it is not or has none."""
    if budget is None or budget.deadline is None or started_at is None:
        return 0.0
    return max(0.0, now - started_at - budget.deadline)


def spent_of(n: int) -> str:
    return f"{n} made"


def reservation(output_limit: int | None, conversation_chars: int) -> int:
    """What a model call reserves: the most its reply may hold (the adapter's output limit)
    plus an estimate of its input (about four characters a token, rounded up)."""
    out = output_limit if output_limit is not None and output_limit > 0 else DEFAULT_OUTPUT_LIMIT
    return out + -(-conversation_chars // CHARS_PER_TOKEN)
