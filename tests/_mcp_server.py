"""A real MCP server for the tests, built with the official SDK: ``python _mcp_server.py DIR
[--http] [--variant v2]``. Over stdio by default; ``--http`` serves streamable HTTP on
127.0.0.1 (a free port, written to ``DIR/port``; ``--port N`` asks for one).

Everything it sees and does is counted on disk under DIR, one fsynced line per event, so the
counts survive any process: ``calls.log`` (``tool key`` for every call received, the key read
from ``_meta["durableagent/idempotency_key"]``) and ``effects.log`` (``tool key`` for every
effect performed). ``DIR/hold-TOOL``, when it exists at a call of TOOL, makes that call do
its effect, write ``DIR/inside-TOOL``, remove the hold file and wait (until
``DIR/release-TOOL`` exists, or the process dies): the tests kill workers inside a call.

Tools (v1): ``lookup`` (read-only), ``file_ticket`` (idempotent, not destructive: it
deduplicates on the key), ``send_note`` (not destructive, not idempotent), ``wipe`` (no
hints), ``fail`` (answers isError), ``slow`` (read-only, sleeps) and ``retire`` (removes
a tool while the server runs). v2: ``lookup`` takes a
required ``lang`` too, and ``send_note`` is gone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

KEY = "durableagent/idempotency_key"


def note(folder: Path, what: str, line: str) -> None:
    with open(folder / f"{what}.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def lines(folder: Path, what: str) -> list[str]:
    p = folder / f"{what}.log"
    return p.read_text().splitlines() if p.exists() else []


def build(folder: Path, variant: str) -> MCPServer:
    app = MCPServer("test-tickets", log_level="WARNING")
    parent = os.getppid()

    def key_of(ctx: Context) -> str:
        meta = ctx.request_context.meta or {}
        return str(meta.get(KEY, "-"))

    async def seen(tool: str, ctx: Context) -> str:
        key = key_of(ctx)
        note(folder, "calls", f"{tool} {key}")
        return key

    async def hold(tool: str) -> None:
        flag = folder / f"hold-{tool}"
        if not flag.exists():
            return
        flag.unlink()
        (folder / f"inside-{tool}").write_text(str(os.getpid()))
        while not (folder / f"release-{tool}").exists():
            if os.getppid() != parent:  # the client (a killed worker) is gone: so are we
                os._exit(0)
            await asyncio.sleep(0.02)

    if variant == "v1":

        @app.tool(
            title="Look up a policy",
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        async def lookup(topic: str, ctx: Context) -> str:
            """Look up the helpdesk policy on a topic."""
            await seen("lookup", ctx)
            await hold("lookup")
            return f"policy for {topic}: file a ticket"

    else:

        @app.tool(
            title="Look up a policy",
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        async def lookup(topic: str, lang: str, ctx: Context) -> str:
            """Look up the helpdesk policy on a topic, in a language."""
            await seen("lookup", ctx)
            return f"policy for {topic} ({lang}): file a ticket"

    @app.tool(
        title="File a ticket",
        annotations=ToolAnnotations(
            destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def file_ticket(summary: str, ctx: Context) -> str:
        """File a ticket; a repeated call with the same idempotency key files nothing new."""
        key = await seen("file_ticket", ctx)
        filed = [line.split(" ", 2) for line in lines(folder, "tickets")]
        for number, old_key, _ in filed:
            if old_key == key:
                return f"TICKET-{number}"
        number = str(len(filed) + 1)
        note(folder, "tickets", f"{number} {key} {summary}")
        note(folder, "effects", f"file_ticket {key}")
        await hold("file_ticket")
        return f"TICKET-{number}"

    if variant == "v1":

        @app.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=True))
        async def send_note(to: str, text: str, ctx: Context) -> str:
            """Send a note to someone."""
            key = await seen("send_note", ctx)
            note(folder, "effects", f"send_note {key}")
            await hold("send_note")
            return f"note sent to {to}"

    @app.tool()
    async def wipe(ctx: Context) -> str:
        """Delete every ticket."""
        key = await seen("wipe", ctx)
        note(folder, "effects", f"wipe {key}")
        return "wiped"

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def fail(reason: str, ctx: Context) -> str:
        """Always fails, saying why."""
        await seen("fail", ctx)
        raise ToolError(f"cannot do that: {reason}")

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def slow(seconds: float, ctx: Context) -> str:
        """Take its time."""
        await seen("slow", ctx)
        await asyncio.sleep(seconds)
        return "done slowly"

    @app.tool()
    async def retire(name: str, ctx: Context) -> str:
        """Stop offering a tool (while this server runs)."""
        await seen("retire", ctx)
        app.remove_tool(name)
        return f"{name} retired"

    return app


async def serve_http(app: MCPServer, folder: Path, port: int) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)  # connections wait in the backlog until uvicorn serves
    (folder / "port.tmp").write_text(str(sock.getsockname()[1]))
    os.replace(folder / "port.tmp", folder / "port")
    config = uvicorn.Config(app.streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=Path)
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--variant", default="v1", choices=["v1", "v2"])
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    note(args.dir, "pids", str(os.getpid()))
    app = build(args.dir, args.variant)
    if args.http:
        asyncio.run(serve_http(app, args.dir, args.port))
    else:
        app.run()


if __name__ == "__main__":
    sys.exit(main())
