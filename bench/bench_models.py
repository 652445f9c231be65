"""The model adapters' own overhead per model step, against the SDK call alone, in one run.

    python bench/bench_models.py [-n N]

For a short and a long conversation, on the local OpenAI/Anthropic-compatible server
(``tests/fake_llm.py`` in a child process, so it does not share our interpreter's lock):

- sdk:       ``client.chat.completions.create(**payload)`` (``client.messages.create``), the
             payload built once beforehand;
- adapter:   ``model.complete(messages, tools)``: build the payload, the same SDK call, parse
             the reply into a Message;
- overhead:  adapter - sdk (medians, interleaved so both see the same machine), and the ratio;
- serialise and parse: the adapter's two parts timed on their own (medians), which is the
  overhead without the noise of two network round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from durableagent import Message, Tool, ToolCall, ToolContext, tool
from durableagent.models import AnthropicModel, OpenAIModel
from durableagent.models import anthropic as anthropic_adapter
from durableagent.models import openai as openai_adapter

FAKE = Path(__file__).resolve().parent.parent / "tests" / "fake_llm.py"


def helpdesk_tools() -> list[Tool]:
    @tool
    def lookup_policy(topic: Literal["billing", "crm", "vpn", "hardware", "access"]) -> str:
        """Look up the helpdesk policy on a topic.

        Args:
            topic: What the request is about.
        """
        return ""

    @tool(write=True, idempotent=True)
    def create_ticket(summary: str, requester: str, ctx: ToolContext) -> str:
        """File a ticket in the ticket system; returns its id."""
        return ""

    @tool(write=True)
    def send_email(to: str, subject: str, body: str, cc: list[str] | None = None) -> str:
        """Send an email."""
        return ""

    return [lookup_policy, create_ticket, send_email]


def conversation(turns: int) -> list[Message]:
    """system, user, then ``turns`` rounds of a tool call and its result (the server answers
    one result with a tool call and more with text)."""
    convo = [
        Message("system", "You are a helpdesk agent. Look up the policy, then act on it."),
        Message("user", "I need access to the billing dashboard, and please email my manager."),
    ]
    for t in range(turns):
        call = ToolCall(f"call_{t}", "lookup_policy", {"topic": "billing"})
        convo.append(Message("assistant", f"Checking ({t}).", tool_calls=(call,)))
        convo.append(
            Message(
                "tool",
                "Billing dashboard access needs a ticket approved by the finance lead. " * 3,
                tool_call_id=call.id,
                name=call.name,
            )
        )
    return convo


def median_us(xs: Sequence[float]) -> float:
    return statistics.median(xs) * 1e6


async def interleaved(
    n: int, a: Callable[[], Awaitable[Any]], b: Callable[[], Awaitable[Any]]
) -> tuple[list[float], list[float]]:
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(n):
        for fn, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            await fn()
            out.append(time.perf_counter() - t)
    return ta, tb


def part(n: int, fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return median_us(times)


async def bench(url: str, n: int) -> None:
    tools = helpdesk_tools()
    oa = OpenAIModel("bench", base_url=url + "/v1", api_key="k")
    an = AnthropicModel("bench", base_url=url, api_key="k")
    print(f"model step overhead on the local server, medians of {n} interleaved calls")
    print(
        f"  {'adapter':<15}{'conversation':<22}{'sdk call':>10}{'adapter':>10}"
        f"{'overhead':>10}{'ratio':>8}{'serialise':>11}{'parse':>8}"
    )
    for label, turns in (("4 messages", 1), ("42 messages", 20)):
        convo = conversation(turns)
        for name, model, create, parse in (
            ("OpenAIModel", oa, oa.client.chat.completions.create, openai_adapter.parse_reply),
            ("AnthropicModel", an, an.client.messages.create, anthropic_adapter.parse_reply),
        ):
            payload = model.request(convo, tools)
            reply = await create(**payload)
            for _ in range(20):  # warm the connection pool and the code paths
                await model.complete(convo, tools)
                await create(**payload)

            async def sdk(create: Any = create, payload: dict[str, Any] = payload) -> Any:
                return await create(**payload)

            async def adapter(model: Any = model, convo: list[Message] = convo) -> Any:
                return await model.complete(convo, tools)

            t_adapter, t_sdk = await interleaved(n, adapter, sdk)
            s, a = median_us(t_sdk), median_us(t_adapter)
            ser = part(n * 5, lambda model=model, convo=convo: model.request(convo, tools))
            par = part(n * 5, lambda parse=parse, reply=reply: parse(reply))
            print(
                f"  {name:<15}{label:<22}{s:>8.0f}µs{a:>8.0f}µs{a - s:>8.0f}µs{a / s:>7.2f}×"
                f"{ser:>9.1f}µs{par:>6.1f}µs   (own work {ser + par:.0f} µs = "
                f"{(ser + par) / s * 100:.1f}% of the call)"
            )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=int, default=300, help="calls per measurement (default 300)")
    args = p.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(FAKE)], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()  # OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 ...
        url = line.split("=", 1)[1].split()[0].removesuffix("/v1")
        asyncio.run(bench(url, args.n))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
