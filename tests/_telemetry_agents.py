"""Agents for the telemetry tests, in-process and in ``agentrun worker`` children
(``--agent _telemetry_agents:NAME``): a model that reports its usage, model and response id, a
gated write and an unattended read."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _child_agents import gate_file

from durableagent import Agent, AgentConfig, Message, PolicyGate, Tool, ToolCall


class UsageModel:
    """A scripted model as an adapter looks: named ``model`` and ``provider``, and every
    reply carries usage (7 in, 3 out), the model and a response id."""

    model = "gpt-test"
    provider = "openai"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: Sequence[Message], tools: Sequence[Any]) -> Message:
        self.calls += 1
        usage = {"input_tokens": 7, "output_tokens": 3}
        done = [m for m in messages if m.role == "tool"]
        rid = f"resp-{len(done)}"
        request = next(m.content for m in messages if m.role == "user")
        if not done:
            look = ToolCall("call-look", "lookup", {"q": request})
            file = ToolCall("call-file", "create_ticket", {"summary": "printer on fire"})
            calls = (look,) if "slow" in request else (look, file)
            return Message(
                "assistant", tool_calls=calls, usage=usage, model="gpt-test-0613", response_id=rid
            )
        text = "filed: " + "; ".join(m.content for m in done)
        return Message("assistant", text, usage=usage, model="gpt-test-0613", response_id=rid)


def helpdesk(root: Path | None = None) -> Agent:
    """lookup (a read) and create_ticket (a write that needs approval), then the answer. A
    request saying "slow" only looks up, and its lookup waits for ``<root>/.side/go``."""

    def look(args: dict[str, Any]) -> str:
        logging.getLogger("helpdesk.lookup").info("looking up %s", args["q"])
        if "slow" in str(args["q"]) and root is not None:
            gate_file(root, "go")
        return f"found {args['q']}"

    lookup = Tool("lookup", "search the wiki", {"type": "object"}, look)
    create = Tool(
        "create_ticket", "file a ticket", {"type": "object"}, lambda a: f"T-1 {a['summary']}"
    )
    gate = PolicyGate(writes={"create_ticket"})
    return Agent(AgentConfig(UsageModel(), [lookup, create]), gate)  # type: ignore[arg-type]
