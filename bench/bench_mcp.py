"""The per-call overhead ``mcp_tools``' wrapper adds over a bare ``session.call_tool``, on a
stdio server, in one run.

    python bench/bench_mcp.py [-n N]

One MCP server (the official SDK's MCPServer with one ``echo`` tool, this file run with
``--serve``) in a child process over stdio, one ``ClientSession``, and, interleaved so both
see the same machine:

- bare:      ``session.call_tool("echo", args, meta={"durableagent/idempotency_key": key})``;
- wrapper:   ``tool.call(args)`` on the Tool ``mcp_tools(session)`` made: the step's context
             looked up, the key put in ``_meta``, the same SDK call, the result turned into a
             Result;
- overhead:  wrapper - bare (medians), and the ratio;
- own work:  the wrapper's part on its own (context, meta, the result's conversion, on a
             recorded CallToolResult): the overhead without two round trips' noise.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from typing import Any

ARGS = {"text": "printer jam on the third floor"}


def serve() -> None:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations

    app = MCPServer("bench", log_level="WARNING")

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Say it back."""
        return text

    app.run()


async def measure(n: int) -> None:
    import mcp

    from durableagent import mcp_tools
    from durableagent.tools import current_context
    from durableagent.tools.mcp import IDEMPOTENCY_KEY_META, result_of

    params = mcp.StdioServerParameters(command=sys.executable, args=[__file__, "--serve"])
    async with (
        mcp.stdio_client(params) as (read, write),
        mcp.ClientSession(read, write) as session,
    ):
        await session.initialize()
        (tool,) = await mcp_tools(session, trust_annotations=True)
        meta: Any = {IDEMPOTENCY_KEY_META: "bench:000000000000:tool/1/0/echo"}

        async def bare() -> None:
            await session.call_tool("echo", ARGS, meta=meta)

        async def wrapper() -> None:
            await tool.call(ARGS)

        for _ in range(50):  # warm both paths (imports, validators, the server's caches)
            await bare()
            await wrapper()
        times: dict[str, list[float]] = {"bare": [], "wrapper": []}
        for i in range(n):
            order = (("bare", bare), ("wrapper", wrapper))
            for name, fn in order if i % 2 else order[::-1]:
                t = time.perf_counter()
                await fn()
                times[name].append(time.perf_counter() - t)

        recorded = await session.call_tool("echo", ARGS, meta=meta)
        own: list[float] = []
        for _ in range(n):
            t = time.perf_counter()
            ctx = current_context()
            _ = {IDEMPOTENCY_KEY_META: ctx.idempotency_key}
            result_of(recorded)
            own.append(time.perf_counter() - t)

    bare_us = statistics.median(times["bare"]) * 1e6
    wrapped_us = statistics.median(times["wrapper"]) * 1e6
    print(f"stdio MCP server, {n} calls each, interleaved (medians)")
    print(f"  bare session.call_tool   {bare_us:9.1f} µs")
    print(f"  mcp_tools' Tool.call     {wrapped_us:9.1f} µs")
    print(
        f"  overhead                 {wrapped_us - bare_us:9.1f} µs  "
        f"(ratio {wrapped_us / bare_us:.3f})"
    )
    print(f"  the wrapper's own work   {statistics.median(own) * 1e6:9.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000, help="calls of each kind")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
    else:
        asyncio.run(measure(args.n))


if __name__ == "__main__":
    main()
