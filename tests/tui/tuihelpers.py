"""Helpers for the TUI tests: an app with a fixed clock, and waiting on what a user sees."""

from __future__ import annotations

import html
import re
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from textual import events
from textual.pilot import Pilot

from durableagent_tui.app import SupervisorApp
from durableagent_tui.sample import NOW


def make_app(root: Path, **kw: object) -> SupervisorApp:
    """An app over ``root`` with a fixed clock and label, no cursor blink, no watcher."""
    opts: dict[str, object] = {
        "live": False,
        "clock": lambda: NOW,
        "label": "runs/",
        "cursor_blink": False,
    }
    opts.update(kw)
    return SupervisorApp(root, **opts)  # type: ignore[arg-type]


BURST_CHARS = {"slash": "/", "escape": "\x1b", "enter": "\r"}


def burst(app: SupervisorApp, *keys: str) -> None:
    """Queue ``keys`` all at once, as a paste or a fast typist does in a real terminal: the
    app handles the first only after the last has arrived (``pilot.press`` waits between)."""
    for key in keys:
        app.post_message(events.Key(key, BURST_CHARS.get(key, key if len(key) == 1 else None)))


async def until(pilot: Pilot[object], cond: Callable[[], bool], timeout: float = 30.0) -> None:
    """Let the app run until ``cond()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


def following(app: SupervisorApp) -> bool:
    """The timeline shows the run under the cursor (its records are read off the loop)."""
    selected = app.table.selected_run
    followed = app.followed.run_id if app.followed is not None else None
    return selected == followed and app.timeline.run_id == selected


async def loaded(pilot: Pilot[object]) -> None:
    """Wait for the first load of the store, and the timeline of the run under the cursor."""
    app = pilot.app
    assert isinstance(app, SupervisorApp)
    await until(pilot, lambda: app.loaded)
    await until(pilot, lambda: following(app))
    await pilot.pause()


async def select(pilot: Pilot[object], run_id: str) -> None:
    """Put the runs table's cursor on ``run_id`` and wait for its timeline."""
    app = pilot.app
    assert isinstance(app, SupervisorApp)
    app.table.move_cursor(row=app.table.get_row_index(run_id), animate=False)
    await until(pilot, lambda: following(app))
    await pilot.pause()


_TEXT = re.compile(
    r'<text class="[^"]*" x="([\d.]+)" y="[\d.]+" textLength="[\d.]+"[^>]*'
    r'clip-path="url\(#[\w-]*?line-(\d+)\)">(.*?)</text>'
)
_CELL_PX = 12.2  # the width of one cell in Textual's SVG export


def screen_lines(app: SupervisorApp) -> list[str]:
    """The screen as a user reads it: one string per terminal line, from a screenshot."""
    rows: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for x, line, text in _TEXT.findall(app.export_screenshot()):
        rows[int(line)].append((float(x), html.unescape(text).replace("\xa0", " ")))
    out = []
    for n in range(max(rows, default=-1) + 1):
        s = ""
        for x, text in sorted(rows.get(n, [])):
            s = s.ljust(round(x / _CELL_PX)) + text
        out.append(s.rstrip())
    return out


def screen_text(app: SupervisorApp) -> str:
    """The whole screen as text, lines joined with newlines."""
    return "\n".join(screen_lines(app))


def line_with(app: SupervisorApp, needle: str) -> str:
    """The one screen line that holds ``needle``."""
    found = [line for line in screen_lines(app) if needle in line]
    assert len(found) == 1, (needle, found)
    return found[0]


def toast_text(app: SupervisorApp) -> str:
    """What the notifications on screen say (right of their ▌ edge), lines joined."""
    parts = [line.rsplit("▌", 1)[1].rstrip("│╯ ─") for line in screen_lines(app) if "▌" in line]
    return " ".join(" ".join(parts).split())


def unwrapped(text: str) -> str:
    """Text with every space and line break gone: wrapping may fold a word anywhere."""
    return "".join(text.split())


def record_pane(app: SupervisorApp) -> str:
    """The record pane's text as a user reads it, its wrapped lines joined back together."""
    right = [line.split("││", 1)[1] for line in screen_lines(app) if "││" in line]
    return unwrapped("".join(line.rstrip("│ ▇▆▅▄▃▂▁") for line in right))
