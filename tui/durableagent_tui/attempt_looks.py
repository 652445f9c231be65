"""How an attempt's ending looks on the timeline's divider: a glyph and a colour (the words
are the core's, ``durableagent.attempts.ENDINGS``)."""

from __future__ import annotations

from durableagent import RunStatus
from durableagent.labels import STATUS_GLYPH
from durableagent.stores.protocol import LOST, STOPPED

ENDING_LOOKS: dict[str | None, tuple[str, str]] = {
    None: ("●", "bold cyan"),
    "completed": ("✓", "green"),
    "awaiting_approval": ("▲", "yellow"),
    "indeterminate": ("✖", "red"),
    "failed": ("✗", "red"),
    "cancelled": ("■", "dim"),
    "paused": ("‖", "yellow"),
    "over_budget": ("◆", "bold red"),
    "incompatible": (STATUS_GLYPH[RunStatus.INCOMPATIBLE], "bold red"),
    "moved": ("⇢", "dim"),
    LOST: ("↯", "bold red"),
    STOPPED: ("‖", "dim"),
}
