"""The demo's scripted helpdesk model: a function of the conversation, so a replayed run
(which skips recorded model calls) gets the same next reply; paced for the slow audit run."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Sequence

from ..messages import Message, ToolCall
from ..models.base import ScriptedModel
from ..record import STEP_STARTED
from ..steps import model_step
from ..stores import Store
from ..tools import Tool, current_context

log = logging.getLogger("durableagent.demo")

PACE = 1.0  # seconds per step of the slow run
REQUESTER = "alex@example.com"

POLICIES = {
    "billing": "Billing dashboard access needs a ticket approved by the finance lead.",
    "crm": "CRM access needs a ticket; sales operations grants it within a day.",
    "vpn": "VPN access is automatic for staff; connection problems need a ticket.",
    "hardware": "Broken hardware is replaced through a ticket; tell the manager by email.",
    "admin": "Production admin rights need a change request, never a helpdesk ticket.",
    "access": "Access to shared resources needs a ticket approved by the resource owner.",
}

SYSTEM = "You are a helpdesk agent. Look up the policy, then act on it."


def _topic(text: str) -> str:
    text = text.lower()
    for word, topic in (
        ("billing", "billing"),
        ("crm", "crm"),
        ("vpn", "vpn"),
        ("laptop", "hardware"),
        ("admin", "admin"),
    ):
        if word in text:
            return topic
    return "access"


def _request(messages: Sequence[Message]) -> str:
    return next((m.content for m in messages if m.role == "user"), "")


def _is_audit(messages: Sequence[Message]) -> bool:
    return "audit" in _request(messages).lower()


AUDIT_TOPICS = ("audit:billing", "audit:vpn", "audit:crm", "audit:hardware", "audit:access")
AUDIT_KILLED_AT = 3  # the audit's model call the demo's child process is killed in
KILL_AUDIT = "llm/3"  # crash_in for that child: a model step, not a tool
BUILDER = "demo-build"  # the lease owner of the runs the demo store is built with


def reply(messages: Sequence[Message]) -> Message:
    """The demo model: what to do next, from the conversation alone."""
    request = _request(messages)
    results = [m for m in messages if m.role == "tool"]
    if _is_audit(messages):
        if len(results) < len(AUDIT_TOPICS):
            topic = AUDIT_TOPICS[len(results)]
            call = ToolCall(f"audit-{len(results)}", "lookup_policy", {"topic": topic})
            return Message("assistant", tool_calls=(call,))
        lines = "; ".join(r.content for r in results)
        return Message("assistant", f"Audit done. {lines}")
    if not results:
        call = ToolCall("c1", "lookup_policy", {"topic": _topic(request)})
        return Message("assistant", tool_calls=(call,))
    if len(results) == 1:
        calls = [
            ToolCall("c2", "create_ticket", {"summary": request[:80], "requester": REQUESTER}),
        ]
        if "email" in request.lower():
            body = f"Your report was received: {request[:80]}"
            calls.append(
                ToolCall(
                    "c3",
                    "send_email",
                    {"to": "manager@example.com", "subject": "Helpdesk request", "body": body},
                )
            )
        return Message("assistant", tool_calls=tuple(calls))
    return Message("assistant", _report(results[1:]))


def _report(results: Sequence[Message]) -> str:
    """What the agent tells the user once its writes ran: the real ticket id it filed."""
    denied = [r.content for r in results if r.content.startswith("denied")]
    if denied:
        return f"I could not file your request: {denied[0]}."
    said = []
    for r in results:
        if r.name == "create_ticket":
            said.append(f"Filed {r.content} for you")
        elif r.name == "send_email":
            said.append(f"{r.content[:1].upper()}{r.content[1:]}")
        else:
            said.append(r.content)
    return "; ".join(said) + "."


class DemoModel:
    """The scripted demo model, paced: the audit run takes ``pace`` seconds per model call so
    that its records arrive visibly. ``kill_audit_at``: SIGKILL this process inside the
    audit's model call of that turn, once its start shows in ``store`` (a slow call's start
    is recorded while it runs; its result never is)."""

    def __init__(
        self,
        pace: float = PACE,
        kill_audit_at: int | None = None,
        store: Store | None = None,
    ) -> None:
        self.pace = pace
        self.kill_audit_at = kill_audit_at
        self.store = store
        self.scripted = ScriptedModel(reply)

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        if _is_audit(messages):
            turn = 1 + sum(1 for m in messages if m.role == "assistant")
            if turn == self.kill_audit_at:
                await self._until_started(model_step(turn))
                os.kill(os.getpid(), signal.SIGKILL)
            if self.pace:
                await asyncio.sleep(self.pace)
        return await self.scripted.complete(messages, tools)

    async def _until_started(self, step: str) -> None:
        """Wait (a minute at most) until this call's start is in the journal."""
        run_id = current_context().run_id
        for _ in range(600):
            if self.store is None or not run_id:
                return
            records = await asyncio.to_thread(self.store.load, run_id)
            if any(r.type == STEP_STARTED and r.step == step for r in records[-3:]):
                return
            await asyncio.sleep(0.1)
