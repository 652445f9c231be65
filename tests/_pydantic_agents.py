"""Pydantic AI agents for worker processes started by the tests (``agentrun worker --agent
_pydantic_agents:NAME``). Every effect (a model request, a tool call, what the model was sent)
is a fsynced line in ``$PYD_SIDE/<what>.log``, so counts survive a SIGKILL and never come from
the journal. ``PYD_HANG=<what>`` makes that effect hang after it is noted (``inside.log``
says so) until the test kills the worker."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from durableagent.integrations.pydantic_ai import durable, tool_context
from durableagent.worker import Agent


def side() -> Path:
    return Path(os.environ["PYD_SIDE"])


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
    if os.environ.get("PYD_HANG") == what:
        note("inside", what)
        while True:  # until SIGKILL
            time.sleep(1)


def _brain(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Look up the policy, file a ticket, then say what the tools returned."""
    turn = 1 + sum(1 for m in messages if isinstance(m, ModelResponse))
    note("model", str(turn))
    note(
        "sent",
        f"{turn}:{info.instructions}:{','.join(sorted(t.name for t in info.function_tools))}",
    )
    if turn == 1:
        return ModelResponse(parts=[ToolCallPart("lookup", {"topic": "billing"}, "call_1")])
    if turn == 2:
        return ModelResponse(
            parts=[ToolCallPart("create_ticket", {"summary": "billing"}, "call_1")]
        )
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    got = [p for p in last.parts if isinstance(p, ToolReturnPart)]
    said = "; ".join(
        f"{p.tool_name}={p.content}" + (f" ({p.outcome})" if p.outcome != "success" else "")
        for p in got
    )
    note("saw", said)
    return ModelResponse(parts=[TextPart(f"done: {said}")])


def _tools(agent: PydanticAgent[Any, Any]) -> None:
    @agent.tool
    async def lookup(ctx: RunContext[Any], topic: str) -> str:
        note("lookup", f"{topic}:{tool_context(ctx).step}")
        hang_if("lookup")
        return f"policy for {topic}"

    @agent.tool
    def create_ticket(ctx: RunContext[Any], summary: str) -> str:
        # A sync tool: Pydantic AI runs it in a thread, where the durable context reaches too.
        key = tool_context(ctx).idempotency_key
        note("tickets", f"{summary}:{key}")
        hang_if("create_ticket")
        return "T-1"


def functional() -> Agent:
    """The helpdesk on Pydantic AI's FunctionModel."""
    agent = PydanticAgent(FunctionModel(_brain), name="helpdesk", instructions="Be brief.")
    _tools(agent)
    return durable(agent, writes=["create_ticket"])


def openai() -> Agent:
    """The helpdesk on Pydantic AI's OpenAI model class, through the official openai client, at
    the local OpenAI-compatible server ``$OPENAI_BASE_URL`` (tests/fake_llm.py)."""
    provider = OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-local")
    agent = PydanticAgent(
        OpenAIChatModel("fake-model", provider=provider), name="helpdesk", instructions="Be brief."
    )

    @agent.tool_plain
    def lookup_policy(topic: str) -> str:
        note("lookup", topic)
        return f"policy for {topic}"

    @agent.tool_plain
    def create_ticket(summary: str, requester: str) -> str:
        note("tickets", summary)
        return "T-1"

    return durable(agent, writes=["create_ticket"])
