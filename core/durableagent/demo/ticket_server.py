"""The demo's ticket system as an MCP server (built with the official ``mcp`` SDK, extra
``mcp``): ``python -m durableagent.demo.ticket_server STORE`` serves it over stdio.

Its tickets live in ``STORE/.demo/tickets.json``, the file the demo's runs and the on-call human
read. ``create_ticket`` honours the idempotency key a durableagent step sends in the request's
``_meta`` (``durableagent/idempotency_key``): a repeated call with the same key files nothing
and returns the ticket filed the first time, so an agent killed inside the call runs it again
safely. Its annotations say so (``idempotentHint``), and that filing a ticket destroys
nothing (``destructiveHint: false``) and reaches nothing outside (``openWorldHint: false``);
``get_ticket`` only reads (``readOnlyHint``). It also honours the lease's fencing token
(``durableagent/fence``): a write whose epoch is lower than one it has seen for that run is
refused, so a worker paused past its lease cannot file after another took the run over.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from ..tools.mcp import FENCE_META, IDEMPOTENCY_KEY_META
from .tickets import StaleFenceError, add_item, read_list, tickets_root

NAME = "demo-tickets"


def ticket_server(root: str | Path) -> MCPServer:
    """The demo's ticket server, filing into the store at ``root``."""
    root = tickets_root(root)
    app = MCPServer(
        NAME,
        instructions="The demo helpdesk's ticket system.",
        log_level="WARNING",  # stderr is the agent's: only what matters
    )

    @app.tool(
        title="File a ticket",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    def create_ticket(summary: str, requester: str, ctx: Context) -> str:
        """File a ticket in the ticket system; returns its id. A repeated call with the same
        idempotency key (in the request's _meta) returns the ticket filed the first time."""
        meta: dict[str, Any] = dict(ctx.request_context.meta or {})
        key = meta.get(IDEMPOTENCY_KEY_META)
        given = meta.get(FENCE_META)
        fence = (given.get("run"), given.get("epoch")) if isinstance(given, dict) else None
        try:
            ticket = _file(summary, requester, key, fence)
        except StaleFenceError as e:
            raise ToolError(str(e)) from None
        return str(ticket["id"])

    def _file(summary: str, requester: str, key: Any, fence: Any) -> dict[str, Any]:
        return add_item(
            root,
            "tickets",
            lambda n: {
                "id": f"TICKET-{n}",
                "summary": summary,
                "requester": requester,
                "key": key,
            },
            key=key if isinstance(key, str) and key else None,
            fence=fence,
        )

    @app.tool(
        title="Read a ticket",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    def get_ticket(ticket_id: str) -> str:
        """A ticket's summary and requester, by its id (TICKET-1, ...)."""
        for t in read_list(root, "tickets"):
            if t.get("id") == ticket_id:
                return f"{t['id']}: {t.get('summary', '')} (for {t.get('requester', '?')})"
        raise ToolError(f"no ticket {ticket_id}")

    return app


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m durableagent.demo.ticket_server STORE", file=sys.stderr)
        return 2
    ticket_server(argv[0]).run()  # stdio
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
