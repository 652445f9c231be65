"""The demo's MCP ticket server (``python -m durableagent.demo.ticket_server STORE``): it honours
the idempotency key a step sends in ``_meta``, and the demo's agent files through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mcp

from durableagent import FileStore, mcp_tools, view_store
from durableagent.demo import build_demo_store, demo_dir, read_list
from durableagent.tools.mcp import IDEMPOTENCY_KEY_META


def server(root: Path) -> mcp.StdioServerParameters:
    return mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "durableagent.demo.ticket_server", str(root)]
    )


async def test_a_repeated_call_with_the_same_key_files_one_ticket(tmp_path: Path) -> None:
    demo_dir(tmp_path).mkdir()
    args = {"summary": "printer jam", "requester": "alex@example.com"}
    async with mcp.Client(server(tmp_path)) as client:
        first = await client.call_tool("create_ticket", args, meta={IDEMPOTENCY_KEY_META: "k1"})
        again = await client.call_tool("create_ticket", args, meta={IDEMPOTENCY_KEY_META: "k1"})
        other = await client.call_tool("create_ticket", args, meta={IDEMPOTENCY_KEY_META: "k2"})
        texts = [r.content[0].text for r in (first, again, other)]  # type: ignore[union-attr]
        assert texts == ["TICKET-1", "TICKET-1", "TICKET-2"]
        read = await client.call_tool("get_ticket", {"ticket_id": "TICKET-2"})
        assert read.content[0].text == "TICKET-2: printer jam (for alex@example.com)"  # type: ignore[union-attr]

        # Trusted, its annotations make create_ticket an idempotent write no human need approve
        # (the demo's agent overrides that) and get_ticket a read.
        tools = {t.name: t for t in await mcp_tools(client, trust_annotations=True)}
    ticket, reader = tools["create_ticket"], tools["get_ticket"]
    assert (ticket.write, ticket.needs_approval, ticket.idempotent) == (True, False, True)
    assert (reader.write, reader.classified_by) == (False, "annotation")
    assert ticket.about == '"File a ticket", closed world'
    assert [t["key"] for t in read_list(tmp_path, "tickets")] == ["k1", "k2"]


def test_the_demo_files_tickets_through_the_server_and_says_where_its_class_came_from(
    tmp_path: Path,
) -> None:
    root = tmp_path / "d"
    build_demo_store(root)
    view = view_store(FileStore(root), "crm-access")
    ticket = next(s for s in view.steps if s.name == "tool/2/0/create_ticket")
    assert (ticket.idempotent, ticket.attempts, ticket.classified_by) == (True, 2, "override")
    (pending,) = view_store(FileStore(root), "shared-drive").pending
    assert pending.policy == (
        "idempotent write, needs approval · class from override · MCP server 'demo-tickets' · "
        '"File a ticket", closed world'
    )


def test_without_the_mcp_extra_the_demo_files_tickets_in_process(tmp_path: Path) -> None:
    # A `mcp` package that cannot be imported, first on the path of this process and of the
    # children the demo starts.
    shadow = tmp_path / "no-extra" / "mcp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('the mcp extra is not installed')\n")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from durableagent.demo import build_demo_store\n"
        f"build_demo_store(Path({str(tmp_path / 'd')!r}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(shadow.parent)}
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert p.returncode == 0, p.stderr
    assert "the demo files tickets in-process" in p.stderr
    tickets = json.loads((tmp_path / "d" / ".demo" / "tickets.json").read_text())
    assert [t["id"] for t in tickets] == ["TICKET-1", "TICKET-2"]
    view = view_store(FileStore(tmp_path / "d"), "crm-access")
    assert view.indeterminate is not None and view.indeterminate.name == "tool/2/1/send_email"
    ticket = next(s for s in view.steps if s.name == "tool/2/0/create_ticket")
    assert (ticket.idempotent, ticket.attempts, ticket.classified_by) == (True, 2, "")
