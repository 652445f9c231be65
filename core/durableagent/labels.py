"""How a run's status and times read on a screen, shared by the CLI and the TUI so that both
show the one fold the same way: a glyph beside every status word (never colour alone), and
attention first."""

from __future__ import annotations

from .fold import RunStatus

STATUS_GLYPH: dict[RunStatus, str] = {
    RunStatus.CORRUPT: "⊘",
    RunStatus.INDETERMINATE: "✖",
    RunStatus.OVER_BUDGET: "◆",
    RunStatus.INCOMPATIBLE: "≠",
    RunStatus.AWAITING_APPROVAL: "▲",
    RunStatus.FAILED: "✗",
    RunStatus.RUNNING: "●",
    RunStatus.PAUSED: "‖",
    RunStatus.READY: "○",
    RunStatus.COMPLETED: "✓",
    RunStatus.CANCELLED: "■",
    RunStatus.MOVED: "⇢",
}

# The short words the TUI shows (its status column and header counts); `ls --status` takes
# them as well as the statuses' own names.
STATUS_SHORT: dict[RunStatus, str] = {s: str(s) for s in STATUS_GLYPH} | {
    RunStatus.AWAITING_APPROVAL: "awaiting"
}
STATUS_BY_WORD: dict[str, RunStatus] = {str(s): s for s in STATUS_GLYPH} | {
    w: s for s, w in STATUS_SHORT.items()
}

# Needs a human first, then what moves on its own, then what is done.
ATTENTION_ORDER: tuple[RunStatus, ...] = tuple(STATUS_GLYPH)
ATTENTION_RANK: dict[RunStatus, int] = {s: i for i, s in enumerate(ATTENTION_ORDER)}


def ago(at: float | None, now: float) -> str:
    """``12s ago``, ``5m ago``, ``3h ago``, ``2d ago``; ``—`` when unknown."""
    # Once per row of a listing (100,000 of them): no max() call (a quarter faster); "not >="
    # keeps a NaN or a time in the future at 0s, as max(0.0, ...) did.
    if at is None:
        return "—"
    seconds = now - at
    if not seconds >= 60:
        return f"{int(seconds)}s ago" if seconds > 0 else "0s ago"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    return f"{int(seconds // 86400)}d ago"
