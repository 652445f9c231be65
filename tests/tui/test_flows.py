"""Pilot tests: what an on-call human does, and what they see and what lands on disk."""

from __future__ import annotations

import getpass
import subprocess
import sys
from pathlib import Path

import pytest
from textual.app import ScreenStackError
from tuihelpers import following, loaded, make_app, select, until

from durableagent import FileStore, RunStatus, Status, ToolCall, signal
from durableagent.testing import JournalWriter
from durableagent_tui.app import SupervisorApp
from durableagent_tui.dialogs import ApproveDialog, ConfirmDialog, ReconcileDialog
from durableagent_tui.runs_table import RunsTable
from durableagent_tui.sample import T0, build_sample_store

SIZE = (120, 36)


def signals(root: Path, run_id: str) -> list[dict[str, object]]:
    return [r.data for r in FileStore(root).load(run_id) if r.type == "signal"]


def records_shown(app: SupervisorApp) -> int:
    """Timeline rows that are records (not an attempt's divider)."""
    return sum(1 for row in app.timeline.ordered_rows if str(row.key.value).isdigit())


def status_of(app: SupervisorApp, run_id: str) -> str:
    return app.table.get_row(run_id)[0].plain


def awaiting_store(root: Path) -> FileStore:
    """Two runs awaiting approval (older one first asked) and one with two pending calls."""
    store = FileStore(root)
    for rid, start in (("older-1", T0), ("newer-2", T0 + 600)):
        j = JournalWriter(store, rid, start)
        j.start("help")
        pending = j.asks(1, ToolCall("c1", "create_ticket", {"summary": rid}))
        j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
    j = JournalWriter(store, "pair-3", T0 + 60)
    j.start("two things")
    pending = j.asks(
        1,
        ToolCall("c1", "create_ticket", {"summary": "one"}),
        ToolCall("c2", "close_ticket", {"id": "T-1"}),
    )
    j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
    return store


async def test_n_a_y_approves_the_top_pending_call_in_three_keys(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    awaiting_store(root)
    app = make_app(root, live=True)
    keys = ["n", "a", "y"]
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        top = app.table.shown()[0]
        assert top == "newer-2"  # newest activity first within the awaiting group
        await pilot.press(*keys)
        await until(pilot, lambda: bool(signals(root, top)))
        [sig] = signals(root, top)
        assert sig["name"] == "approve"
        assert sig["by"] == getpass.getuser()
        # The row follows the record once the watcher sees it, with no key pressed.
        await until(pilot, lambda: status_of(app, top) == "○ ready")
        assert not signals(root, "older-1")
    assert len(keys) == 3


async def test_approve_all_approves_every_pending_call(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    awaiting_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "pair-3")
        await pilot.press("a", "tab", *"both fine", "shift+tab", "A")
        await until(pilot, lambda: len(signals(root, "pair-3")) == 2)
        assert {s["name"] for s in signals(root, "pair-3")} == {"approve"}
        assert {s["reason"] for s in signals(root, "pair-3")} == {"both fine"}
        await until(pilot, lambda: not isinstance(app.screen, ApproveDialog))


async def test_deny_asks_for_a_reason_and_records_it(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    awaiting_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "newer-2")
        await pilot.press("a", "d", *"not on a friday", "enter")
        await until(pilot, lambda: bool(signals(root, "newer-2")))
        [sig] = signals(root, "newer-2")
        assert sig["name"] == "deny"
        assert sig["reason"] == "not on a friday"


async def test_n_r_result_enter_reconciles_the_oldest_indeterminate_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root, corrupt=False)
    app = make_app(root, live=True)
    keys = ["n", "r", *"TICKET-77", "enter"]
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press(*keys)
        await until(pilot, lambda: bool(signals(root, "vpn-1043")[1:]))
        sig = signals(root, "vpn-1043")[-1]
        assert sig["name"] == "reconcile"
        assert sig["payload"] == {
            "step": "tool/2/0/create_ticket",
            "outcome": "done",
            "result": "TICKET-77",
        }
        await until(pilot, lambda: status_of(app, "vpn-1043") == "○ ready")
    assert len(keys) == 2 + len("TICKET-77") + 1  # n, r, the result, enter


