"""Cancel, pause and resume from the TUI (``c``, ``P``): a dialog that says what the control
does, asks why, and writes the same signal as ``agentrun cancel``/``pause``/``resume`` only on
``y``; enter never writes, a missing reason writes nothing, and a run that does not take the
control says why."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from textual.widgets import Input
from tuihelpers import burst, loaded, make_app, screen_text, select, until

from durableagent import FileStore, Message, Status, ToolCall, signal
from durableagent.testing import JournalWriter
from durableagent_tui.app import SupervisorApp
from durableagent_tui.dialogs import ApproveDialog
from durableagent_tui.dialogs.budget import BudgetDialog
from durableagent_tui.dialogs.control import ControlDialog
from durableagent_tui.sample import NOW, T0

SIZE = (120, 36)


def said(app: SupervisorApp, text: str) -> bool:
    """A toast with ``text`` was raised (a written control's toast comes up on the main screen
    as the dialog closes)."""
    return any(text in n.message for n in app._notifications)


def journal_bytes(root: Path, run_id: str) -> bytes:
    return (root / f"{run_id}.jsonl").read_bytes()


def build(root: Path) -> FileStore:
    store = FileStore(root)
    ready = JournalWriter(store, "looping", T0)
    ready.start("summarise the tickets")
    done = JournalWriter(store, "finished", T0)
    done.start("say hi")
    done.model(1, Message("assistant", "hi"))
    done.add("run.completed", data={"answer": Message("assistant", "hi").to_dict()})
    done.outcome(Status.COMPLETED)
    held = JournalWriter(store, "held", T0)
    held.start("wait")
    signal(store, "held", "pause", {}, by="ana", reason="vendor outage")
    return store


async def test_c_asks_why_and_y_cancels_with_the_reason(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = build(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "looping")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ControlDialog))
        text = screen_text(app)
        assert "Cancel run  looping" in text
        assert "No step of it starts again" in text
        before = journal_bytes(root, "looping")
        # y while typing is a letter of the reason; enter leaves the box and writes nothing.
        await pilot.press(*"bad prompt, y", "enter")
        await pilot.pause()
        assert journal_bytes(root, "looping") == before
        await pilot.press("y")
        await until(pilot, lambda: not isinstance(app.screen, ControlDialog))
        await until(pilot, lambda: said(app, "cancelled looping"))
    last = store.load("looping")[-1]
    assert (last.type, last.data["name"]) == ("signal", "cancel")
    assert last.data["reason"] == "bad prompt, y"
    assert last.data["by"]


async def test_a_cancel_without_a_reason_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build(root)
    before = journal_bytes(root, "looping")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "looping")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ControlDialog))
        await pilot.press("enter", "y")
        await until(pilot, lambda: "needs a reason" in screen_text(app))
        assert isinstance(app.screen, ControlDialog)  # still open, nothing written
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ControlDialog))
    assert journal_bytes(root, "looping") == before


async def test_P_pauses_a_run_and_resumes_a_paused_one(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = build(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "held")
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ControlDialog))
        text = screen_text(app)
        assert "Resume run  held" in text
        assert "paused by ana" in text and "vendor outage" in text
        await pilot.press("enter", "y")  # a resume's reason is optional
        await until(pilot, lambda: said(app, "resumed held"))
        await select(pilot, "looping")
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ControlDialog))
        assert "Pause run  looping" in screen_text(app)
        await pilot.press(*"wait for the fix", "enter", "y")
        await until(pilot, lambda: said(app, "paused looping"))
    assert [r.data["name"] for r in store.load("held") if r.type == "signal"] == [
        "pause",
        "resume",
    ]
    (paused,) = [r for r in store.load("looping") if r.type == "signal"]
    assert (paused.data["name"], paused.data["reason"]) == ("pause", "wait for the fix")


async def test_c_on_a_finished_run_says_why_and_opens_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build(root)
    before = journal_bytes(root, "finished")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "finished")
        await pilot.press("c")
        await until(pilot, lambda: said(app, "finished has nothing to cancel: it is completed"))
        assert not isinstance(app.screen, ControlDialog)
    assert journal_bytes(root, "finished") == before


async def test_the_approve_dialog_says_when_an_approval_lapses(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "ticket", T0)
    j.start("open a ticket")
    (p,) = j.asks(1, ToolCall("c1", "create_ticket", {"title": "vpn"}))
    lapse = NOW + 2 * 3600
    j.outcome(
        Status.AWAITING_APPROVAL, pending=(replace(p, deadline_at=lapse, approve_within=7200.0),)
    )
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "ticket")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ApproveDialog))
        when = time.strftime("%H:%M:%S", time.localtime(lapse))
        assert f"lapses at {when} (in 2h): then it is denied, never approved" in screen_text(app)


async def test_a_budgeted_run_shows_spent_against_its_limit(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "capped", T0)
    j.add("run.started", data={"input": [], "budget": {"tokens": 50000, "model_calls": 4}})
    j.add("step.started", "llm/1", "model")
    reply = Message("assistant", "thinking", usage={"input_tokens": 1200, "output_tokens": 300})
    j.add("step.completed", "llm/1", "model", reply.to_dict())
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "capped")
        assert "timeline · tokens 1,500 of 50,000 · model calls 1 of 4" in screen_text(app)


async def test_B_raises_the_budget_of_a_run_stopped_over_it(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "capped", T0)
    j.add("run.started", data={"input": [], "budget": {"model_calls": 1}})
    j.model(1, Message("assistant", tool_calls=(ToolCall("c1", "lookup", {}),)))
    j.outcome(Status.OVER_BUDGET, error="over budget: model calls: 1 made of a limit of 1")
    bare = JournalWriter(store, "bare", T0)
    bare.start("no budget")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "bare")
        await pilot.press("B")
        await until(pilot, lambda: said(app, "bare has no budget to raise"))
        await select(pilot, "capped")
        await pilot.press("B")
        await until(pilot, lambda: isinstance(app.screen, BudgetDialog))
        text = screen_text(app)
        assert "model calls 1 of 1" in text and "over budget: model calls" in text
        before = journal_bytes(root, "capped")
        await pilot.press(*"model_calls=lots", "enter", *"why", "enter", "y")
        await until(pilot, lambda: "model_calls takes a whole number" in screen_text(app))
        assert journal_bytes(root, "capped") == before  # nothing written
        limits = app.screen.query_one("#limits", Input)
        limits.value = "model_calls=0"  # the same grammar as the command line's
        await pilot.press("y")
        await until(pilot, lambda: "model_calls takes a whole number from 1" in screen_text(app))
        assert journal_bytes(root, "capped") == before
        limits.value = "model_calls=3"
        await pilot.press("y")
        await until(pilot, lambda: said(app, "budget of capped is now model calls 4"))
    last = store.load("capped")[-1]
    assert last.data["name"] == "budget" and last.data["payload"] == {"add": {"model_calls": 3}}
    assert last.data["reason"] == "why"


def test_every_way_an_attempt_ends_has_its_words_and_its_look() -> None:
    from durableagent.attempts import ENDINGS
    from durableagent_tui.attempt_looks import ENDING_LOOKS

    for status in Status:
        assert str(status) in ENDINGS and str(status) in ENDING_LOOKS, status


async def test_keys_typed_fast_land_where_they_are_meant(tmp_path: Path) -> None:
    """Keys queued at once (a paste, a fast typist): enter moves on before the next key is
    handled, so the ``y`` after it confirms instead of ending the reason with a y."""
    root = tmp_path / "runs"
    store = build(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "looping")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ControlDialog))
        burst(app, *"why", "enter", "y")
        await until(pilot, lambda: said(app, "cancelled looping"))
    assert store.load("looping")[-1].data["reason"] == "why"


async def test_B_labels_its_boxes_and_shows_the_new_limits_before_y(tmp_path: Path) -> None:
    """The boxes keep their labels (``add``, ``why``) while they are typed in (the label was
    the placeholder, gone at the first key), and the limits the run would have show as the
    limits are typed, or why ``y`` would be refused; nothing is written before ``y``."""
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "capped", T0)
    j.add("run.started", data={"input": [], "budget": {"model_calls": 1}})
    j.model(1, Message("assistant", tool_calls=(ToolCall("c1", "lookup", {}),)))
    j.outcome(Status.OVER_BUDGET, error="over budget: model calls: 1 made of a limit of 1")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "capped")
        await pilot.press("B")
        await until(pilot, lambda: isinstance(app.screen, BudgetDialog))
        before = journal_bytes(root, "capped")
        await pilot.press(*"model_calls=3")
        await until(pilot, lambda: "new limits  model calls 1 of 4" in screen_text(app))
        lines = screen_text(app).splitlines()
        assert any(" add " in line and "model_calls=3" in line for line in lines), lines
        await pilot.press("enter", *"more room")
        lines = screen_text(app).splitlines()
        assert any(" why " in line and "more room" in line for line in lines), lines
        limits = app.screen.query_one("#limits", Input)
        limits.value = "tokens=5"
        await until(pilot, lambda: "the run has no tokens limit to raise" in screen_text(app))
        limits.value = "model_calls=lots"
        await until(pilot, lambda: "model_calls takes a whole number" in screen_text(app))
        assert journal_bytes(root, "capped") == before  # nothing written before y
