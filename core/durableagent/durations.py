"""Durations as people write them, one grammar everywhere a duration is given (``audit
--since``, a query's ``age>``, a budget's ``deadline``, ``approve_within``, ``--escalate-after``):
``90s``, ``30m``, ``2h``, ``1d``, ``1w``, or plain seconds (``45``, ``2.5``)."""

from __future__ import annotations

import math
import re

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
HOW = "a duration: 90s, 30m, 2h, 1d, 1w, or plain seconds"


def parse_duration(text: str | float | int) -> float:
    """Seconds in ``text``; ValueError (naming what was given and the forms it takes) for
    anything else, a negative or an endless one included."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not {HOW}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        m = _DURATION.fullmatch(text.strip().lower())
        if m is None:
            raise ValueError(f"{text!r} is not {HOW}")
        seconds = float(m.group(1)) * UNITS[m.group(2)]
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{text!r} is not {HOW}")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest of the grammar's forms that says ``seconds`` roughly: ``45s``, ``12m``,
    ``3h``, ``2d``, ``1w`` (rounded down; what a human reads, never parsed back exactly)."""
    s = max(0.0, seconds)
    for unit in ("w", "d", "h", "m"):
        if s >= UNITS[unit] and (unit != "w" or s >= 2 * UNITS["w"]):
            return f"{int(s // UNITS[unit])}{unit}"
    return f"{int(s)}s"


def exact_duration(seconds: float) -> str:
    """``seconds`` said exactly in the grammar's largest whole unit: ``2h``, ``90m``, ``1.5s``
    (what was given, as a limit or a deadline; parsed back, it is the same)."""
    for unit in ("w", "d", "h", "m"):
        size = UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
