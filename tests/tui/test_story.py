"""The whole story before deciding: the approve and reconcile dialogs show what the human needs
to judge the call, from the journal alone, and journal text is never read as markup."""

from __future__ import annotations

from pathlib import Path

import pytest
from tuihelpers import loaded, make_app, screen_text, select, until

from durableagent import (
    FileStore,
    Message,
    Pending,
    Record,
    Status,
    ToolCall,
    idempotency_key,
    marker_for,
    view_run,
    view_store,
)
from durableagent.testing import JournalWriter
from durableagent_tui import story
from durableagent_tui.dialogs import ApproveDialog, ReconcileDialog
from durableagent_tui.sample import HINTS, MARKUP_SAYS, NOW, T0

SIZE = (160, 48)


def two_turn_store(root: Path) -> FileStore:
    """A run whose second turn asks for a read and a write together, with words."""
    store = FileStore(root)
    j = JournalWriter(store, "drive-7", T0)
    j.start("Give Sam the finance drive.\nHe starts Monday.")
    j.asks(1, ToolCall("c1", "lookup_policy", {"topic": "drives"}))
    j.tool("tool/1/0/lookup_policy", "Drive access needs the owner's OK.\nOwner: Kim.")
    j.asks(
        2,
        ToolCall("c2", "lookup_owner", {"drive": "finance"}),
        ToolCall("c3", "grant_access", {"user": "sam", "drive": "finance"}),
        says="I'll check the owner and grant access once approved.",
    )
    pending = story.calls_of_turn(view_store(store, "drive-7"), 2)
    assert [c.state for c in pending] == ["not run", "not run"]
    step = "tool/2/1/grant_access"
    args = {"user": "sam", "drive": "finance"}
    j.outcome(
        Status.AWAITING_APPROVAL,
        pending=(Pending(marker_for(step, args), step, "grant_access", args),),
    )
    return store


async def test_approve_dialog_shows_request_earlier_results_and_the_models_words(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    two_turn_store(root)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "drive-7")
        await pilot.press("a")
        assert isinstance(app.screen, ApproveDialog)
        text = screen_text(app)
        # The request, whole (both lines), and the earlier turn's result.
        assert "Give Sam the finance drive." in text and "He starts Monday." in text
        assert (
            'lookup_policy(topic="drives") → Drive access needs the owner\'s OK. Owner: Kim.'
            in text
        )
        # What the model said with the calls, and the turn's other call, not run yet.
        assert "I'll check the owner and grant access once approved." in text
        assert 'lookup_owner(drive="finance")  not run yet' in text
        assert "turn 2  grant_access  waiting for a human (below)" in text


async def test_approve_dialog_says_when_the_call_was_asked_and_how_long_it_waited(
    sample: Path,
) -> None:
    app = make_app(sample)  # the clock is fixed at NOW
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        asked = view_store(FileStore(sample), "billing-1042").steps[-1]
        assert asked.name == "llm/2" and asked.completed_at is not None
        assert NOW - asked.completed_at == pytest.approx(49 * 60 + 53)
        await pilot.press("a")
        assert "asked   09:10:07 by llm/2 · waiting 49m" in screen_text(app)


async def test_reconcile_dialog_says_who_approved_and_when_it_started(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r")
        assert isinstance(app.screen, ReconcileDialog)
        text = screen_text(app)
        assert "started 09:05:09 (54m ago)" in text
        assert "approved by alice at 09:05:08 (54m ago): urgent" in text
        assert "request The VPN rejects my token." in text


async def test_reconcile_dialog_shows_the_tools_hint(sample: Path) -> None:
    app = make_app(sample, hints=HINTS)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r")
        assert "check   search the ticket system for the requester's name" in screen_text(app)


async def test_reconcile_dialog_without_a_hint_says_so(sample: Path) -> None:
    app = make_app(sample, hints={"send_email": "look in the outbox"})
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r")
        assert "check   no hint for create_ticket" in screen_text(app)


async def test_reconcile_dialog_shows_the_key_the_tool_was_given(sample: Path) -> None:
    # The same key a ToolContext hands the tool (durableagent.idempotency_key), so the human
    # can search the external system for it.
    started = FileStore(sample).load("vpn-1043")[0]
    key = idempotency_key("vpn-1043", "tool/2/0/create_ticket", started)
    assert key.startswith("vpn-1043:") and key.endswith(":tool/2/0/create_ticket")
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("r")
        assert isinstance(app.screen, ReconcileDialog)
        assert f"key     {key}  (given to the tool: search for it" in screen_text(app)
        assert "class   " not in screen_text(app)  # the demo's own tools declare their class


async def test_reconcile_dialog_says_where_an_mcp_writes_class_came_from(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "mcp-7", T0)
    j.start("file a ticket for the printer")
    j.asks(1, ToolCall("c1", "file_ticket", {"title": "printer"}))
    j.add(
        "step.started",
        "tool/1/0/file_ticket",
        "tool",
        {"write": True, "classified_by": "annotation"},
    )
    j.outcome(Status.INDETERMINATE, step="tool/1/0/file_ticket")
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("r")
        assert isinstance(app.screen, ReconcileDialog)
        assert "class    write, class from annotation" in screen_text(app)


async def test_journal_text_with_markup_is_shown_literally_in_the_dialogs(
    sample: Path,
) -> None:
    hints = {"create_ticket": "[red]look[/red] in [b]queue[/b] [/oops]"}
    app = make_app(sample, hints=hints)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "markup-1048")
        await pilot.press("a")
        text = screen_text(app)
        assert "[bold]escalate[/bold] this" in text  # the request
        assert MARKUP_SAYS in text  # the model's words
        assert '"summary": "[/oops] [link=x]click[/link] [bold red]loud"' in text
        assert '"queue": "[IT]"' in text
        await pilot.press("escape")

        store = FileStore(sample)
        j = JournalWriter(store, "markup-1048", T0 + 3000)
        marker = app.summaries["markup-1048"].pending[0].marker
        j.signal("approve", {"marker": marker}, "[b]mallory[/b]", "[/]")
        j.tool("tool/2/0/create_ticket", None, write=True)
        j.outcome(Status.INDETERMINATE, step="tool/2/0/create_ticket")
        app.apply(app.tracker.scan())
        await pilot.pause()
        await pilot.press("r")  # opens at once, or after reading the run's new records
        await until(pilot, lambda: isinstance(app.screen, ReconcileDialog))
        await pilot.pause()
        text = screen_text(app)
        assert "approved by [b]mallory[/b] at" in text and ": [/]" in text
        assert "[red]look[/red] in [b]queue[/b] [/oops]" in text
        assert "[bold red]loud" in text


def test_calls_of_turn_reads_a_hand_edited_model_step_without_crashing() -> None:
    records = [
        Record(1, "run.started", "", "", {"input": [Message("user", "hi").to_dict()]}, T0),
        Record(2, "step.started", "llm/1", "model", {}, T0),
        Record(3, "step.completed", "llm/1", "model", {"role": "assistant", "content": 7}, T0),
    ]
    view = view_run(records)
    assert story.calls_of_turn(view, 1) == []
    assert story.model_message(view, 1) is None
    assert story.turn_of("tool/x/0/a") is None and story.turn_of("llm/3") == 3
