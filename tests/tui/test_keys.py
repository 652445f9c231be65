"""Habits of terminal users: j/k/g/G and home/end in both tables, esc goes back, ctrl+c
quits, a key that does not apply says why, and every binding can be remapped by id."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.binding import Binding
from textual.widgets import Input
from tuihelpers import (
    burst,
    following,
    loaded,
    make_app,
    screen_text,
    select,
    toast_text,
    until,
)

from durableagent_tui import dialogs
from durableagent_tui.app import SupervisorApp
from durableagent_tui.detail import RecordDetail
from durableagent_tui.dialogs import ApproveDialog
from durableagent_tui.runs_table import RunsTable
from durableagent_tui.timeline import Timeline

SIZE = (120, 36)


async def test_j_k_g_G_home_end_move_in_the_runs_table(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        table = app.table
        last = table.row_count - 1
        await pilot.press("j", "j")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        await pilot.press("G")
        assert table.cursor_row == last
        await pilot.press("g")
        assert table.cursor_row == 0
        await pilot.press("end")
        assert table.cursor_row == last
        await pilot.press("home")
        assert table.cursor_row == 0
        await until(pilot, lambda: following(app))  # read off the loop
        assert app.timeline.run_id == table.shown()[0]  # the timeline follows


async def test_j_k_g_G_home_end_move_in_the_timeline(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("enter")
        timeline = app.timeline
        assert timeline.has_focus
        last = timeline.row_count - 1
        assert timeline.cursor_row == last  # it follows the tail
        await pilot.press("g")
        assert timeline.cursor_row == 0
        assert timeline.attempt_at_cursor() is not None  # attempt 1's divider comes first
        await pilot.press("j", "j")
        assert timeline.cursor_row == 2
        assert "seq 2 step.started" in screen_text(app)  # the record pane follows
        await pilot.press("k")
        assert timeline.cursor_row == 1
        await pilot.press("G")
        assert timeline.cursor_row == last
        await pilot.press("home")
        assert timeline.cursor_row == 0
        await pilot.press("end")
        assert timeline.cursor_row == last


async def test_esc_goes_back_from_the_timeline_to_the_runs(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("/", *"await", "enter")  # a filter, which esc must not clear here
        await pilot.press("enter")
        assert app.timeline.has_focus
        await pilot.press("escape")
        assert app.table.has_focus
        assert app.filter_text == "await"
        await pilot.press("tab", "tab")
        assert isinstance(app.focused, RecordDetail)
        await pilot.press("escape")
        assert app.timeline.has_focus
        await pilot.press("escape", "escape")  # back to the runs, then clear the filter
        assert app.table.has_focus and app.filter_text == ""


async def test_keys_typed_in_one_burst_after_slash_go_to_the_filter_never_to_the_runs(
    sample: Path,
) -> None:
    """'/' then 'await' at typing speed: each letter is the filter's, not a key of the runs
    table (a would open the approve dialog on the selected run, n would move, r reconcile)."""
    app = make_app(sample)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")  # awaiting approval: a opens its dialog
        burst(app, "slash", *"await")
        await pilot.pause()
        assert app.screen is app.screen_stack[0] and not isinstance(app.screen, ApproveDialog)
        assert app.filter_text == "await" and toast_text(app) == ""
        assert sorted(app.table.shown()) == ["billing-1042", "markup-1048"]
        burst(app, "enter", *"nn")  # back to the runs: n is theirs again, not the filter's
        await pilot.pause()
        assert app.filter_text == "await" and app.table.has_focus
        assert app.table.selected_run == "billing-1042"  # two n: round the two matches
        burst(app, "escape", "n")  # the n never becomes filter text in the hidden box
        await pilot.pause()
        assert app.filter_text == "" and app.query_one("#filter", Input).value == ""
        assert app.table.row_count == 9


@pytest.mark.parametrize("in_dialog", [False, True])
async def test_ctrl_c_quits(sample: Path, in_dialog: bool) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        if in_dialog:
            await select(pilot, "billing-1042")
            await pilot.press("a", "tab")  # in the reason box, where ctrl+c could copy
            assert isinstance(app.screen, ApproveDialog)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running
    assert app.return_value == 0


async def test_ctrl_c_with_text_selected_copies_instead(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a", "tab", *"TICKET-9")
        box = app.screen.query_one("#reason", Input)
        box.select_all()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        assert app.clipboard == "TICKET-9"


@pytest.mark.parametrize(
    ("run_id", "key", "says"),
    [
        ("vpn-1043", "a", "vpn-1043 has nothing to approve: it is indeterminate (r reconciles"),
        ("billing-1042", "r", "billing-1042 has nothing to reconcile: it is awaiting (a approves"),
        ("laptop-1039", "R", "laptop-1039 has nothing to retry: it is completed."),
    ],
)
async def test_a_key_that_does_not_apply_to_the_run_says_so(
    sample: Path, run_id: str, key: str, says: str
) -> None:
    app = make_app(sample)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await loaded(pilot)
        await select(pilot, run_id)
        assert app.check_action({"a": "approve", "r": "reconcile", "R": "retry"}[key], ()) is None
        await pilot.press(key)
        await pilot.pause()
        assert len(app.screen_stack) == 1  # no dialog
        assert says in toast_text(app)


async def test_a_key_in_read_only_mode_stays_silent(sample: Path) -> None:
    app = make_app(sample, read_only=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await select(pilot, "laptop-1039")
        await pilot.press("a")
        await pilot.pause()
        assert "nothing to approve" not in toast_text(app)


def _bindings(cls: type) -> list[Binding]:
    return [b for b in getattr(cls, "BINDINGS", []) if isinstance(b, Binding)]


def test_every_binding_has_an_id_so_users_can_remap_it() -> None:
    classes = [
        SupervisorApp,
        RunsTable,
        Timeline,
        RecordDetail,
        dialogs.ApproveDialog,
        dialogs.ReconcileDialog,
        dialogs.RetryDialog,
        dialogs.ConfirmDialog,
        dialogs.HelpScreen,
        dialogs.PlanScreen,
    ]
    missing = [(c.__name__, b.key) for c in classes for b in _bindings(c) if not b.id]
    assert missing == []
    for cls in classes:
        assert all(isinstance(b, Binding) for b in getattr(cls, "BINDINGS", []))
