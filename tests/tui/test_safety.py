"""Safety: a write is approved, denied or retried only by a deliberate key or a button whose
label says what it does. A click or enter selects; the journal stays byte-identical."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding
from textual.widgets import Button, Input, OptionList
from tuihelpers import (
    burst,
    line_with,
    loaded,
    make_app,
    screen_lines,
    screen_text,
    select,
    until,
)

from durableagent import FileStore, Status, ToolCall
from durableagent.testing import JournalWriter
from durableagent_tui.app import SupervisorApp
from durableagent_tui.dialogs import ApproveDialog, ConfirmDialog, HelpScreen, ReconcileDialog
from durableagent_tui.sample import T0, build_sample_store

SIZE = (120, 36)


def journal(root: Path, run_id: str) -> bytes:
    return (root / f"{run_id}.jsonl").read_bytes()


def signals(root: Path, run_id: str) -> list[dict[str, object]]:
    return [r.data for r in FileStore(root).load(run_id) if r.type == "signal"]


def nothing_under_way(app: SupervisorApp) -> bool:
    """No dialog write is running or queued."""
    return not any(w.group == "write" for w in app.workers)


async def settle(pilot: object) -> None:
    """Let any write a key may have started finish (a thread worker), then the screen."""
    app = pilot.app  # type: ignore[attr-defined]
    await app.workers.wait_for_complete()
    await pilot.pause()  # type: ignore[attr-defined]


async def test_a_click_and_enter_on_a_pending_call_only_select_it(sample: Path) -> None:
    before = journal(sample, "billing-1042")
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a")
        dialog = app.screen
        assert isinstance(dialog, ApproveDialog)
        calls = dialog.query_one("#calls", OptionList)
        assert await pilot.click(calls, offset=(4, 1))
        await pilot.click(calls, offset=(4, 1))  # a double click too
        await pilot.press("enter")
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is dialog  # still open, still asking
        assert not dialog.busy and nothing_under_way(app)
        assert calls.highlighted == 0
    assert journal(sample, "billing-1042") == before


async def test_the_buttons_name_the_call_and_take_no_focus(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a")
        dialog = app.screen
        labels = [str(b.label) for b in dialog.query(Button)]
        assert labels == ["Approve create_ticket", "Deny create_ticket…"]
        assert not any(b.can_focus for b in dialog.query(Button))
        for _ in range(4):  # tab goes round the calls, the reason box and the story only
            await pilot.press("tab")
            assert not isinstance(app.focused, Button)


async def test_clicking_the_approve_button_approves_the_selected_call(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a")
        assert await pilot.click("#approve")
        await until(pilot, lambda: bool(signals(sample, "billing-1042")))
        [sig] = signals(sample, "billing-1042")
        assert sig["name"] == "approve"


async def test_deny_asks_why_in_the_one_reason_box(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a", "d")
        dialog = app.screen
        assert isinstance(dialog, ApproveDialog)  # no second dialog
        assert app.focused is dialog.query_one("#reason", Input)
        assert "Deny create_ticket (tool/2/0/create_ticket)?" in screen_text(app)
        await pilot.press(*"use the finance form", "enter")
        await until(pilot, lambda: bool(signals(sample, "billing-1042")))
        [sig] = signals(sample, "billing-1042")
        assert (sig["name"], sig["reason"]) == ("deny", "use the finance form")
        assert len(app.screen_stack) == 1


async def test_a_reason_typed_right_after_d_is_the_reason_even_when_it_starts_with_y(
    sample: Path,
) -> None:
    """d, then 'yes, but not today' at typing speed: the y is the reason's first letter, never
    the approve key of the calls list that had the focus a moment before."""
    before = journal(sample, "billing-1042")
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a")
        dialog = app.screen
        assert isinstance(dialog, ApproveDialog)
        burst(app, "d", *"yes, but not today")
        await settle(pilot)
        assert journal(sample, "billing-1042") == before  # nothing approved
        assert app.screen is dialog and dialog.denying is not None
        assert dialog.query_one("#reason", Input).value == "yes, but not today"
        await pilot.press("enter")
        await until(pilot, lambda: bool(signals(sample, "billing-1042")))
        [sig] = signals(sample, "billing-1042")
        assert (sig["name"], sig["reason"]) == ("deny", "yes, but not today")


async def test_a_reason_typed_before_d_goes_with_the_deny(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a", "tab", *"wrong queue", "shift+tab", "d")
        assert app.screen.query_one("#reason", Input).value == "wrong queue"
        await pilot.press("enter")
        await until(pilot, lambda: bool(signals(sample, "billing-1042")))
        [sig] = signals(sample, "billing-1042")
        assert (sig["name"], sig["reason"]) == ("deny", "wrong queue")


async def test_enter_in_the_reason_box_sends_nothing_unless_denying(sample: Path) -> None:
    before = journal(sample, "billing-1042")
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a", "tab", *"looks fine", "enter")
        await settle(pilot)
        dialog = app.screen
        assert isinstance(dialog, ApproveDialog)
        assert app.focused is dialog.query_one("#calls")  # back to the calls, reason kept
        assert dialog.query_one("#reason", Input).value == "looks fine"
        assert journal(sample, "billing-1042") == before
        await pilot.press("y")  # now the deliberate key, with the reason
        await until(pilot, lambda: bool(signals(sample, "billing-1042")))
        [sig] = signals(sample, "billing-1042")
        assert (sig["name"], sig["reason"]) == ("approve", "looks fine")


async def test_esc_leaves_the_deny_question_and_writes_nothing(sample: Path) -> None:
    before = journal(sample, "billing-1042")
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a", "d", *"hmm", "escape")
        dialog = app.screen
        assert isinstance(dialog, ApproveDialog)  # the first esc only leaves the question
        assert dialog.denying is None
        assert "Deny create_ticket (" not in screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        assert len(app.screen_stack) == 1
    assert journal(sample, "billing-1042") == before


async def test_the_key_line_and_help_name_every_key_that_acts(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=(160, 48)) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a")
        keys = line_with(app, "esc close")
        for shown in ("y approve", "d deny", "A approve all", "tab reason"):
            assert shown in keys
        assert "enter or a click selects" in screen_text(app)
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        for shown in (
            "y approve it",
            "d deny it",
            "A approve all",
            "enter or a click only selects",
            "R          retry a failed run",
            "r          reconcile",
            "a          approve or deny",
            "n          the next run needing a human",
            "j k ↓ ↑    move",
            "g G        first / last row (home / end too)",
            "esc        back: record → timeline → runs",
            "q  ctrl+c  quit",
            "y retries, enter does not",
        ):
            assert shown in text, shown


KEY_NAMES = {"question_mark": "?", "slash": "/", "escape": "esc"}


async def test_help_and_the_readme_name_every_key_the_app_binds(sample: Path) -> None:
    """Each key of the app (``w`` the workers among them: help omitted it) has a line, or a
    mention, in ``?`` help, and is in README's "Keys:" line."""
    import re

    keys = {KEY_NAMES.get(b.key, b.key) for b in SupervisorApp.BINDINGS if isinstance(b, Binding)}
    keys -= {"enter"}  # the filter's "done": enter is named for what it does elsewhere
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    line = readme[readme.index("Keys: ") :].split("\n\n", 1)[0]
    app = make_app(sample)
    async with app.run_test(size=(160, 60)) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = screen_text(app)
    for key in sorted(keys):
        assert re.search(rf"(^|\s){re.escape(key)}(\s|,|$)", text, re.M), f"help omits {key}"
        assert f"`{key}`" in line, f"README's Keys line omits {key}"
    assert "w          the workers" in text


