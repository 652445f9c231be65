"""A small store with a run in every state and fixed times, built with the core API
(``durableagent.testing.JournalWriter``).

Tests, snapshots and the screenshot script use it; fixed ``at`` stamps and a fixed clock keep
pictures byte-for-byte stable.
"""

from __future__ import annotations

from pathlib import Path

from durableagent import (
    Message,
    Status,
    Store,
    ToolCall,
    open_store,
)
from durableagent.testing import JournalWriter
from durableagent.worker import Attempts

# 2026-01-15 09:00:00 UTC; NOW is 10 minutes after the last record.
T0 = 1_768_467_600.0
NOW = T0 + 3600.0
INPUT = "I need access to the billing dashboard."
MARKUP_ARGS = {"summary": "[/oops] [link=x]click[/link] [bold red]loud", "queue": "[IT]"}
MARKUP_SAYS = "Filing it with [IT] as [b]urgent[/b]."
# Where to check whether a create_ticket happened (the app's ``hints``; a tool's, later).
HINTS = {"create_ticket": "search the ticket system for the requester's name"}
REFUND_ERROR = "model call failed: 503 Service Unavailable"


def _lookup(j: JournalWriter) -> None:
    j.asks(1, ToolCall("c1", "lookup_policy", {"topic": "access"}))
    j.tool("tool/1/0/lookup_policy", "Access needs a ticket approved by IT.")


def build_sample_store(root: Path, *, corrupt: bool = True, markup: bool = True) -> Store:
    """Build (or extend) the sample store at ``root`` and return it."""
    store = open_store(root)
    ticket = ToolCall("c2", "create_ticket", {"summary": "billing dashboard access"})

    j = JournalWriter(store, "laptop-1039", T0)
    with j.attempt("worker-1"):
        j.start("My laptop will not boot.")
        _lookup(j)
        j.asks(2, ToolCall("c2", "create_ticket", {"summary": "laptop does not boot"}))
        j.tool("tool/2/0/create_ticket", "TICKET-1039", write=True)
        answer = Message("assistant", "Ticket filed: TICKET-1039")
        j.model(3, answer)
        j.add("run.completed", data={"message": answer.to_dict()})
        j.outcome(Status.COMPLETED, message=answer)

    j = JournalWriter(store, "billing-1042", T0 + 600)
    with j.attempt("worker-1"):
        j.start(INPUT)
        _lookup(j)
        pending = j.asks(2, ticket)
        j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))

    j = JournalWriter(store, "vpn-1043", T0 + 300)
    with j.attempt("worker-1"):
        j.start("The VPN rejects my token.")
        _lookup(j)
        pending = j.asks(2, ToolCall("c2", "create_ticket", {"summary": "reset VPN token"}))
        j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
    j.signal("approve", {"marker": pending[0].marker}, "alice", "urgent")
    with j.attempt("worker-2"):
        j.tool("tool/2/0/create_ticket", None, write=True)
        j.outcome(Status.INDETERMINATE, step="tool/2/0/create_ticket")

    j = JournalWriter(store, "refund-1041", T0 + 1200)
    with j.attempt("worker-1"):
        j.start("Refund my last invoice.")
        j.add("step.started", "llm/1", "model")
        j.outcome(Status.FAILED, error=REFUND_ERROR)
    # What a worker records after two failed attempts (its own file today; the store's later).
    store.write_failures(
        "refund-1041", Attempts(2, 0, j.at, f"ServerError: {REFUND_ERROR}").__dict__
    )

    j = JournalWriter(store, "wifi-1046", T0 + 2400)
    with j.attempt("worker-1"):
        j.start("Guest wifi for the visitors.")
        _lookup(j)
        pending = j.asks(2, ToolCall("c2", "create_ticket", {"summary": "guest wifi"}))
        j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
    j.signal("approve", {"marker": pending[0].marker}, "bob", None)
    with j.attempt("worker-2"):  # stopped between steps (a worker shutting down)
        j.tool("tool/2/0/create_ticket", "TICKET-1046", write=True)

    j = JournalWriter(store, "onboard-1047", T0 + 3000)
    j.start("Set up accounts for a new hire.")  # submitted; no worker has taken it yet

    build_killed_run(store)

    if markup:
        j = JournalWriter(store, "markup-1048", T0 + 1800)
        with j.attempt("worker-1"):
            j.start("[bold]escalate[/bold] this")
            _lookup(j)
            pending = j.asks(
                2, ToolCall("c2", "create_ticket", dict(MARKUP_ARGS)), says=MARKUP_SAYS
            )
            j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))

    if corrupt:
        j = JournalWriter(store, "broken-1040", T0 + 900)
        j.start("Printer on floor 3 is jammed.")
        j.add("step.started", "llm/1", "model")
        j.add("step.completed", "llm/1", "model", Message("assistant", "On it.").to_dict())
        path = Path(root) / "broken-1040.jsonl"  # the journal of a store in a directory
        lines = path.read_bytes().split(b"\n")
        lines[1] = lines[1].replace(b'"llm/1"', b'"llm/9"')  # the crc no longer matches
        path.write_bytes(b"\n".join(lines))
    return store


AUDIT = "audit-1049"


def build_killed_run(store: Store) -> None:
    """``audit-1049``: its first worker was killed inside its second model call, the next one
    replayed two steps, re-ran that call and was killed inside its third: ready, and the next
    attempt replays four steps and re-runs llm/3."""
    j = JournalWriter(store, AUDIT, T0 + 2700)

    def audit(turn: int, topic: str) -> None:
        call = ToolCall(f"a{turn}", "lookup_policy", {"topic": topic})
        j.asks(turn, call)
        j.tool(f"tool/{turn}/0/lookup_policy", f"{topic}: access needs a ticket.")

    with j.attempt("worker-1", killed=True):
        j.start("Audit my access to billing, VPN and CRM.")
        audit(1, "billing")
        j.add("step.started", "llm/2", "model")  # killed while the model thought
    with j.attempt("worker-2", killed=True):
        audit(2, "vpn")
        j.add("step.started", "llm/3", "model")  # killed again
