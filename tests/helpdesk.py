"""The worked example's helpdesk agent, shared by the tests.

The model is a function of the conversation (not a list of replies) so that a replayed run,
which skips recorded model calls, still gets the right next reply. Side effects (model calls,
lookups, tickets) are counted in files, so they survive a SIGKILL of the process making them.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    Message,
    PolicyGate,
    Result,
    ScriptedModel,
    Tool,
    ToolCall,
)

INPUT = [Message("user", "I need access to the billing dashboard.")]


def reply(messages: Sequence[Message]) -> Message:
    """lookup_policy, then create_ticket, then the answer, by what the conversation holds."""
    tool_msgs = [m for m in messages if m.role == "tool"]
    if not tool_msgs:
        return Message(
            "assistant", tool_calls=(ToolCall("c1", "lookup_policy", {"topic": "access"}),)
        )
    if len(tool_msgs) == 1:
        return Message(
            "assistant",
            tool_calls=(ToolCall("c2", "create_ticket", {"summary": "billing dashboard access"}),),
        )
    return Message("assistant", f"Ticket filed: {tool_msgs[-1].content}")


class Side:
    """Side effects on disk: a line per model call, lookup and ticket."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def count(self, what: str) -> int:
        p = self.root / f"{what}.log"
        return len(p.read_text().splitlines()) if p.exists() else 0

    def note(self, what: str, line: str = "x") -> None:
        with open(self.root / f"{what}.log", "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def tickets(self) -> list[str]:
        p = self.root / "tickets.log"
        return p.read_text().splitlines() if p.exists() else []


def helpdesk(store: FileStore, side: Side, *, kill_in: str = "") -> tuple[Config, ScriptedModel]:
    """The helpdesk Config. ``kill_in`` "read"/"write" SIGKILLs this process inside that tool
    (after the ticket exists, for the write)."""

    def model_fn(messages: Sequence[Message]) -> Message:
        side.note("model")
        return reply(messages)

    def lookup_policy(args: dict[str, Any]) -> str:
        side.note("lookup")
        if kill_in == "read":
            os.kill(os.getpid(), signal.SIGKILL)
        return "Access needs a ticket approved by IT."

    def create_ticket(args: dict[str, Any]) -> Result:
        n = len(side.tickets()) + 1
        side.note("tickets", json.dumps({"id": f"TICKET-{n}", **args}))
        if kill_in == "write":
            os.kill(os.getpid(), signal.SIGKILL)
        return Result(f"TICKET-{n}")

    model = ScriptedModel(model_fn)
    agent = AgentConfig(
        model=model,
        tools=[
            Tool("lookup_policy", "Look up a policy", {"type": "object"}, lookup_policy),
            Tool("create_ticket", "File a ticket", {"type": "object"}, create_ticket),
        ],
        system="You are a helpdesk agent.",
    )
    gate = PolicyGate(writes={"create_ticket"})
    return Config(agent, gate, store), model
