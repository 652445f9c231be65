"""OpenAI Agents SDK agents for worker processes started by the tests (``agentrun worker
--agent _openai_agents:NAME``), on the SDK's OpenAIChatCompletionsModel through the official
openai client, at the local OpenAI-compatible server ``$OPENAI_BASE_URL`` (tests/fake_llm.py).
Every tool call is a fsynced line in ``$OA_SIDE/<what>.log``, so counts survive a SIGKILL and
never come from the journal. ``OA_HANG=<tool>`` makes that tool hang after it is noted
(``inside.log`` says so) until the test kills the worker."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agents import Agent as SdkAgent
from agents import OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from durableagent.integrations.openai_agents import durable, tool_context
from durableagent.worker import Agent

set_tracing_disabled(True)


def side() -> Path:
    return Path(os.environ["OA_SIDE"])


def note(what: str, line: str) -> None:
    folder = side()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{what}.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def lines(folder: Path, what: str) -> list[str]:
    p = folder / f"{what}.log"
    return p.read_text().splitlines() if p.exists() else []


def hang_if(what: str) -> None:
    if os.environ.get("OA_HANG") == what:
        note("inside", what)
        while True:  # until SIGKILL
            time.sleep(1)


@function_tool
async def lookup_policy(ctx: ToolContext[None], topic: str) -> str:
    """Look up the helpdesk policy on a topic."""
    note("lookup", f"{topic}:{tool_context(ctx).step}")
    hang_if("lookup_policy")
    return f"policy for {topic}"


@function_tool
def create_ticket(ctx: ToolContext[None], summary: str, requester: str) -> str:
    """File a ticket; returns its id."""
    # A sync tool: the SDK runs it in a thread, where the durable context reaches too.
    note("tickets", f"{summary}:{tool_context(ctx).idempotency_key}")
    hang_if("create_ticket")
    return "T-1"


def helpdesk() -> Agent:
    """The helpdesk: lookup_policy (a read), create_ticket (a write a human approves)."""
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-local")
    agent = SdkAgent(
        "helpdesk",
        instructions="Be brief.",
        model=OpenAIChatCompletionsModel("fake-model", client),
        tools=[lookup_policy, create_ticket],
    )
    return durable(agent, writes=["create_ticket"])
