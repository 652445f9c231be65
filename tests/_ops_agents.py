"""Agents for the operations tests' worker processes (``agentrun worker --agent
_ops_agents:NAME``): the helpdesk before and after a fix, each noting every model call and
tool call in ``<store>/.side/`` so that the counts survive the process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _child_agents import gate_file, note

from durableagent import Agent, AgentConfig, Message, PolicyGate, ScriptedModel, Tool, ToolCall


def _helpdesk(root: Path, version: str, ticket_prefix: str) -> Agent:
    """lookup_policy, then create_ticket (a write that needs approval), then the answer; the
    answer and the ticket ids say which version made them."""

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        note(root, "model", f"{version} llm/{len(done) + 1}")
        if not done:
            return Message("assistant", tool_calls=(ToolCall("c1", "lookup_policy", {}),))
        if len(done) == 1:
            call = ToolCall("c2", "create_ticket", {"summary": "billing access"})
            return Message("assistant", tool_calls=(call,))
        return Message("assistant", f"{version}: filed {done[-1].content}")

    def lookup_policy(args: dict[str, Any]) -> str:
        note(root, "lookups", version)
        return "access needs a ticket"

    def create_ticket(args: dict[str, Any]) -> str:
        note(root, "tickets", version)
        return f"{ticket_prefix}-1"

    tools = [
        Tool("lookup_policy", "look up a policy", {"type": "object"}, lookup_policy),
        Tool("create_ticket", "file a ticket", {"type": "object"}, create_ticket),
    ]
    config = AgentConfig(ScriptedModel(reply), tools, system=f"helpdesk {version}")
    return Agent(config, PolicyGate(writes={"create_ticket"}))


def helpdesk_v1(root: Path) -> Agent:
    """The helpdesk as first deployed: tickets in the old system."""
    return _helpdesk(root, "v1", "OLD")


def helpdesk_v2(root: Path) -> Agent:
    """The helpdesk after the fix: a new prompt, tickets in the new system."""
    return _helpdesk(root, "v2", "NEW")


def held(root: Path) -> Agent:
    """One read held open until the test creates ``<root>/.side/go``, then the answer: a run
    whose middle a follower must print while the step still runs."""

    def reply(messages: Sequence[Message]) -> Message:
        if not any(m.role == "tool" for m in messages):
            return Message("assistant", tool_calls=(ToolCall("r1", "wait_for_go", {}),))
        return Message("assistant", "went")

    def wait_for_go(args: dict[str, Any]) -> str:
        note(root, "held", "begin")
        gate_file(root, "go")
        return "go"

    tool = Tool("wait_for_go", "wait for the test", {"type": "object"}, wait_for_go)
    return Agent(AgentConfig(ScriptedModel(reply), [tool]), PolicyGate())
