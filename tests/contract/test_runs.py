"""The run semantics on every store: the worked example, crashes inside steps, input
mismatch, refused signals, and each status as the summaries report it."""

from __future__ import annotations

from pathlib import Path

import pytest

from durableagent import (
    AgentConfig,
    Config,
    InputMismatchError,
    Reconcile,
    RunNotFoundError,
    RunStatus,
    SignalError,
    Status,
    Store,
    Tool,
    fork,
    run,
    signal,
    submit,
    view_run,
    view_store,
)
from helpdesk import INPUT, Side, helpdesk


class Crash(Exception):
    """Stands in for the process dying inside a tool (the real SIGKILL is in test_kill)."""


def dying(config: Config, tool_name: str, side: Side) -> Config:
    """The config with one tool that does its work, then dies before returning."""

    def die(args: dict) -> str:
        if tool_name == "create_ticket":
            side.note("tickets", '{"id": "TICKET-1"}')
        else:
            side.note("lookup")
        raise Crash(tool_name)

    tools = [Tool(t.name, fn=die) if t.name == tool_name else t for t in config.agent.tools]
    return Config(
        AgentConfig(config.agent.model, tools, config.agent.system), config.gate, config.store
    )


@pytest.fixture
def side(tmp_path: Path) -> Side:
    return Side(tmp_path / "side")


def status(store: Store, run_id: str) -> RunStatus:
    summary = store.summary(run_id)
    assert summary is not None
    # The summary and the full fold must agree: one definition of a status.
    assert summary.status == view_store(store, run_id).status
    return summary.status


async def test_the_worked_example(any_store: Store, side: Side):
    config, model = helpdesk(any_store, side)
    first = await run(config, "a1", INPUT)
    assert first.status == Status.AWAITING_APPROVAL and model.calls == 2
    assert len(any_store.load("a1")) == 7
    assert status(any_store, "a1") == RunStatus.AWAITING_APPROVAL

    signal(any_store, "a1", "approve", {"marker": first.pending[0].marker}, by="alice")
    assert status(any_store, "a1") == RunStatus.READY
    config2, model2 = helpdesk(any_store, side)
    done = await run(config2, "a1", None)
    assert done.status == Status.COMPLETED and model2.calls == 1
    assert done.message is not None and done.message.content == "Ticket filed: TICKET-1"
    assert len(side.tickets()) == 1 and side.count("lookup") == 1
    assert status(any_store, "a1") == RunStatus.COMPLETED

    before = any_store.load("a1")
    again = await run(config2, "a1", INPUT)
    assert again.message == done.message and any_store.load("a1") == before


async def test_an_unrecorded_write_waits_for_a_human_then_done_never_reruns_it(
    any_store: Store, side: Side
):
    config, _ = helpdesk(any_store, side)
    first = await run(config, "a1", INPUT)
    signal(any_store, "a1", "approve", {"marker": first.pending[0].marker})
    with pytest.raises(Crash):
        await run(dying(config, "create_ticket", side), "a1", None)
    assert status(any_store, "a1") == RunStatus.INDETERMINATE
    out = await run(config, "a1", None)
    assert out.status == Status.INDETERMINATE and out.step == "tool/2/0/create_ticket"
    assert len(side.tickets()) == 1
    signal(any_store, "a1", "reconcile", Reconcile("tool/2/0/create_ticket", "done", "T-9"))
    done = await run(config, "a1", None)
    assert done.status == Status.COMPLETED and len(side.tickets()) == 1
    assert done.message is not None and "T-9" in done.message.content


async def test_reconcile_retry_runs_the_write_once_more(any_store: Store, side: Side):
    config, _ = helpdesk(any_store, side)
    first = await run(config, "a1", INPUT)
    signal(any_store, "a1", "approve", {"marker": first.pending[0].marker})
    with pytest.raises(Crash):
        await run(dying(config, "create_ticket", side), "a1", None)
    signal(any_store, "a1", "reconcile", Reconcile("tool/2/0/create_ticket", "retry"))
    assert status(any_store, "a1") == RunStatus.READY
    done = await run(config, "a1", None)
    assert done.status == Status.COMPLETED and len(side.tickets()) == 2


