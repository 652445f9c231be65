"""A helpdesk agent on a real model: any OpenAI-compatible server (OpenAI, vLLM, Ollama,
llama.cpp, LM Studio, OpenRouter), configured only by the environment::

    export OPENAI_BASE_URL=http://localhost:11434/v1   # e.g. Ollama; unset for OpenAI itself
    export OPENAI_API_KEY=sk-...                       # any text for a local server
    export AGENTRUN_MODEL=qwen2.5:7b                   # the model's name on that server
    agentrun submit h1 "I need access to the billing dashboard"
    agentrun worker --agent examples.helpdesk_openai:agent     # from the repository's root

Its tools are typed functions (``@tool``). ``create_ticket`` files into a ticket system that
deduplicates on the step's idempotency key (a JSON file in ``<store>/.helpdesk/``), so it is an
idempotent write: if the worker dies mid-call, the next attempt files it again with the same
key and gets the same ticket. ``send_email`` is a plain write: if the worker dies mid-call, the
run stops as indeterminate until a human looks in the outbox and reconciles it. Both writes wait
for approval (``agentrun approve h1 --all``, or ``agentrun tui``).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, Literal

from durableagent import Agent, AgentConfig, ToolContext, gate_for, tool
from durableagent.models import OpenAIModel

SYSTEM = (
    "You are a helpdesk agent. Look up the policy on the request's topic first, then act on "
    "it: file a ticket when the policy says so, email the manager when asked. Answer briefly, "
    "quoting the ticket id."
)

POLICIES = {
    "billing": "Billing dashboard access needs a ticket approved by the finance lead.",
    "crm": "CRM access needs a ticket; sales operations grants it within a day.",
    "vpn": "VPN access is automatic for staff; connection problems need a ticket.",
    "hardware": "Broken hardware is replaced through a ticket; tell the manager by email.",
    "access": "Access to shared resources needs a ticket approved by the resource owner.",
}

Topic = Literal["billing", "crm", "vpn", "hardware", "access"]


class Ledger:
    """A list of records in a JSON file, appended to under a lock (several workers may write
    at once). With a key, a record already filed under it is returned instead of a new one."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, record: dict[str, Any], *, prefix: str, key: str | None = None) -> str:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            items = json.loads(self.path.read_text()) if self.path.exists() else []
            for old in items:
                if key is not None and old.get("key") == key:
                    return str(old["id"])
            item = {"id": f"{prefix}-{len(items) + 1}", **record, "key": key}
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps([*items, item], indent=2) + "\n")
            os.replace(tmp, self.path)  # readers never see half a file
            return str(item["id"])


def agent(root: Path) -> Agent:
    """The helpdesk Agent for the store at ``root`` (``agentrun worker`` passes it)."""
    tickets = Ledger(Path(root) / ".helpdesk" / "tickets.json")
    outbox = Ledger(Path(root) / ".helpdesk" / "outbox.json")

    @tool
    def lookup_policy(topic: Topic) -> str:
        """Look up the helpdesk policy on a topic.

        Args:
            topic: What the request is about.
        """
        return POLICIES[topic]

    @tool(
        write=True,
        idempotent=True,
        hint=f"search {tickets.path} for a ticket whose key is this step's idempotency key",
    )
    def create_ticket(summary: str, requester: str, ctx: ToolContext) -> str:
        """File a ticket in the ticket system; returns its id.

        Args:
            summary: One line saying what is needed.
            requester: The email address of the person asking.
        """
        record = {"summary": summary, "requester": requester}
        return tickets.add(record, prefix="TICKET", key=ctx.idempotency_key)

    @tool(write=True, hint=f"look in {outbox.path} for an email with this subject")
    def send_email(to: str, subject: str, body: str) -> str:
        """Send an email.

        Args:
            to: The recipient's address.
            subject: The subject line.
            body: The text.
        """
        return outbox.add({"to": to, "subject": subject, "body": body}, prefix="MAIL")

    tools = [lookup_policy, create_ticket, send_email]
    model = OpenAIModel(
        os.environ.get("AGENTRUN_MODEL", "gpt-4o-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        timeout=float(os.environ.get("AGENTRUN_MODEL_TIMEOUT", "120")),
    )
    return Agent(AgentConfig(model, tools, system=SYSTEM), gate_for(tools))
