"""How a status looks: glyph, colour and word, so status is never colour alone."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text

from durableagent import RunStatus
from durableagent.labels import ATTENTION_ORDER, ATTENTION_RANK, STATUS_GLYPH


@dataclass(frozen=True)
class StatusLook:
    """The glyph, Rich style and short word a status is drawn with."""

    glyph: str
    style: str
    word: str


_STYLE_WORD: dict[RunStatus, tuple[str, str]] = {
    RunStatus.CORRUPT: ("bold magenta", "corrupt"),
    RunStatus.INDETERMINATE: ("bold red", "indeterminate"),
    RunStatus.OVER_BUDGET: ("bold red", "over_budget"),
    RunStatus.INCOMPATIBLE: ("bold red", "incompatible"),
    RunStatus.AWAITING_APPROVAL: ("bold yellow", "awaiting"),
    RunStatus.FAILED: ("red", "failed"),
    RunStatus.RUNNING: ("bold cyan", "running"),
    RunStatus.PAUSED: ("yellow", "paused"),
    RunStatus.READY: ("blue", "ready"),
    RunStatus.COMPLETED: ("green", "completed"),
    RunStatus.CANCELLED: ("dim", "cancelled"),
    RunStatus.MOVED: ("dim", "moved"),
}

# The glyphs and the attention-first order are the CLI's too (durableagent.labels).
LOOKS: dict[RunStatus, StatusLook] = {
    s: StatusLook(STATUS_GLYPH[s], *_STYLE_WORD[s]) for s in ATTENTION_ORDER
}
ORDER: tuple[RunStatus, ...] = ATTENTION_ORDER
RANK: dict[RunStatus, int] = ATTENTION_RANK


def status_text(status: RunStatus) -> Text:
    """``✖ indeterminate`` in the status colour."""
    look = LOOKS[status]
    return Text(f"{look.glyph} {look.word}", style=look.style)


def clock(at: float | None) -> str:
    """The local wall-clock time of ``at`` as HH:MM:SS."""
    if at is None:
        return "—"
    return time.strftime("%H:%M:%S", time.localtime(at))
