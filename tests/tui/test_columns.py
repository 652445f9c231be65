"""Columns follow their content: a row whose run changes state while the screen is open shows
its whole status word and waiting-on text; the timeline's summary takes the width that is left;
the record pane shows what the table cuts, whole."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tuihelpers import line_with, loaded, make_app, screen_lines, select, until

from durableagent import FileStore, Status, ToolCall
from durableagent.testing import JournalWriter
from durableagent_tui.sample import T0

LONG = " ".join(f"word{i:03d}" for i in range(60))  # 479 characters


def quiet_store(root: Path) -> FileStore:
    """Runs whose status words and waiting-on texts are all short: nothing to wait on."""
    store = FileStore(root)
    for i, rid in enumerate(("a-1", "b-2")):
        j = JournalWriter(store, rid, T0 + 60 * i)
        j.start("help")
    return store


async def test_a_run_that_changes_state_while_open_shows_its_whole_row(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = quiet_store(root)
    app = make_app(root, live=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        assert "○ ready" in line_with(app, "a-1")

        # Another process moves a-1 on: two calls wait for approval.
        j = JournalWriter(store, "a-1", T0 + 10)
        pending = j.asks(
            1,
            ToolCall("c1", "create_ticket", {"summary": "x"}),
            ToolCall("c2", "send_email", {"to": "y"}),
        )
        j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
        # The table re-measures a grown column when idle: wait for the screen, not a guess.
        await until(pilot, lambda: "approve create_ticket (+1)" in line_with(app, "a-1"))
        assert "▲ awaiting" in line_with(app, "a-1")

        # ... and b-2 goes indeterminate, the longest status word there is.
        j = JournalWriter(store, "b-2", T0 + 70)
        j.asks(1, ToolCall("c1", "create_ticket", {"summary": "z"}))
        j.tool("tool/1/0/create_ticket", None, write=True)
        await until(pilot, lambda: "reconcile tool/1/0/create_ticket" in line_with(app, "b-2"))
        assert "✖ indeterminate" in line_with(app, "b-2")


def long_result_store(root: Path) -> FileStore:
    store = FileStore(root)
    j = JournalWriter(store, "long-1", T0)
    j.start("look it up")
    j.asks(1, ToolCall("c1", "lookup_policy", {"topic": "everything"}))
    j.tool("tool/1/0/lookup_policy", LONG)
    return store


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (160, 48), (200, 50)])
async def test_the_timeline_summary_takes_the_width_that_is_left(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    root = tmp_path / "runs"
    long_result_store(root)
    app = make_app(root)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        await pilot.pause()
        [line] = [line for line in screen_lines(app) if re.match(r"│\s+5  ", line)]
        pane = line[: line.index("││")]  # the timeline row of seq 5, up to its right border
        summary = pane[pane.index("result: wo") :]
        # Cut with an ellipsis only at the pane's edge: cell padding and the scrollbar gutter.
        assert summary.rstrip().endswith("…")
        assert len(summary) - len(summary.rstrip()) <= 3
        # What is left once the fixed columns have theirs (at 80 the step shares the column).
        assert len(summary.rstrip()) >= {80: 10, 120: 30, 160: 40, 200: 70}[size[0]]


async def test_the_record_pane_shows_a_long_result_whole(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    long_result_store(root)
    app = make_app(root)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot)
        await select(pilot, "long-1")
        app.timeline.move_cursor(row=app.timeline.get_row_index("5"), animate=False)
        await pilot.pause()
        right = [line.split("││", 1)[1] for line in screen_lines(app) if "││" in line]
        words = " ".join(" ".join(right).replace("│", " ").split())
        assert LONG in words
