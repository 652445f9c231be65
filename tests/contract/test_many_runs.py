"""Many runs at once on both stores: a query selects from the store's summaries (and its lease
holders for owner:), and a bulk action applies each run's signal on its own, reporting
applied or refused per run; a refused run's journal is left as it was."""

from __future__ import annotations

import time

from durableagent import Message, RunStatus, Status, Store, ToolCall, view_store
from durableagent.bulk import ACTIONS, apply_action, plan_action, select_runs
from durableagent.query import parse_query
from durableagent.testing import JournalWriter

T0 = time.time() - 7200  # two hours ago: age>1h holds for these runs


def build(store: Store) -> None:
    """billing-1 and billing-2 await create_ticket (billing-2 also send_email), access-3
    failed, done-4 completed."""
    for rid, calls in (
        ("billing-1", [ToolCall("c1", "create_ticket", {"summary": "one"})]),
        (
            "billing-2",
            [
                ToolCall("c1", "create_ticket", {"summary": "two"}),
                ToolCall("c2", "send_email", {"to": "a@example.com"}),
            ],
        ),
    ):
        j = JournalWriter(store, rid, T0)
        j.start("help")
        pending = j.asks(1, *calls)
        j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
    j = JournalWriter(store, "access-3", T0)
    j.start("vpn")
    j.add("step.started", "llm/1", "model")
    j.outcome(Status.FAILED, error="ServerError: 503")
    store.write_failures("access-3", {"failures": 5, "signals": 0, "at": T0, "error": "503"})
    j = JournalWriter(store, "done-4", T0)
    j.start("thanks")
    j.model(1, Message("assistant", "done"))
    j.add("run.completed", data={"message": Message("assistant", "done").to_dict()})
    j.outcome(Status.COMPLETED, message=Message("assistant", "done"))


def ids(store: Store, text: str) -> list[str]:
    return sorted(s.run_id for s in select_runs(store, parse_query(text)))


def test_a_query_selects_from_the_store_s_summaries(any_store: Store) -> None:
    build(any_store)
    assert ids(any_store, "status:awaiting tool:send_email") == ["billing-2"]
    assert ids(any_store, "needs:human age>1h -run:billing-*") == ["access-3"]
    assert ids(any_store, "status:completed") == ["done-4"]
    with any_store.lease("billing-1", owner="host-a:1"):
        assert ids(any_store, "owner:host-a*") == ["billing-1"]
    assert ids(any_store, "owner:host-a*") == []


def test_approve_by_query_applies_each_run_and_reports_the_refused_one(any_store: Store) -> None:
    build(any_store)
    query = parse_query("tool:create_ticket -tool:send_email")
    runs = [s for s in any_store.summaries() if s.run_id != "access-3"]
    untouched = any_store.load("done-4")
    targets = plan_action(ACTIONS["approve"], runs, query)
    done = {d.run_id: d for d in apply_action(any_store, ACTIONS["approve"], targets, by="ana")}
    assert done["billing-1"].applied and done["billing-2"].applied
    assert not done["done-4"].applied and "no pending call" in done["done-4"].message
    assert any_store.load("done-4") == untouched
    assert view_store(any_store, "billing-1").pending == ()
    assert [p.tool for p in view_store(any_store, "billing-2").pending] == ["send_email"]


def test_cancel_by_query_and_a_bulk_retry(any_store: Store) -> None:
    build(any_store)
    cancel = ACTIONS["cancel"]
    targets = plan_action(cancel, select_runs(any_store, parse_query("run:billing-*")))
    done = apply_action(any_store, cancel, targets, by="ana", reason="outage")
    assert [d.applied for d in done] == [True, True]
    assert view_store(any_store, "billing-1").status == RunStatus.CANCELLED
    retry = ACTIONS["retry"]
    targets = plan_action(retry, select_runs(any_store, parse_query("-status:cancelled")))
    done = {d.run_id: d.applied for d in apply_action(any_store, retry, targets)}
    assert done == {"access-3": True, "done-4": False}
    assert any_store.read_failures("access-3") is None
