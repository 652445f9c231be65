"""The header: which store, how many runs in each status, and whether the view is live, or
that the store does not answer (the runs are then as last seen, none of them corrupt)."""

from __future__ import annotations

import time
from collections import Counter

from rich.text import Text
from textual.widgets import Static

from durableagent import RunStatus

from .styles import LOOKS, ORDER, clock
from .workers import Crew, header_text

LIVE_STYLES = {
    "watching": ("◉", "green"),
    "polling": ("◌", "yellow"),
    "watch error": ("✗", "bold red"),
    "waiting for store": ("◌", "yellow"),
    "paused": ("‖", "dim"),
    "loading": ("…", "dim"),
}


class StoreHeader(Static):
    """Two lines: the store and its live state, then the counts per status."""

    DEFAULT_CSS = """
    StoreHeader { height: 2; padding: 0 1; background: $panel; }
    """

    def __init__(self, label: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.label = label
        self.counts: Counter[RunStatus] = Counter()
        self.live = "loading"
        self.last_change: float | None = None
        # (runs to load, since when) until the first counts: never "0 runs" while loading.
        self.loading_since: tuple[int | None, float] | None = (None, time.monotonic())
        # Why the store did not answer and since when (wall clock), while it does not.
        self.unreachable: tuple[str, float] | None = None
        # What failed reading the store (not a lost server: a load or refresh that raised)
        # and since when, until a read works again.
        self.failing: tuple[str, float] | None = None
        # What it says of the workers (None: nothing, as before any was read).
        self.workers_note: Text | None = None

    def on_mount(self) -> None:
        self._draw()

    def set_counts(self, counts: Counter[RunStatus]) -> None:
        """Show these counts (every status with at least one run); loading is over."""
        self.counts = counts
        self.loading_since = None
        self._draw()

    def show_loading(self, total: int | None, since: float) -> None:
        """Say that the store is loading: how many runs (when known) and for how long
        (``tick`` redraws the seconds)."""
        self.loading_since = (total, since)
        self._draw()

    def tick(self) -> None:
        if self.loading_since is not None:
            self._draw()

    def set_live(self, live: str, last_change: float | None = None) -> None:
        """Show the live state and the time of the last change seen."""
        self.live = live
        if last_change is not None:
            self.last_change = last_change
        self._draw()

    def set_workers(self, crew: Crew, ready: int) -> None:
        """Say how many workers are live, or that none is while ready runs wait."""
        text = header_text(crew, ready)
        if text != self.workers_note:
            self.workers_note = text
            self._draw()

    def set_unreachable(self, reason: str | None) -> None:
        """Say that the store does not answer, and why (None: it answers again). The reason
        takes the counts' line: they would be as last seen, and the table shows as much."""
        if reason is None:
            if self.unreachable is not None:
                self.unreachable = None
                self._draw()
            return
        since = self.unreachable[1] if self.unreachable is not None else time.time()
        # The store is named on the line above: the reason need not repeat it.
        reason = " ".join(reason.replace(f" at {self.label}", "").split())
        self.unreachable = (reason, since)
        self._draw()

    def set_failing(self, reason: str | None) -> bool:
        """Say that reading the store failed, and why (None: a read works again). True when
        this is news (the app then raises a toast too)."""
        if reason is None:
            if self.failing is not None:
                self.failing = None
                self._draw()
            return False
        news = self.failing is None or self.failing[0] != reason
        since = self.failing[1] if self.failing is not None else time.time()
        self.failing = (" ".join(reason.split()), since)
        self._draw()
        return news

    def _draw(self) -> None:
        top = Text(no_wrap=True, overflow="ellipsis")
        top.append("agentrun ", style="bold")
        top.append(self.label)
        top.append("  ")
        trouble = None
        if self.unreachable is not None:
            trouble = ("store unreachable", *self.unreachable)
        elif self.failing is not None:
            trouble = ("reading the store failed", *self.failing)
        if trouble is not None:
            what, reason, since = trouble
            top.append(f"✗ {what} since {clock(since)}", style="bold red")
            why = Text(no_wrap=True, overflow="ellipsis")
            if self.loading_since is None:
                why.append("runs as last seen · ", style="dim")
            why.append(reason, style="red")  # plain text: never read as markup
            self.update(Text("\n", no_wrap=True, overflow="ellipsis").join([top, why]))
            return
        glyph, style = LIVE_STYLES.get(self.live, ("?", "red"))
        top.append(f"{glyph} {self.live}", style=style)
        if self.last_change is not None:
            top.append(f" · last change {clock(self.last_change)}", style="dim")
        counts = Text(no_wrap=True, overflow="ellipsis")
        if self.loading_since is not None:
            runs, since = self.loading_since
            what = "the runs" if runs is None else f"{runs:,} run{'s' if runs != 1 else ''}"
            counts.append(f"loading {what}…", style="bold")
            counts.append(f" {int(time.monotonic() - since)}s", style="dim")
            self.update(Text("\n").join([top, counts]))
            return
        total = sum(self.counts.values())
        counts.append(f"{total:,} run{'s' if total != 1 else ''}", style="bold")
        for status in ORDER:
            n = self.counts.get(status, 0)
            if n:
                look = LOOKS[status]
                counts.append("  ")
                counts.append(f"{look.glyph} {n:,} {look.word}", style=look.style)
        if self.workers_note is not None:
            counts.append("  ·  ", style="dim")
            counts.append_text(self.workers_note)
        self.update(Text("\n").join([top, counts]))
