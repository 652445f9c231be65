"""Two versions of one agent, for the deploy tests (issue 25): ``v1`` and ``v2``.

v2 changes three things: the gated write ``create_ticket`` gains a required argument
``priority``, the read ``lookup`` is gone, and the system prompt is another. Each tool call
that runs is noted in ``<store>/.side/<tool>.log`` (or ``$AGENTRUN_SIDE``), so a test can see
what ran with which arguments.

The model is a function of the conversation, the same in both versions where it can be:
- a request with ``lookup`` calls ``lookup`` first; with ``hang`` too, v1's next model call
  waits for ever (a read in flight: stopping the worker leaves the run ready);
- otherwise it calls ``create_ticket`` (v1: a title; v2: a title and a priority);
- a refusal naming a change (an accepted change) makes v2 call ``create_ticket`` again with
  the arguments it takes now;
- a ticket's result ends the run; v1's ``create_ticket`` raises for a title with ``fail``
  (killed inside a write: indeterminate).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _child_agents import note

from durableagent import Agent, AgentConfig, Message, PolicyGate, Tool, ToolCall

TITLE = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
TITLE_PRIORITY = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "priority": {"type": "string"}},
    "required": ["title", "priority"],
}
QUERY = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def _side(root: Path) -> Path:
    side = Path(os.environ.get("AGENTRUN_SIDE") or root)
    side.mkdir(parents=True, exist_ok=True)
    return side


class Scripted:
    """The model of one version (async, so that v1's hanging call can be cancelled)."""

    model = "scripted-1"

    def __init__(self, version: int) -> None:
        self.version = version

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        request = next(m.content for m in messages if m.role == "user")
        results = [m for m in messages if m.role == "tool"]
        if not results:
            if "lookup" in request:
                return _call("lookup", {"q": request})
            return _call("create_ticket", self._ticket(request), "c1")
        last = results[-1]
        if last.name == "lookup":
            if "hang" in request and self.version == 1:
                await asyncio.sleep(3600)
            return Message("assistant", f"v{self.version} answered after lookup: {last.content}")
        if last.content.startswith("not run:"):
            return _call("create_ticket", self._ticket(request), f"c{len(results) + 1}")
        return Message("assistant", f"v{self.version} filed {last.content}")

    def _ticket(self, request: str) -> dict[str, Any]:
        args: dict[str, Any] = {"title": request}
        if self.version == 2:
            args["priority"] = "high"
        return args


def _call(name: str, args: dict[str, Any], call_id: str = "l1") -> Message:
    return Message("assistant", tool_calls=(ToolCall(call_id, name, args),))


def _tools(root: Path, version: int) -> list[Tool]:
    side = _side(root)

    def create_ticket(args: dict[str, Any]) -> str:
        if "fail" in str(args.get("title")) and version == 1:
            raise RuntimeError("the ticket system hung up mid-write")
        note(side, "create_ticket", f"v{version} {sorted(args.items())}")
        return f"T-{len(args)} {args['title']}"

    def lookup(args: dict[str, Any]) -> str:
        note(side, "lookup", f"v{version} {args['q']}")
        return f"found {args['q']}"

    ticket = Tool(
        "create_ticket", "file a ticket", TITLE if version == 1 else TITLE_PRIORITY, create_ticket
    )
    if version == 1:
        return [ticket, Tool("lookup", "look something up", QUERY, lookup)]
    return [ticket]


def v1(root: Path) -> Agent:
    config = AgentConfig(Scripted(1), _tools(root, 1), system="You are the helpdesk.")
    return Agent(config, PolicyGate(writes={"create_ticket"}), version="v1")


def v2(root: Path) -> Agent:
    config = AgentConfig(
        Scripted(2), _tools(root, 2), system="You are the helpdesk. Always set a priority."
    )
    return Agent(config, PolicyGate(writes={"create_ticket"}), version="v2")
