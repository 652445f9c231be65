"""The helpdesk written as an OpenAI Agents SDK agent, made durable with one call (extra
``openai-agents``). Any OpenAI-compatible server, configured only by the environment::

    export OPENAI_BASE_URL=http://localhost:11434/v1   # e.g. Ollama; unset for OpenAI itself
    export OPENAI_API_KEY=sk-...                       # any text for a local server
    export AGENTRUN_MODEL=qwen2.5:7b                   # the model's name on that server
    agentrun submit h1 "I need access to the billing dashboard"
    agentrun worker --agent examples.openai_agents_helpdesk:agent   # from the repository's root

The agent is plain Agents SDK: its model, its instructions, its function tools with their
``ToolContext`` and the run's context object. ``durable()`` says which tools write:
``create_ticket`` files into a ticket system that deduplicates on the step's idempotency key
(so it is an idempotent write, run again with the same key if a worker dies mid-call);
``send_email`` is declared ``needs_approval=True`` in the SDK, which makes it a write a human
approves (``agentrun approve h1 --all``, or ``agentrun tui``), and a worker dying mid-call stops
the run as indeterminate until someone looks in the outbox and reconciles it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agents import Agent as SdkAgent
from agents import OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from durableagent import Agent
from durableagent.integrations.openai_agents import durable, tool_context
from examples.helpdesk_openai import POLICIES, SYSTEM, Ledger

Topic = Literal["billing", "crm", "vpn", "hardware", "access"]


@dataclass(frozen=True)
class Desk:
    """The run's context object: where tickets and emails go."""

    tickets: Ledger
    outbox: Ledger


@function_tool
def lookup_policy(topic: Topic) -> str:
    """Look up the helpdesk policy on a topic.

    Args:
        topic: What the request is about.
    """
    return POLICIES[topic]


@function_tool
def create_ticket(ctx: ToolContext[Desk], summary: str, requester: str) -> str:
    """File a ticket in the ticket system; returns its id.

    Args:
        summary: One line saying what is needed.
        requester: The email address of the person asking.
    """
    key = tool_context(ctx).idempotency_key  # the same on every attempt of this step
    record = {"summary": summary, "requester": requester}
    return ctx.context.tickets.add(record, prefix="TICKET", key=key)


@function_tool(needs_approval=True)
def send_email(ctx: ToolContext[Desk], to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text.
    """
    return ctx.context.outbox.add({"to": to, "subject": subject, "body": body}, prefix="MAIL")


def agent(root: Path) -> Agent:
    """The durable helpdesk for the store at ``root`` (``agentrun worker`` passes it)."""
    set_tracing_disabled(not os.environ.get("OPENAI_AGENTS_TRACING"))  # no export by default
    client = AsyncOpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
    )
    helpdesk = SdkAgent[Desk](
        "helpdesk",
        instructions=SYSTEM,
        model=OpenAIChatCompletionsModel(os.environ.get("AGENTRUN_MODEL", "gpt-4o-mini"), client),
        tools=[lookup_policy, create_ticket, send_email],
    )
    desk = Path(root) / ".helpdesk"
    return durable(
        helpdesk,
        writes=["create_ticket"],
        idempotent=["create_ticket"],
        context=Desk(Ledger(desk / "tickets.json"), Ledger(desk / "outbox.json")),
    )
