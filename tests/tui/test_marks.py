"""Many runs at once in the TUI: the ``/`` filter speaks the query language of ``ls --where``
(a bad term is said under the box and the last good filter stays), ``space`` marks rows, and
an action on marked rows asks once, naming how many runs and which action, then applies each
on its own and says how many were applied and refused."""

from __future__ import annotations

from pathlib import Path

from test_flows import SIZE, awaiting_store, signals
from textual.widgets import Input
from tuihelpers import loaded, make_app, screen_text, select, toast_text, until

from durableagent import FileStore, Pending, RunStatus, Status, Summary, ToolCall, view_store
from durableagent.audit import decisions
from durableagent.people import login_name
from durableagent.testing import JournalWriter
from durableagent.worker import note_failure
from durableagent_tui.dialogs.bulk import BulkDialog
from durableagent_tui.runs_model import RunRows
from durableagent_tui.runs_table import MARK
from durableagent_tui.sample import T0


def journals(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.jsonl"))}


async def test_the_filter_takes_query_terms_and_bare_words(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await pilot.press("/", *"status:awaiting")
        assert sorted(app.table.shown()) == ["billing-1042", "markup-1048"]
        await pilot.press(*" -run:markup-*")
        assert app.table.shown() == ["billing-1042"]
        await pilot.press("ctrl+a", "ctrl+k", *"needs:human bill")
        assert app.table.shown() == ["billing-1042"]


async def test_a_bad_term_is_said_under_the_box_and_the_last_good_filter_stays(
    sample: Path,
) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await pilot.press("/", *"status:failed")
        good = app.table.shown()
        assert good and app.filter_text == "status:failed"
        box = app.query_one("#filter", Input)
        box.value = "status:failed colour:red"  # pasted (typed, "colour" is a word first)
        await pilot.pause()
        assert app.table.shown() == good and app.filter_text == "status:failed"
        assert "unknown field 'colour'" in screen_text(app).replace("\n", " ")
        box.value = "status:failed"
        await pilot.pause()
        assert not app.query_one("#filter-error").display
        assert app.table.shown() == good


def test_a_mark_shows_a_glyph_in_its_row_and_a_filter_keeps_it() -> None:
    rows = RunRows(lambda: T0)
    rows.update([Summary("a-1", RunStatus.FAILED), Summary("b-2", RunStatus.READY)])
    assert rows.toggle_mark("a-1") and rows.marked == {"a-1"}
    rows.set_filter("b")
    assert [s.run_id for s in rows.marked_runs()] == ["a-1"]  # hidden, still marked
    assert not rows.toggle_mark("a-1") and rows.marked == set()
    rows.toggle_mark("b-2")
    rows.update([], removed=["b-2"])
    assert rows.marked == set()  # a run gone from the store takes its mark with it


async def test_space_marks_rows_and_a_asks_once_naming_the_count_then_approves_each(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    awaiting_store(root)
    app = make_app(root, live=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await select(pilot, app.table.shown()[0])
        await pilot.press("space", "space")  # marks the first two rows (the cursor moves on)
        marked = app.table.shown()[:2]
        assert app.rows.marked == set(marked)
        for rid in marked:
            assert MARK in next(line for line in screen_text(app).splitlines() if rid in line)
        assert "2 marked" in screen_text(app)
        await pilot.press("a")
        assert isinstance(app.screen, BulkDialog)
        assert "Approve 2 marked runs?" in screen_text(app)
        before = journals(root)
        await pilot.press("enter")  # enter never says yes
        assert isinstance(app.screen, BulkDialog) and journals(root) == before
        await pilot.press("y")
        await until(pilot, lambda: "applied" in toast_text(app))
        assert "approve: 2 applied, 0 refused" in toast_text(app)
        for rid in marked:
            assert {s["name"] for s in signals(root, rid)} == {"approve"}
            assert view_store(FileStore(root), rid).pending == ()
        assert app.rows.marked == set()  # what was applied is unmarked


async def test_no_in_the_question_writes_nothing_and_keeps_the_marks(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    awaiting_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await pilot.press("space")
        before = journals(root)
        await pilot.press("a", "n")
        assert not isinstance(app.screen, BulkDialog)
        assert journals(root) == before and len(app.rows.marked) == 1


async def test_a_refused_run_among_the_marked_is_counted_in_the_toast(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = awaiting_store(root)
    j = JournalWriter(store, "done-9", T0 + 30)
    j.start("done")
    j.asks(1, ToolCall("c1", "lookup", {}))
    j.outcome(Status.FAILED, error="boom")
    app = make_app(root, live=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        for rid in ("older-1", "done-9"):
            await select(pilot, rid)
            await pilot.press("space")
        before = journals(root)
        await pilot.press("d")  # deny every pending call of the marked runs
        assert "Deny 2 marked runs?" in screen_text(app)
        await pilot.press("y")
        await until(pilot, lambda: "refused" in toast_text(app))
        assert "deny: 1 applied, 1 refused" in toast_text(app)
        assert "done-9 has no pending call to deny" in toast_text(app)
        assert journals(root)["done-9.jsonl"] == before["done-9.jsonl"]
        assert app.rows.marked == {"done-9"}  # the refused one stays marked


async def test_R_on_marked_runs_records_a_retry_signal_the_audit_shows(tmp_path: Path) -> None:
    """R on marked runs once only cleared their failure counts: no retry signal, so the
    audit could not say who retried. It writes agentrun retry's signal, by the TUI's user."""
    root = tmp_path / "runs"
    store = FileStore(root)
    for i, rid in enumerate(("broke-1", "broke-2")):
        j = JournalWriter(store, rid, T0 + i)
        j.start("do it")
        j.outcome(Status.FAILED, error="boom")
        note_failure(store, rid, RuntimeError("boom"), max_attempts=1)
    app = make_app(root, live=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        for rid in ("broke-1", "broke-2"):
            await select(pilot, rid)
            await pilot.press("space")
        await pilot.press("R")
        assert "Retry 2 marked runs?" in screen_text(app)
        await pilot.press("y")
        await until(pilot, lambda: "applied" in toast_text(app))
        assert "retry: 2 applied, 0 refused" in toast_text(app)
    for rid in ("broke-1", "broke-2"):
        last = store.load(rid)[-1]
        assert last.type == "signal"
        assert (last.data["name"], last.data["by"]) == ("retry", login_name())
        assert store.read_failures(rid) is None
        (retried,) = [d for d in decisions(store.load(rid), rid) if d.decision == "retried"]
        assert retried.by == login_name()


def test_a_query_filter_follows_live_changes() -> None:
    rows = RunRows(lambda: T0)
    rows.update([Summary(f"r-{i}", RunStatus.READY, last_activity=T0 - i) for i in range(5)])
    rows.set_filter("tool:create_ticket")
    assert rows.shown == []
    pending = (Pending("tool/1/0/create_ticket#ab", "tool/1/0/create_ticket", "create_ticket", {}),)
    rows.update([Summary("r-3", RunStatus.AWAITING_APPROVAL, last_activity=T0, pending=pending)])
    assert rows.shown == ["r-3"]
    rows.set_filter("tool:create_ticket status:awaiting")  # the first term's matches remembered
    assert rows.shown == ["r-3"]
    rows.set_filter("-tool:create_ticket")
    assert "r-3" not in rows.shown and len(rows.shown) == 4
    rows.update([Summary("r-3", RunStatus.READY, last_activity=T0)])
    assert len(rows.shown) == 5
