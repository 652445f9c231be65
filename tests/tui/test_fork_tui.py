"""Fork from the TUI (``f`` on a timeline row), lineage both ways, and a signal's author,
reason and effect in the record pane: what lands on disk, and only after a ``y``."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

import pytest
from tuihelpers import loaded, make_app, record_pane, screen_text, select, until, unwrapped

from durableagent import FileStore, Message, Status, ToolCall, forked_from
from durableagent.testing import JournalWriter
from durableagent_tui import acting
from durableagent_tui.app import SupervisorApp
from durableagent_tui.dialogs import ConfirmDialog, ForkDialog
from durableagent_tui.sample import T0

SIZE = (120, 36)
TICKET = ToolCall("c1", "create_ticket", {"summary": "printer on fire"})


def approved_store(root: Path) -> FileStore:
    """``printer-1``: asks for a ticket, alice approves it (with a reason), the ticket is
    filed, the model answers. Seqs: 1 run.started, 2-3 llm/1, 4 signal, 5-6 the write,
    7-8 llm/2, 9 run.completed."""
    store = FileStore(root)
    j = JournalWriter(store, "printer-1", T0)
    with j.attempt("worker-1"):
        j.start("The printer is on fire.")
        (pending,) = j.asks(1, TICKET, says="Filing a ticket.")
        j.signal("approve", {"marker": pending.marker}, "alice", "[b]urgent[/b], fire")
        j.tool("tool/1/0/create_ticket", "T-77", write=True)
        answer = Message("assistant", "Filed T-77.")
        j.model(2, answer)
        j.add("run.completed", data={"message": answer.to_dict()})
        j.outcome(Status.COMPLETED, message=answer)
    return store


async def on_seq(app: SupervisorApp, seq: int) -> None:
    """Put the timeline's cursor on record ``seq``."""
    app.timeline.focus()
    app.timeline.move_cursor(row=app.timeline.get_row_index(str(seq)), animate=False)


async def open_fork(pilot, app: SupervisorApp, seq: int) -> ForkDialog:  # type: ignore[no-untyped-def]
    await loaded(pilot)
    await on_seq(app, seq)
    await pilot.pause()
    await pilot.press("f")
    await until(pilot, lambda: isinstance(app.screen, ForkDialog))
    assert isinstance(app.screen, ForkDialog)
    return app.screen


async def ask(pilot, app: SupervisorApp) -> None:  # type: ignore[no-untyped-def]
    """enter in the fork dialog: the question comes up (nothing is written yet)."""
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))


async def say_yes(pilot, app: SupervisorApp) -> None:  # type: ignore[no-untyped-def]
    """y to the question; both dialogs close once the fork has returned (all copied)."""
    await pilot.press("y")
    await until(pilot, lambda: not isinstance(app.screen, ConfirmDialog | ForkDialog))


async def test_f_on_a_step_forks_only_after_y_naming_both_runs(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = approved_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        dialog = await open_fork(pilot, app, 7)  # llm/2's start
        assert dialog.step == "llm/2"
        text = screen_text(app)
        assert "Fork  printer-1  at llm/2" in text
        assert dialog.new_id == "printer-1-fork"  # prefilled, editable
        assert "1 model call and 1 tool call" in text
        assert "keeps 1 decision on the same calls" in text
        await pilot.press("ctrl+a", "ctrl+k", *"printer-2", "tab", *"prompt fixed")
        await ask(pilot, app)
        question = screen_text(app)
        assert "Fork printer-1 at llm/2 as printer-2?" in question
        assert "printer-1 is not changed" in question
        assert "signals keeps 1 decision on the same calls" in question
        assert "reason  prompt fixed" in question
        await pilot.press("enter", "enter")  # enter never says yes
        assert isinstance(app.screen, ConfirmDialog)
        assert store.summary("printer-2") is None
        await pilot.press("y")
        await until(pilot, lambda: store.summary("printer-2") is not None)
        await until(pilot, lambda: not isinstance(app.screen, ForkDialog | ConfirmDialog))
        await until(pilot, lambda: any("as printer-2" in n.message for n in app._notifications))
    records = store.load("printer-2")
    origin = forked_from(records[0])
    assert origin is not None
    assert (origin.run, origin.step, origin.reason) == ("printer-1", "llm/2", "prompt fixed")
    assert origin.by == getpass.getuser()
    assert [r.step for r in records if r.type == "signal"] == ["tool/1/0/create_ticket"]
    assert not any(r.step == "llm/2" for r in records)  # runs afresh from llm/2
    assert len(store.load("printer-1")) == 9  # the original is not changed


async def test_n_in_the_question_and_esc_in_the_dialog_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = approved_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await open_fork(pilot, app, 7)
        await ask(pilot, app)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, ForkDialog))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ForkDialog))
    assert store.run_ids() == ["printer-1"]