async def test_an_unrecorded_read_is_rerun_and_the_model_call_before_it_is_not(
    any_store: Store, side: Side
):
    config, model = helpdesk(any_store, side)
    with pytest.raises(Crash):
        await run(dying(config, "lookup_policy", side), "a1", INPUT)
    assert status(any_store, "a1") == RunStatus.FAILED
    config2, model2 = helpdesk(any_store, side)
    out = await run(config2, "a1", None)
    assert out.status == Status.AWAITING_APPROVAL
    assert model.calls + model2.calls == 2  # llm/1 once, llm/2 once
    assert side.count("lookup") == 2


async def test_a_run_id_names_one_run(any_store: Store, side: Side):
    config, _ = helpdesk(any_store, side)
    with pytest.raises(RunNotFoundError):
        await run(config, "nobody", None)
    await run(config, "a1", INPUT)
    before = any_store.load("a1")
    from durableagent import Message

    with pytest.raises(InputMismatchError):
        await run(config, "a1", [Message("user", "something else")])
    with pytest.raises(InputMismatchError):
        submit(any_store, "a1", [Message("user", "something else")])
    assert any_store.load("a1") == before


async def test_every_refused_signal_leaves_the_journal_as_it_was(any_store: Store, side: Side):
    config, _ = helpdesk(any_store, side)
    first = await run(config, "a1", INPUT)
    marker = first.pending[0].marker
    before = any_store.load("a1")
    for name, payload in [
        ("launch", {}),
        ("approve", {}),
        ("approve", {"marker": "tool/9/0/create_ticket#abc"}),
        ("reconcile", {"step": "tool/2/0/create_ticket", "outcome": "retry"}),
        ("reconcile", {"step": "tool/1/0/lookup_policy", "outcome": "done", "result": "x"}),
    ]:
        with pytest.raises(SignalError):
            signal(any_store, "a1", name, payload)
        assert any_store.load("a1") == before
    with pytest.raises(RunNotFoundError):
        signal(any_store, "nobody", "approve", {"marker": marker})
    signal(any_store, "a1", "deny", {"marker": marker}, by="bob")
    after = any_store.load("a1")
    with pytest.raises(SignalError, match="already denied by bob"):
        signal(any_store, "a1", "approve", {"marker": marker})
    assert any_store.load("a1") == after


async def test_summaries_list_every_run_with_the_folds_status(any_store: Store, side: Side):
    config, _ = helpdesk(any_store, side)
    assert any_store.summaries() == []
    submit(any_store, "ready", INPUT)
    await run(config, "waiting", INPUT)
    with any_store.lease("ready"):
        running = {s.run_id: s for s in any_store.summaries()}
        assert running["ready"].status == RunStatus.RUNNING and running["ready"].leased
    got = {s.run_id: s for s in any_store.summaries()}
    assert sorted(got) == ["ready", "waiting"]
    for run_id, s in got.items():
        records = any_store.load(run_id)
        view = view_run(records, outcome=any_store.last_outcome(run_id), run_id=run_id)
        assert s.status == view.status and s.last_seq == view.last_seq
        assert s.steps == len(view.steps) and s.model_calls == view.model_calls
        assert s.waiting_on == view.waiting_on
    assert got["waiting"].pending[0].tool == "create_ticket"


async def test_a_fork_says_where_it_came_from_in_every_listing(any_store: Store, side: Side):
    config, _ = helpdesk(any_store, side)
    await run(config, "a1", INPUT)
    fork(any_store, "a1", "a2", at_step="llm/2", by="ana", reason="a better prompt")
    summary = any_store.summary("a2")
    assert summary is not None and summary.forked_from is not None
    assert (summary.forked_from.run, summary.forked_from.step) == ("a1", "llm/2")
    listed = {s.run_id: s for s in any_store.summaries()}
    assert listed["a2"].forked_from == summary.forked_from and listed["a1"].forked_from is None
    assert summary.status == view_store(any_store, "a2").status
