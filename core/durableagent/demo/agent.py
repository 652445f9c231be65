"""The demo's helpdesk agent: its tools (the ticket system in-process, or through the demo's
MCP ticket server over stdio when the ``mcp`` extra is installed), and the agent a worker
enters."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from ..gate import gate_for
from ..loop import AgentConfig
from ..stores import open_store
from ..tools import Result, Tool, ToolContext
from ..worker import Agent
from .script import (
    AUDIT_KILLED_AT,
    KILL_AUDIT,
    PACE,
    POLICIES,
    SYSTEM,
    DemoModel,
)
from .tickets import SERVICE_DOWN, add_item, demo_dir, demo_hints, tickets_root

log = logging.getLogger("durableagent.demo")


def _crash_if(crash_in: str | None, tool: str) -> None:
    if crash_in == tool:
        os.kill(os.getpid(), signal.SIGKILL)


def demo_tools(
    root: Path,
    *,
    pace: float = PACE,
    crash_in: str | None = None,
    tickets: Sequence[Tool] | None = None,
) -> list[Tool]:
    """lookup_policy (a read), create_ticket (an idempotent write: the ticket system
    deduplicates on the key) and send_email (a write that is not) on the store's ticket system.
    ``tickets``: the ticket server's tools (from :func:`demo_agent`); without them
    create_ticket files in-process, the same way. ``crash_in`` names a write that SIGKILLs
    the process right after it acted."""
    root = tickets_root(root)
    hints = demo_hints(root)

    def crash_if(tool: str) -> None:
        _crash_if(crash_in, tool)

    def lookup_policy(args: dict[str, Any]) -> str:
        topic = str(args.get("topic", "access"))
        if topic.startswith("audit:"):
            time.sleep(pace)  # a sync tool runs in a thread: sleeping stalls nothing
            return f"{topic[6:]}: {POLICIES.get(topic[6:], POLICIES['access'])}"
        if topic == "vpn" and (demo_dir(root) / SERVICE_DOWN).exists():
            raise ConnectionError(
                "policy service unreachable (the demo's .demo/policy-service-down file exists)"
            )
        return POLICIES.get(topic, POLICIES["access"])

    def create_ticket(args: dict[str, Any], ctx: ToolContext) -> Result:
        ticket = add_item(
            root,
            "tickets",
            lambda n: {
                "id": f"TICKET-{n}",
                "summary": str(args.get("summary", "")),
                "requester": str(args.get("requester", "")),
                "key": ctx.idempotency_key,
            },
            key=ctx.idempotency_key,
            fence=ctx.fence,
        )
        crash_if("create_ticket")
        return Result(ticket["id"])

    def send_email(args: dict[str, Any], ctx: ToolContext) -> Result:
        # The outbox keeps the step's key with each mail (as a mail header would) but does
        # not deduplicate on it: a human can find the mail by its key, and must decide.
        mail = add_item(
            root,
            "outbox",
            lambda n: {
                "id": f"MAIL-{n}",
                **{k: str(v) for k, v in args.items()},
                "key": ctx.idempotency_key,
            },
            fence=ctx.fence,
        )
        crash_if("send_email")
        return Result(f"email {mail['id']} sent to {args.get('to', '?')}")

    obj = {"type": "object"}
    ticket_tools = list(tickets) if tickets is not None else []
    if not ticket_tools:
        ticket_tools = [
            Tool(
                "create_ticket",
                "File a ticket in the ticket system",
                obj,
                create_ticket,
                write=True,
                idempotent=True,
                hint=hints["create_ticket"],
            )
        ]
    return [
        Tool("lookup_policy", "Look up the helpdesk policy on a topic", obj, lookup_policy),
        *ticket_tools,
        Tool("send_email", "Send an email", obj, send_email, write=True, hint=hints["send_email"]),
    ]


@contextlib.asynccontextmanager
async def demo_agent(
    root: str | os.PathLike[str],
    *,
    pace: float = PACE,
    crash_in: str | None = None,
    in_process: bool = False,
) -> AsyncIterator[Agent]:
    """The demo helpdesk agent working on the ticket system of the store at ``root``, for as
    long as the context lasts; its gate comes from its tools (both writes need approval;
    create_ticket is idempotent).

    Its tickets are filed through the demo's MCP ticket server (``demo.ticket_server``),
    started over stdio; ``in_process`` runs that server inside this process instead (the
    SDK's in-memory transport: the demo store builds without starting one per child). The
    server's annotations are trusted; an override keeps a human on every ticket, though the
    server says filing one destroys nothing. Without the ``mcp`` extra the ticket system is
    called in-process, the same way, and the demo says so."""
    root = tickets_root(root)
    async with contextlib.AsyncExitStack() as stack:
        try:
            tickets = await _ticket_tools(stack, root, in_process=in_process)
        except ImportError as e:
            log.warning("the demo files tickets in-process (no MCP server): %s", e)
            tickets = []
        if crash_in == "create_ticket":
            tickets = [_crashing(t, crash_in) for t in tickets]
        tools = demo_tools(root, pace=pace, crash_in=crash_in, tickets=tickets)
        kill_at = AUDIT_KILLED_AT if crash_in == KILL_AUDIT else None
        model = DemoModel(pace, kill_at, open_store(root) if kill_at is not None else None)
        config = AgentConfig(model=model, tools=tools, system=SYSTEM)
        yield Agent(config, gate_for(tools))


async def _ticket_tools(
    stack: contextlib.AsyncExitStack, root: Path, *, in_process: bool
) -> list[Tool]:
    """The ticket server's tools, over a connection ``stack`` closes."""
    import mcp  # the extra; ImportError: the in-process ticket system instead

    from ..tools.mcp import mcp_tools
    from .ticket_server import ticket_server

    server: Any = ticket_server(root) if in_process else _stdio_server(stack, root)
    client = await stack.enter_async_context(mcp.Client(server))
    overrides = {"create_ticket": {"approve": True, "hint": demo_hints(root)["create_ticket"]}}
    tools = await mcp_tools(client, trust_annotations=True, overrides=overrides)
    # The demo model never reads a ticket back; get_ticket is there for real models.
    return [t for t in tools if t.name == "create_ticket"]


def _stdio_server(stack: contextlib.ExitStack | contextlib.AsyncExitStack, root: Path) -> Any:
    """The ticket server as a child process over stdio; what it says on stderr goes to
    ``.demo/ticket-server.log``, never onto the TUI's screen."""
    import mcp

    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "durableagent.demo.ticket_server", str(root)],
        env=dict(os.environ),
    )
    demo_dir(root).mkdir(parents=True, exist_ok=True)
    errlog = stack.enter_context(open(demo_dir(root) / "ticket-server.log", "a"))  # noqa: SIM115
    return mcp.stdio_client(params, errlog=errlog)


def _crashing(tool: Tool, crash_in: str) -> Tool:
    """``tool``, but the process SIGKILLs itself once the server has answered (the ticket
    is filed; its result is not yet recorded)."""

    async def call(args: dict[str, Any]) -> Result:
        result = await tool.call(args)
        _crash_if(crash_in, tool.name)
        return result

    return dataclasses.replace(tool, fn=call)
