"""Helpers for the TUI tests: an app with a fixed clock, and waiting on what a user sees."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

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


async def until(pilot: Pilot[object], cond: Callable[[], bool], timeout: float = 5.0) -> None:
    """Let the app run until ``cond()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.02)


async def loaded(pilot: Pilot[object]) -> None:
    """Wait for the first load of the store."""
    app = pilot.app
    assert isinstance(app, SupervisorApp)
    await until(pilot, lambda: app.loaded)
    await pilot.pause()


async def select(pilot: Pilot[object], run_id: str) -> None:
    """Put the runs table's cursor on ``run_id``."""
    app = pilot.app
    assert isinstance(app, SupervisorApp)
    app.table.move_cursor(row=app.table.get_row_index(run_id), animate=False)
    await pilot.pause()
