"""``p`` shows the selected run's recovery plan (the core's ``plan()``): what its next attempt
will do with each step and where it stops; ``esc`` goes back. It only shows."""

from __future__ import annotations

from pathlib import Path

from tuihelpers import loaded, make_app, screen_text, select, toast_text, until

from durableagent_tui.dialogs import PlanScreen
from durableagent_tui.sample import AUDIT

SIZE = (120, 36)


def journal(root: Path, run_id: str) -> bytes:
    return (root / f"{run_id}.jsonl").read_bytes()


async def test_p_shows_where_an_indeterminate_run_will_stop(sample: Path) -> None:
    before = journal(sample, "vpn-1043")
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("p")
        assert isinstance(app.screen, PlanScreen)
        text = " ".join(screen_text(app).split())
        assert "Recovery plan vpn-1043 ✖ indeterminate" in text
        assert "it stops at tool/2/0/create_ticket: an open write nobody reconciled" in text
        assert "→ ✖ blocked tool/2/0/create_ticket a write started at seq 9" in text
        assert "✓ replay llm/1 has a result (seq 3)" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, PlanScreen)
        assert app.table.has_focus
    assert journal(sample, "vpn-1043") == before  # showing writes nothing


async def test_p_on_a_killed_run_says_what_replays_and_what_runs_again(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, AUDIT)
        await pilot.press("p")
        text = " ".join(screen_text(app).split())
        assert "it runs on from llm/3 (re-run)" in text
        assert text.count("✓ replay") == 4
        assert "↻ re-run llm/3 a model call started at seq 11 with no result: called again" in text


async def test_p_on_a_run_awaiting_approval_stops_at_its_turn(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "billing-1042")
        await pilot.press("p")
        text = " ".join(screen_text(app).split())
        assert "waiting for a human to approve or deny create_ticket" in text
        assert "→ ▲ waiting tool/2/0/create_ticket waits for a human" in text


async def test_p_on_a_corrupt_run_says_there_is_no_plan(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await select(pilot, "broken-1040")
        await pilot.press("p")
        await until(pilot, lambda: "its journal does not load; no plan" in toast_text(app))
        assert not isinstance(app.screen, PlanScreen)


async def test_p_works_read_only(sample: Path) -> None:
    app = make_app(sample, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "vpn-1043")
        await pilot.press("p")
        assert isinstance(app.screen, PlanScreen)
