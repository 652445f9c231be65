"""The demo helpdesk agent and a store with runs in every state (``agentrun demo``).

The model is a :class:`ScriptedModel` driven by a function of the conversation, so a replayed
run (which skips recorded model calls) gets the same next reply. Its tools act on a tiny
ticket system and outbox kept as JSON files in ``<store>/.demo/``. The two writes show the
difference idempotency makes: the ticket system deduplicates on the step's idempotency key, so
``create_ticket`` is an *idempotent* write that simply runs again after a crash; the outbox
does not, so an unfinished ``send_email`` stops the run until a human opens ``outbox.json`` and
reconciles it.

Runs the demo store holds (``build_demo_store``):

- ``billing-access``: completed (a ticket approved and filed).
- ``admin-rights``: completed after a human denied the ticket.
- ``laptop-broken``: awaiting approval of two calls made in one turn (ticket and email).
- ``shared-drive``: awaiting approval of one ticket.
- ``crm-access``: indeterminate. A first child process was SIGKILLed inside ``create_ticket``
  after the ticket was filed: being idempotent, it ran again in the next child with the same
  key (one ticket, two attempts). That child was SIGKILLed inside ``send_email`` after the
  mail was queued: not idempotent, so it waits for a human.
- ``vpn-access``: failed three times (the policy service is down: delete
  ``.demo/policy-service-down``, then ``agentrun retry vpn-access``).
- ``password-reset``: ready (submitted, never run).
- ``access-audit``: slow (about a second per step). A child process ran it and was SIGKILLed
  inside its third model call: ready, its attempt lost; the demo's worker resumes it, replaying
  the four steps that have results and re-running the call that was cut off.
"""

from __future__ import annotations

from .agent import demo_agent, demo_tools
from .build import RUNS, build_demo_store, is_demo_store
from .script import PACE, POLICIES, SYSTEM, DemoModel, reply
from .tickets import (
    DEMO_DIR,
    SERVICE_DOWN,
    StaleFenceError,
    add_item,
    demo_dir,
    demo_hints,
    read_list,
)

__all__ = [
    "DEMO_DIR",
    "PACE",
    "POLICIES",
    "RUNS",
    "SERVICE_DOWN",
    "SYSTEM",
    "DemoModel",
    "StaleFenceError",
    "add_item",
    "build_demo_store",
    "demo_agent",
    "demo_dir",
    "demo_hints",
    "demo_tools",
    "is_demo_store",
    "read_list",
    "reply",
]