async def test_reconcile_retry_asks_for_confirmation_first(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r", "shift+tab", "down", "enter")
        assert isinstance(app.screen, ConfirmDialog)
        assert len(signals(root, "vpn-1043")) == 1  # nothing written before the answer
        await pilot.press("y")
        await until(pilot, lambda: len(signals(root, "vpn-1043")) == 2)
        assert signals(root, "vpn-1043")[-1]["payload"] == {
            "step": "tool/2/0/create_ticket",
            "outcome": "retry",
            "result": None,
        }


async def test_toast_shows_a_result_with_markup_literally(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r", *"[/oops] [link=x]", "enter")
        await until(pilot, lambda: len(signals(root, "vpn-1043")) == 2)
        await until(pilot, lambda: "[/oops]" in app.export_screenshot().replace("&#160;", " "))
        assert signals(root, "vpn-1043")[-1]["payload"]["result"] == "[/oops] [link=x]"


async def test_reconcile_done_without_a_result_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r", "enter")
        assert isinstance(app.screen, ReconcileDialog)
        assert "Type the result" in str(app.screen.query_one("#error").render())
        assert len(signals(root, "vpn-1043")) == 1


async def test_filter_by_status_or_id_and_escape_clears(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("/", *"await")
        assert sorted(app.table.shown()) == ["billing-1042", "markup-1048"]
        await pilot.press("enter")
        assert app.table.has_focus
        await pilot.press("/", "ctrl+a", "ctrl+k", *"vpn")
        assert app.table.shown() == ["vpn-1043"]
        await pilot.press("escape")
        assert app.table.row_count == 9


async def test_n_walks_runs_needing_a_human_in_the_order_the_table_shows(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        seen = []
        for _ in range(6):
            await pilot.press("n")
            seen.append(app.table.selected_run)
        needing = [rid for rid in app.table.shown() if app.summaries[rid].needs_human]
        assert seen == [*needing, needing[0]]  # top to bottom, then round again
        # corrupt, indeterminate, awaiting (newest first, as the table sorts), failed
        assert needing == ["broken-1040", "vpn-1043", "markup-1048", "billing-1042", "refund-1041"]


async def test_dialog_on_a_run_that_changed_underneath_writes_nothing(sample: Path) -> None:
    app = make_app(sample)
    store = FileStore(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("a")
        assert isinstance(app.screen, ApproveDialog)
        marker = app.summaries["billing-1042"].pending[0].marker
        signal(store, "billing-1042", "approve", {"marker": marker}, by="someone-else")
        await pilot.press("y")
        await until(pilot, lambda: app.screen.query_one("#error").display)
        assert "changed underneath" in str(app.screen.query_one("#error").render())
        assert isinstance(app.screen, ApproveDialog)  # still open, says why
        assert [s["by"] for s in signals(sample, "billing-1042")] == ["someone-else"]


async def test_record_appended_by_another_process_appears_without_a_key(sample: Path) -> None:
    app = make_app(sample, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        assert records_shown(app) == 7
        code = (
            "import sys; from durableagent import FileStore, signal, view_store\n"
            "s = FileStore(sys.argv[1]); m = view_store(s, 'billing-1042').pending[0].marker\n"
            "signal(s, 'billing-1042', 'approve', {'marker': m}, by='carol')\n"
        )
        subprocess.run([sys.executable, "-c", code, str(sample)], check=True)
        await until(pilot, lambda: records_shown(app) == 8)
        assert status_of(app, "billing-1042") == "○ ready"
        assert "approve tool/2/0/create_ticket by carol" in app.timeline.get_row("8")[-1].plain


async def test_a_store_given_as_a_relative_path_is_watched_too(
    sample: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watcher reports absolute paths: a relative --store (the demo's default) must match.
    monkeypatch.chdir(sample.parent)
    app = make_app(Path(sample.name), live=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.pause(0.6)  # past the settle-time rescan: only a watch event can help now
        before = app.table.row_count
        code = (
            "import sys; from durableagent import FileStore, Message, submit\n"
            "submit(FileStore(sys.argv[1]), 'late-2000', [Message('user', 'hi')])\n"
        )
        subprocess.run([sys.executable, "-c", code, str(sample)], check=True)
        await until(pilot, lambda: app.table.row_count == before + 1)
        assert status_of(app, "late-2000") == "○ ready"


async def test_lease_taken_and_released_shows_running_then_not(sample: Path) -> None:
    app = make_app(sample, live=True)
    store = FileStore(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        with store.lease("onboard-1047"):
            await until(pilot, lambda: status_of(app, "onboard-1047") == "● running")
        await until(pilot, lambda: status_of(app, "onboard-1047") == "○ ready")


async def test_corrupt_journal_shows_line_and_reason(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert app.table.shown()[0] == "broken-1040"
        assert status_of(app, "broken-1040") == "⊘ corrupt"
        assert "line 2: crc mismatch" in app.table.get_row("broken-1040")[5].plain
        assert app.timeline.run_id == "broken-1040"
        summary = app.timeline.get_row("corrupt")[-1].plain
        assert "line 2: " in summary and "crc mismatch" in summary
        assert app.summaries["broken-1040"].status == RunStatus.CORRUPT


async def test_markup_in_arguments_is_shown_literally(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "markup-1048")
        summary = app.timeline.get_row("7")[-1]
        literal = "[/oops] [link=x]click[/link] [bold red]loud"
        assert literal in summary.plain
        start = summary.plain.index(literal)
        # No style came from the journal text (the step name before it may be bold).
        assert all(span.end <= start for span in summary.spans)
        await pilot.press("a")
        assert isinstance(app.screen, ApproveDialog)
        svg = app.export_screenshot()
        assert "oops" in svg and "link=x" in svg
        await pilot.press("escape")
        assert not isinstance(app.screen, ApproveDialog)


async def test_empty_store_says_so(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    FileStore(root).close()  # a new store, no run yet (a plain empty directory is no store)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert app.table.row_count == 0
        assert "No runs in runs/ yet" in str(app.query_one("#empty").render())


async def test_missing_store_is_not_created_and_fills_in_when_it_appears(tmp_path: Path) -> None:
    root = tmp_path / "nowhere"
    app = make_app(root, live=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "No store at runs/" in str(app.query_one("#empty").render())
        assert not root.exists()
        build_sample_store(root, corrupt=False)
        await until(pilot, lambda: app.table.row_count == 8, timeout=30)


async def test_a_message_handled_after_the_screens_are_gone_draws_nothing(sample: Path) -> None:
    """A highlight or a refresh that lands as the app shuts down (its screens already gone)
    is dropped, never an error that fails the app (seen on a loaded CI machine)."""
    app = make_app(sample, live=False)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        table = app.table
    with pytest.raises(ScreenStackError):
        app.screen  # noqa: B018  (the app's screens are gone)
    app._run_highlighted(RunsTable.Highlighted(table, "billing-1042"))
    app._show_detail()
    assert app.selected is None


async def test_read_only_hides_every_action(sample: Path) -> None:
    app = make_app(sample, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        assert app.check_action("approve", ()) is False
        assert app.check_action("reconcile", ()) is False
        await pilot.press("a")
        assert not isinstance(app.screen, ApproveDialog)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Approve or deny" not in titles


async def test_actions_grey_out_when_the_run_offers_none(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "laptop-1039")
        assert app.check_action("approve", ()) is None
        assert app.check_action("reconcile", ()) is None
        await select(pilot, "vpn-1043")
        assert app.check_action("reconcile", ()) is True
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Reconcile" in titles


async def test_the_filter_status_paused_finds_a_paused_run_awaiting_approval(
    tmp_path: Path,
) -> None:
    """A pause on a run awaiting approval leaves it showing awaiting (then held: paused);
    ``/status:paused`` and the bare word ``paused`` still find it."""
    root = tmp_path / "runs"
    store = awaiting_store(root)
    signal(store, "pair-3", "pause", {}, by="ana", reason="look first")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert app.summaries["pair-3"].status == RunStatus.AWAITING_APPROVAL
        await pilot.press("/", *"status:paused")
        await until(pilot, lambda: app.table.shown() == ["pair-3"])
        await pilot.press("ctrl+a", "ctrl+k", *"paused")
        await until(pilot, lambda: app.table.shown() == ["pair-3"])


async def test_esc_on_the_filter_keeps_the_chosen_run_selected(sample: Path) -> None:
    """A filter that hid the selected run moved the cursor; esc put it on row 1, so the next
    P paused another run. The run chosen before the filter is selected again after esc, and
    a filter typed key by key (``status`` matches nothing on the way) keeps it when it shows."""
    from durableagent_tui.dialogs.control import ControlDialog

    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "wifi-1046")
        await pilot.press("/", *"status:awaiting")
        await until(pilot, lambda: sorted(app.table.shown()) == ["billing-1042", "markup-1048"])
        assert app.table.selected_run != "wifi-1046"
        await pilot.press("escape")
        await until(pilot, lambda: app.table.row_count == 9)
        assert app.table.selected_run == "wifi-1046"
        await until(pilot, lambda: following(app))
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ControlDialog))
        assert app.screen.view.run_id == "wifi-1046"
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ControlDialog))
        await select(pilot, "billing-1042")
        await pilot.press("/", *"status:awaiting")
        await until(pilot, lambda: sorted(app.table.shown()) == ["billing-1042", "markup-1048"])
        assert app.table.selected_run == "billing-1042"
        await pilot.press("escape")
        await until(pilot, lambda: app.table.row_count == 9)
        assert app.table.selected_run == "billing-1042"
