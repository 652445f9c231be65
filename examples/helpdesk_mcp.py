"""A helpdesk agent whose ticket tools come from an MCP server: the demo's ticket server,
which the project ships (``python -m durableagent.demo.ticket_server STORE``, over stdio),
and a real model on any OpenAI-compatible server, configured by the environment::

    pip install 'durableagent[mcp,openai]'
    export OPENAI_BASE_URL=http://localhost:11434/v1   # e.g. Ollama; unset for OpenAI itself
    export OPENAI_API_KEY=sk-...                       # any text for a local server
    export AGENTRUN_MODEL=qwen2.5:7b                   # the model's name on that server
    agentrun submit h1 "I need access to the billing dashboard"
    agentrun worker --agent examples.helpdesk_mcp:agent      # from the repository's root

``agent`` is an async context manager: the worker enters it on its own event loop, which
starts the server and lists its tools, and leaves it when it stops (a server whose
connection is lost is started again). The server's annotations are trusted: ``get_ticket``
is a read, ``create_ticket`` an idempotent write (the server deduplicates on the step's
idempotency key, which every call carries in ``_meta``) that, the server says, destroys
nothing; the override still keeps a human on every ticket (``agentrun approve h1 --all``, or
``agentrun tui``, which shows the class came from the override). Tickets land in
``<store>/.demo/tickets.json``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import mcp

from durableagent import Agent, AgentConfig, gate_for, mcp_tools, tool
from durableagent.models import OpenAIModel

SYSTEM = (
    "You are a helpdesk agent. Look up the policy on the request's topic first, then act on "
    "it: file a ticket when the policy says so. Answer briefly, quoting the ticket id."
)

POLICIES = {
    "billing": "Billing dashboard access needs a ticket approved by the finance lead.",
    "crm": "CRM access needs a ticket; sales operations grants it within a day.",
    "vpn": "VPN access is automatic for staff; connection problems need a ticket.",
    "access": "Access to shared resources needs a ticket approved by the resource owner.",
}


@tool
def lookup_policy(topic: Literal["billing", "crm", "vpn", "access"]) -> str:
    """Look up the helpdesk policy on a topic.

    Args:
        topic: What the request is about.
    """
    return POLICIES[topic]


@contextlib.asynccontextmanager
async def agent(root: Path) -> AsyncIterator[Agent]:
    """The helpdesk Agent for the store at ``root`` (``agentrun worker`` passes it), with the
    ticket server running for as long as the worker serves."""
    server = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "durableagent.demo.ticket_server", str(root)]
    )
    model = OpenAIModel(
        os.environ.get("AGENTRUN_MODEL", "gpt-4o-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        timeout=float(os.environ.get("AGENTRUN_MODEL_TIMEOUT", "120")),
    )
    human = {"create_ticket": {"approve": True}}
    # The three lines that connect a server and give its tools to the agent:
    async with mcp.Client(server) as tickets:
        tools = [lookup_policy, *await mcp_tools(tickets, trust_annotations=True, overrides=human)]
        yield Agent(AgentConfig(model, tools, system=SYSTEM), gate_for(tools))
