"""The reference note's worked example (section 3), step by step."""

from __future__ import annotations

from durableagent import FileStore, RunStatus, Status, run, signal, view_store
from helpdesk import INPUT, Side, helpdesk


async def test_first_attempt_records_exactly_seven_records_and_waits(store: FileStore, side: Side):
    config, model = helpdesk(store, side)
    out = await run(config, "a1", INPUT)

    assert out.status == Status.AWAITING_APPROVAL
    assert [p.tool for p in out.pending] == ["create_ticket"]
    assert model.calls == 2
    recs = store.load("a1")
    assert [(r.seq, r.type, r.step) for r in recs] == [
        (1, "run.started", ""),
        (2, "step.started", "llm/1"),
        (3, "step.completed", "llm/1"),
        (4, "step.started", "tool/1/0/lookup_policy"),
        (5, "step.completed", "tool/1/0/lookup_policy"),
        (6, "step.started", "llm/2"),
        (7, "step.completed", "llm/2"),
    ]
    assert side.tickets() == []


async def test_approval_replays_without_new_model_calls_and_files_one_ticket(
    store: FileStore, side: Side
):
    config, _model = helpdesk(store, side)
    first = await run(config, "a1", INPUT)
    signal(store, "a1", "approve", {"marker": first.pending[0].marker}, by="alice")

    config2, model2 = helpdesk(store, side)  # a new process would start with a new model
    out = await run(config2, "a1", None)

    assert out.status == Status.COMPLETED
    assert out.message is not None and out.message.content == "Ticket filed: TICKET-1"
    assert model2.calls == 1  # only llm/3; llm/1 and llm/2 came back from the journal
    assert side.count("model") == 3
    assert side.count("lookup") == 1
    assert len(side.tickets()) == 1
    types = [(r.type, r.step) for r in store.load("a1")[7:]]
    assert types == [
        ("signal", "tool/2/0/create_ticket"),
        ("step.started", "tool/2/0/create_ticket"),
        ("step.completed", "tool/2/0/create_ticket"),
        ("step.started", "llm/3"),
        ("step.completed", "llm/3"),
        ("run.completed", ""),
    ]
    assert view_store(store, "a1").status == RunStatus.COMPLETED


async def test_completed_run_calls_nothing_and_appends_nothing(store: FileStore, side: Side):
    config, _ = helpdesk(store, side)
    first = await run(config, "a1", INPUT)
    signal(store, "a1", "approve", {"marker": first.pending[0].marker})
    await run(config, "a1", None)
    before = store.path("a1").read_bytes()

    config3, model3 = helpdesk(store, side)
    out = await run(config3, "a1", None)
    again = await run(config3, "a1", INPUT)  # the same input again is harmless

    assert out.status == again.status == Status.COMPLETED
    assert out.message == again.message
    assert model3.calls == 0
    assert len(side.tickets()) == 1
    assert store.path("a1").read_bytes() == before


async def test_without_approval_resuming_asks_again_and_runs_nothing(store: FileStore, side: Side):
    config, model = helpdesk(store, side)
    first = await run(config, "a1", INPUT)
    second = await run(config, "a1", None)

    assert second.status == Status.AWAITING_APPROVAL
    assert second.pending == first.pending
    assert model.calls == 2
    assert len(store.load("a1")) == 7
    assert side.tickets() == []
