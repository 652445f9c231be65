"""Every RunStatus, reached by a real sequence of runs and signals."""

from __future__ import annotations

import pytest

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    Message,
    PolicyGate,
    Reconcile,
    RunStatus,
    ScriptedModel,
    Status,
    run,
    signal,
    submit,
    view_run,
    view_store,
)
from helpdesk import INPUT, Side, helpdesk


def status(store: FileStore, run_id: str) -> RunStatus:
    return view_store(store, run_id).status


async def test_the_whole_life_of_a_run(store: FileStore, side: Side):
    submit(store, "a1", INPUT)
    assert status(store, "a1") == RunStatus.READY

    config, _ = helpdesk(store, side)
    out = await run(config, "a1", None)
    view = view_store(store, "a1")
    assert view.status == RunStatus.AWAITING_APPROVAL
    assert view.pending == out.pending and view.model_calls == 2
    assert view.waiting_on == "approve create_ticket"

    with store.lease("a1"):
        assert status(store, "a1") == RunStatus.RUNNING

    signal(store, "a1", "approve", {"marker": out.pending[0].marker})
    assert status(store, "a1") == RunStatus.READY

    def boom(args):
        side.note("tickets", "TICKET-1")
        raise OSError("connection reset after the ticket was filed")

    from durableagent import Tool

    tools = [
        t if t.name != "create_ticket" else Tool("create_ticket", fn=boom)
        for t in config.agent.tools
    ]
    broken = Config(AgentConfig(config.agent.model, tools), config.gate, store)
    with pytest.raises(OSError):
        await run(broken, "a1", None)
    view = view_store(store, "a1")
    assert view.status == RunStatus.INDETERMINATE  # before failed: a human must look
    assert view.indeterminate is not None
    assert view.indeterminate.name == "tool/2/0/create_ticket"
    assert view.indeterminate.call is not None
    assert view.indeterminate.call.arguments == {"summary": "billing dashboard access"}

    signal(store, "a1", "reconcile", Reconcile("tool/2/0/create_ticket", "done", "TICKET-1"))
    assert status(store, "a1") == RunStatus.READY

    assert (await run(config, "a1", None)).status == Status.COMPLETED
    view = view_store(store, "a1")
    assert view.status == RunStatus.COMPLETED
    assert view.answer is not None and view.answer.content == "Ticket filed: TICKET-1"
    assert view.model_calls == 3


async def test_failed_until_the_journal_moves_on(store: FileStore):
    calls = []

    def flaky(messages):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("model overloaded")
        return Message("assistant", "fine")

    config = Config(AgentConfig(ScriptedModel(flaky)), PolicyGate(), store)
    with pytest.raises(RuntimeError):
        await run(config, "f1", INPUT)
    view = view_store(store, "f1")
    assert view.status == RunStatus.FAILED
    assert "model overloaded" in view.error and "model overloaded" in view.waiting_on
    assert store.last_outcome("f1").seq == 2

    out = await run(config, "f1", None)  # a retry: llm/1 was never recorded, so it runs again
    assert out.status == Status.COMPLETED
    assert status(store, "f1") == RunStatus.COMPLETED


def test_corrupt_journal_is_a_status_not_an_exception(store: FileStore):
    submit(store, "c1", INPUT)
    with open(store.path("c1"), "ab") as f:
        f.write(b"garbage\n")
    view = view_store(store, "c1")
    assert view.status == RunStatus.CORRUPT
    assert view.error_line == 2 and "line 2" in view.error
    assert view.error_reason.startswith("not JSON")
    assert view.needs_human


def test_the_fold_is_pure_and_the_lease_wins_over_everything_but_completion(store: FileStore):
    submit(store, "p1", INPUT)
    records = store.load("p1")
    assert view_run(records).status == RunStatus.READY
    assert view_run(records, leased=True).status == RunStatus.RUNNING
    assert view_run([]).status == RunStatus.READY


def hand_written(store: FileStore, run_id: str, *lines: str) -> None:
    """A journal written by hand (no crcs), as a human repairing a file might leave it."""
    store.path(run_id).write_text("".join(line + "\n" for line in lines))


START = '{"seq":1,"type":"run.started","step":"","kind":"","data":{"input":[]},"at":0}'