async def test_retry_needs_y_in_its_confirmation_and_enter_does_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root)
    before = journal(root, "vpn-1043")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r", "shift+tab", "down", "enter")
        assert isinstance(app.screen, ConfirmDialog)
        assert "Retry tool/2/0/create_ticket" in screen_text(app)
        await pilot.press("enter", "enter", "space")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        assert journal(root, "vpn-1043") == before
        await pilot.press("n")
        assert isinstance(app.screen, ReconcileDialog)
        await settle(pilot)
        assert journal(root, "vpn-1043") == before


async def test_choosing_done_with_a_typed_result_only_goes_to_the_box(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root)
    before = journal(root, "vpn-1043")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r", *"TICKET-5")
        dialog = app.screen
        assert isinstance(dialog, ReconcileDialog)
        choice = dialog.query_one("#choice", OptionList)
        await pilot.click(choice, offset=(3, 0))  # "done"
        await pilot.press("shift+tab", "enter")  # and enter on it
        await settle(pilot)
        assert app.screen is dialog
        assert app.focused is dialog.query_one("#result")
        assert journal(root, "vpn-1043") == before
        await pilot.press("enter")  # enter in the box, on what was typed: that records it
        await until(pilot, lambda: len(signals(root, "vpn-1043")) == 2)
        assert signals(root, "vpn-1043")[-1]["payload"]["result"] == "TICKET-5"


async def test_buttons_and_keys_stay_on_screen_when_the_story_and_calls_scroll(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "long-5", T0)
    j.start("Please do five things. " * 8)
    for turn in range(1, 4):
        j.asks(turn, ToolCall("c", "lookup", {"q": "x" * 90}))
        j.tool(f"tool/{turn}/0/lookup", "found " * 30)
    calls = [ToolCall(f"c{i}", "create_ticket", {"summary": f"item {i} " * 12}) for i in range(3)]
    j.outcome(Status.AWAITING_APPROVAL, pending=tuple(j.asks(4, *calls)))
    app = make_app(root)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("a")
        lines = screen_lines(app)
        foot = next(i for i, line in enumerate(lines) if "▄▄▄▄▄▄▄▄" in line)
        assert "Approve create_ticket" in lines[foot - 2]
        assert "y approve" in lines[foot - 1]  # right above the dialog's foot: no blank rows