async def test_drop_signals_is_said_in_words_and_nothing_is_carried(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = approved_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_fork(pilot, app, 7)
        dialog.query_one("#drop").value = True  # type: ignore[attr-defined]
        await pilot.pause()
        assert "drops every signal (1 decision left behind)" in screen_text(app)
        await ask(pilot, app)
        assert "signals drops every signal" in screen_text(app)
        await say_yes(pilot, app)
    assert store.summary("printer-1-fork") is not None  # the fork has returned: all copied
    assert not [r for r in store.load("printer-1-fork") if r.type == "signal"]


async def test_a_fork_the_core_refuses_is_explained_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = approved_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await open_fork(pilot, app, 7)
        await pilot.press("ctrl+a", "ctrl+k", *"printer-1")  # its own id
        assert "cannot fork: printer-1 already exists" in screen_text(app)
        await pilot.press("ctrl+a", "ctrl+k", *"bad id!")
        assert "cannot fork:" in screen_text(app)
        await pilot.press("enter")
        assert "Nothing to fork yet" in screen_text(app)
        assert isinstance(app.screen, ForkDialog)  # no question asked
    assert store.run_ids() == ["printer-1"]


async def test_an_open_write_before_the_step_refuses_the_fork(tmp_path: Path) -> None:
    # The write started and has no result: a fork after it would repeat or stop on it.
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "vpn-9", T0)
    j.start("VPN down")
    j.asks(1, TICKET, ToolCall("c2", "lookup", {"q": "vpn"}))
    j.tool("tool/1/0/create_ticket", None, write=True)  # seq 4, no result
    j.tool("tool/1/1/lookup", "found")  # seqs 5-6
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await open_fork(pilot, app, 5)
        text = screen_text(app)
        assert "cannot fork 'vpn-9' at 'tool/1/1/lookup': write step" in text
        assert "cannot fork: cannot" not in text
        assert unwrapped("Reconcile it first") in unwrapped(text)
        await pilot.press("enter")
        assert isinstance(app.screen, ForkDialog)  # no question asked
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ForkDialog))
        dialog = await open_fork(pilot, app, 4)  # at the write itself: cut before it
        assert dialog.plan is not None
    assert store.run_ids() == ["vpn-9"]


async def test_f_off_a_step_row_says_where_to_put_the_cursor(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    approved_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await on_seq(app, 9)  # run.completed: no step
        await pilot.press("f")
        await pilot.pause()
        assert not isinstance(app.screen, ForkDialog)
        assert any("step under the timeline" in n.message for n in app._notifications)


async def test_read_only_hides_fork(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    approved_store(root)
    app = make_app(root, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await on_seq(app, 7)
        await pilot.press("f")
        await pilot.pause()
        assert not isinstance(app.screen, ForkDialog)
        assert app.offers("fork") is False


async def test_lineage_is_shown_both_ways_and_the_new_fork_is_selected(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    approved_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await open_fork(pilot, app, 7)
        await pilot.press("tab", *"why not")
        await ask(pilot, app)
        await say_yes(pilot, app)
        await app._rescan()  # what the watcher does when it sees the new journal
        await until(pilot, lambda: app.table.selected_run == "printer-1-fork")
        await select(pilot, "printer-1-fork")
        title = app.timeline.border_title or ""
        assert "fork of printer-1 at llm/2" in title
        await on_seq(app, 1)
        await pilot.pause()
        said = f"forked from printer-1 at llm/2 (seq 6) by {getpass.getuser()}: why not"
        assert unwrapped(said) in record_pane(app)
        await select(pilot, "printer-1")
        await until(pilot, lambda: "forks: printer-1-fork" in (app.timeline.border_title or ""))


async def test_a_fork_the_table_shows_before_the_fork_returns_is_selected_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watcher can show the new run as soon as its first record lands, while the fork is
    still copying: the fork's end selects it then (no later change would)."""
    root = tmp_path / "runs"
    approved_store(root)
    app = make_app(root)
    real_fork = acting.actions.fork

    def fork_seen_early(*args: Any, **kwargs: Any) -> Any:
        plan = real_fork(*args, **kwargs)
        app.call_from_thread(app._rescan)  # the watcher's refresh, before the fork returns
        assert "printer-1-fork" in app.rows.summaries
        return plan

    monkeypatch.setattr(acting.actions, "fork", fork_seen_early)
    async with app.run_test(size=SIZE) as pilot:
        await open_fork(pilot, app, 7)
        await ask(pilot, app)
        await say_yes(pilot, app)
        await until(pilot, lambda: app.table.selected_run == "printer-1-fork")


async def test_the_record_pane_says_who_decided_why_and_what_came_of_it(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    approved_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await on_seq(app, 4)  # alice's approval
        await pilot.pause()
        pane = record_pane(app)
        assert unwrapped("approved by alice · create_ticket") in pane
        assert unwrapped("reason [b]urgent[/b], fire") in pane  # journal text, never markup
        assert unwrapped("effect applied: the call ran (seq 5)") in pane


async def test_a_run_selected_elsewhere_keeps_f_on_its_own_timeline(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = approved_store(root)
    j = JournalWriter(store, "other-2", T0 + 100)
    j.start("hello")
    j.model(1, Message("assistant", "hi"))
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "other-2")
        await on_seq(app, 2)
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, ForkDialog))
        assert isinstance(app.screen, ForkDialog)
        assert (app.screen.view.run_id, app.screen.step) == ("other-2", "llm/1")
