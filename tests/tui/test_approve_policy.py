"""The approve dialog says what class a pending call's tool has and where that came from (an
MCP tool's annotations, an override, the untrusted default), as journal text: never markup."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tuihelpers import loaded, make_app, select

from durableagent import FileStore, Status, ToolCall
from durableagent.testing import JournalWriter
from durableagent_tui.dialogs import ApproveDialog
from durableagent_tui.sample import T0

POLICY = (
    "idempotent write, needs approval · class from override · MCP server '[b]tickets' · "
    '"File a ticket", closed world'
)


async def test_the_approve_dialog_shows_where_a_calls_class_came_from(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    j = JournalWriter(FileStore(root), "mcp-1", T0)
    j.start("file it")
    pending = j.asks(1, ToolCall("c1", "create_ticket", {"summary": "printer"}))
    j.outcome(
        Status.AWAITING_APPROVAL,
        pending=tuple(dataclasses.replace(p, policy=POLICY) for p in pending),
    )
    app = make_app(root)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(pilot)
        await select(pilot, "mcp-1")
        await pilot.press("a")
        assert isinstance(app.screen, ApproveDialog)
        svg = app.export_screenshot()
        assert "class&#160;from&#160;override" in svg or "class from override" in svg
        assert "[b]tickets" in svg.replace("&#160;", " ")
