"""An incompatible run in the TUI (issue 25): the header counts it with the runs that need a
human, its attempt divider names the version that ran it, and ``a`` opens a dialog with the
call's old and new schema side by side and the ways out: ``y`` accept the change, ``f`` fork,
``c`` cancel, each asking why first."""

from __future__ import annotations

from pathlib import Path

from _deploy_agents import v1, v2
from textual.widgets import Input
from tuihelpers import loaded, make_app, screen_text, select, until

from durableagent import Config, FileStore, Message, RunStatus, run, view_store
from durableagent_tui.app import SupervisorApp
from durableagent_tui.dialogs.change import ChangeDialog

SIZE = (130, 44)


async def build(root: Path) -> FileStore:
    store = FileStore(root)
    one, two = v1(root.parent), v2(root.parent)
    await run(Config(one.config, one.gate, store, one.code), "a1", [Message("user", "printer")])
    await run(Config(two.config, two.gate, store, two.code), "a1", None)
    assert view_store(store, "a1").status == RunStatus.INCOMPATIBLE
    return store


def said(app: SupervisorApp, text: str) -> bool:
    return any(text in n.message for n in app._notifications)


async def test_a_shows_old_and_new_schema_and_y_accepts_after_why(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = await build(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "a1")
        text = screen_text(app)
        assert "1 incompatible" in text  # the header's count, among those needing a human
        assert "v2 · incompatible" in text  # the attempt divider names the version
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ChangeDialog))
        text = screen_text(app)
        assert "Incompatible with version v2" in text
        assert "new required argument 'priority'" in text
        assert "before (the run's code)" in text and "now (v2)" in text
        assert '"priority"' in text  # the new schema, beside the old one
        before = store.load("a1")
        # Typing: y is a letter. Out of the box without a reason: nothing is written.
        await pilot.press("enter", "y")
        await pilot.pause()
        assert "Say why first" in screen_text(app)
        assert store.load("a1") == before
        app.screen.query_one("#reason", Input).focus()
        await pilot.press(*"v2 sets a priority", "enter", "y")
        await until(pilot, lambda: not isinstance(app.screen, ChangeDialog))
        await until(pilot, lambda: said(app, "accepted the change for a1"))
    last = store.load("a1")[-1]
    assert last.data["name"] == "accept-change" and last.data["reason"] == "v2 sets a priority"


async def test_f_forks_from_the_model_step_that_asked(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = await build(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "a1")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ChangeDialog))
        await pilot.press(*"start over under v2", "enter")
        await pilot.pause()
        assert "fork from llm/1" in screen_text(app)  # the keys, once out of the box
        await pilot.press("f")
        await until(pilot, lambda: said(app, "forked a1 at llm/1"))
    forks = [r for r in store.run_ids() if r.startswith("a1-")]
    assert len(forks) == 1
    started = store.load(forks[0])[0].data
    assert started["forked_from"]["step"] == "llm/1"