def test_odd_but_valid_shapes_never_crash_the_fold(store: FileStore):
    hand_written(
        store,
        "odd",
        START,
        '{"seq":2,"type":"signal","step":"x","kind":"","data":{"name":"approve","payload":"m",'
        '"by":7,"reason":null},"at":1}',
        '{"seq":3,"type":"step.completed","step":"llm/1","kind":"model","data":[1,2],"at":2}',
        '{"seq":4,"type":"signal","step":"y","kind":"","data":{"name":"reconcile","payload":[]},'
        '"at":3}',
    )
    view = view_store(store, "odd")
    assert view.status == RunStatus.READY
    assert len(view.records) == 4 and len(view.signals) == 2


@pytest.mark.parametrize("typ", ["run.started", "step.started", "signal", "run.completed"])
def test_records_other_than_results_must_carry_an_object(store: FileStore, typ: str):
    hand_written(store, "bad", f'{{"seq":1,"type":"{typ}","step":"","kind":"","data":"x","at":0}}')
    view = view_store(store, "bad")
    assert view.status == RunStatus.CORRUPT
    assert "must be an object" in view.error and view.error_line == 1


async def test_a_final_message_that_is_not_a_message_is_corrupt_not_a_crash(store: FileStore):
    from durableagent import CorruptJournalError

    hand_written(
        store,
        "fin",
        START,
        '{"seq":2,"type":"run.completed","step":"","kind":"","data":{"message":5},"at":1}',
    )
    config = Config(AgentConfig(ScriptedModel([])), PolicyGate(), store)
    with pytest.raises(CorruptJournalError, match="line 2"):
        await run(config, "fin", None)


def _records(*types: tuple[str, str, dict]) -> list:
    from durableagent import Record

    out = [Record(1, "run.started", "", "", {"input": []}, 0.0)]
    for i, (typ, step, data) in enumerate(types, 2):
        kind = "tool" if step.startswith("tool/") else ("model" if step else "")
        out.append(Record(i, typ, step, kind, data, float(i)))
    return out


_OPEN_WRITE = ("step.started", "tool/1/0/t", {"write": True})
_DONE = ("run.completed", "", {"message": {"role": "assistant", "content": "ok"}})
_REFUSED_WRITE = ("step.started", "tool/1/0/t", {"write": True, "refused": True})


@pytest.mark.parametrize(
    "records, outcome, leased, want",
    [
        # completed wins over the lease and everything else
        (_records(_OPEN_WRITE, _DONE), None, True, RunStatus.COMPLETED),
        # running wins over an open write and a pending approval
        (_records(_OPEN_WRITE), "awaiting", True, RunStatus.RUNNING),
        # indeterminate wins over awaiting_approval and failed
        (_records(_OPEN_WRITE), "awaiting", False, RunStatus.INDETERMINATE),
        (_records(_OPEN_WRITE), "failed", False, RunStatus.INDETERMINATE),
        # awaiting_approval wins over failed's fallback to ready
        (_records(), "awaiting", False, RunStatus.AWAITING_APPROVAL),
        # failed only while the outcome is the journal's last word
        (_records(), "failed", False, RunStatus.FAILED),
        (_records(("signal", "tool/1/0/t", {"name": "x"})), "failed-old", False, RunStatus.READY),
        (_records(), None, False, RunStatus.READY),
        # a refused write's start (a torn append kept it without its refusal) never acted
        (_records(_REFUSED_WRITE), None, False, RunStatus.READY),
    ],
    ids=[
        "completed>running",
        "running>indeterminate",
        "indeterminate>awaiting",
        "indeterminate>failed",
        "awaiting>failed",
        "failed",
        "failed-then-moved-on",
        "ready",
        "refused-write-start-is-no-open-write",
    ],
)
def test_the_status_rules_apply_in_the_spec_order(records, outcome, leased, want):
    from durableagent import Outcome, Pending

    pending = (Pending("tool/1/1/u#000000000000", "tool/1/1/u", "u", {}),)
    made = {
        None: None,
        "awaiting": Outcome(Status.AWAITING_APPROVAL, pending=pending, seq=records[-1].seq),
        "failed": Outcome(Status.FAILED, error="boom", seq=records[-1].seq),
        "failed-old": Outcome(Status.FAILED, error="boom", seq=records[-1].seq - 1),
    }[outcome]
    assert view_run(records, outcome=made, leased=leased).status == want
