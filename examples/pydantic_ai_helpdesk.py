"""The helpdesk written as a Pydantic AI agent, made durable with one call (extra
``pydantic-ai``). Any OpenAI-compatible server, configured only by the environment::

    export OPENAI_BASE_URL=http://localhost:11434/v1   # e.g. Ollama; unset for OpenAI itself
    export OPENAI_API_KEY=sk-...                       # any text for a local server
    export AGENTRUN_MODEL=qwen2.5:7b                   # the model's name on that server
    agentrun submit h1 "I need access to the billing dashboard"
    agentrun worker --agent examples.pydantic_ai_helpdesk:agent   # from the repository's root

The agent is plain Pydantic AI: its model, its instructions, its tools with their ``RunContext``
and deps. ``durable()`` says which tools write: ``create_ticket`` files into a ticket system
that deduplicates on the step's idempotency key (so it is an idempotent write, run again with
the same key if a worker dies mid-call); ``send_email`` is declared ``requires_approval`` in
Pydantic AI, which makes it a write a human approves (``agentrun approve h1 --all``, or
``agentrun tui``), and a worker dying mid-call stops the run as indeterminate until someone
looks in the outbox and reconciles it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from durableagent import Agent
from durableagent.integrations.pydantic_ai import durable, tool_context
from examples.helpdesk_openai import POLICIES, SYSTEM, Ledger

Topic = Literal["billing", "crm", "vpn", "hardware", "access"]


@dataclass(frozen=True)
class Desk:
    """The agent's deps: where tickets and emails go."""

    tickets: Ledger
    outbox: Ledger


def agent(root: Path) -> Agent:
    """The durable helpdesk for the store at ``root`` (``agentrun worker`` passes it)."""
    model = OpenAIChatModel(
        os.environ.get("AGENTRUN_MODEL", "gpt-4o-mini"),
        provider=OpenAIProvider(
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
        ),
    )
    helpdesk = PydanticAgent(model, name="helpdesk", instructions=SYSTEM, deps_type=Desk)

    @helpdesk.tool_plain
    def lookup_policy(topic: Topic) -> str:
        """Look up the helpdesk policy on a topic.

        Args:
            topic: What the request is about.
        """
        return POLICIES[topic]

    @helpdesk.tool
    def create_ticket(ctx: RunContext[Desk], summary: str, requester: str) -> str:
        """File a ticket in the ticket system; returns its id.

        Args:
            summary: One line saying what is needed.
            requester: The email address of the person asking.
        """
        key = tool_context(ctx).idempotency_key  # the same on every attempt of this step
        record = {"summary": summary, "requester": requester}
        return ctx.deps.tickets.add(record, prefix="TICKET", key=key)

    @helpdesk.tool(requires_approval=True)
    def send_email(ctx: RunContext[Desk], to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: The recipient's address.
            subject: The subject line.
            body: The text.
        """
        return ctx.deps.outbox.add({"to": to, "subject": subject, "body": body}, prefix="MAIL")

    desk = Path(root) / ".helpdesk"
    return durable(
        helpdesk,
        writes=["create_ticket"],
        idempotent=["create_ticket"],
        deps=Desk(Ledger(desk / "tickets.json"), Ledger(desk / "outbox.json")),
    )
