"""ToolContext (run, step, attempt, a stable idempotency key) and idempotent writes that
resume on their own while other writes still stop for a human."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    Message,
    PolicyGate,
    Record,
    RunStatus,
    ScriptedModel,
    Status,
    Tool,
    ToolCall,
    ToolContext,
    gate_for,
    run,
    run_loop,
    tool,
    view_run,
    view_store,
)
from durableagent.journal import idempotency_key
from durableagent.record import RUN_STARTED, STEP_COMPLETED, STEP_STARTED

INPUT = [Message("user", "file a ticket")]
STEP = "tool/1/0/create_ticket"


def reply(messages: Sequence[Message]) -> Message:
    """create_ticket, then an answer quoting its result."""
    done = [m for m in messages if m.role == "tool"]
    if not done:
        call = ToolCall("c1", "create_ticket", {"summary": "printer jam"})
        return Message("assistant", tool_calls=(call,))
    return Message("assistant", f"filed {done[0].content}")


class Tickets:
    """A ticket system that deduplicates on the idempotency key, and a flaky connection to
    it: ``lose_replies`` times, the ticket is filed and the reply lost (the tool raises)."""

    def __init__(self, lose_replies: int = 0) -> None:
        self.filed: dict[str, str] = {}
        self.contexts: list[ToolContext] = []
        self.lose_replies = lose_replies

    def file(self, summary: str, ctx: ToolContext) -> str:
        self.contexts.append(ctx)
        ticket = self.filed.setdefault(ctx.idempotency_key, f"T-{len(self.filed) + 1}")
        if self.lose_replies:
            self.lose_replies -= 1
            raise ConnectionError("the ticket system timed out after filing")
        return ticket


def helpdesk(tickets: Tickets, *, idempotent: bool) -> tuple[AgentConfig, PolicyGate]:
    @tool(write=True, approve=False, idempotent=idempotent, hint="search the tickets by key")
    def create_ticket(summary: str, ctx: ToolContext) -> str:
        """File a ticket."""
        return tickets.file(summary, ctx)

    tools = [create_ticket]
    return AgentConfig(ScriptedModel(reply), tools), gate_for(tools)


def config(store: FileStore, tickets: Tickets, *, idempotent: bool) -> Config:
    return Config(*helpdesk(tickets, idempotent=idempotent), store)


async def test_a_tool_gets_its_run_step_attempt_and_key(store: FileStore) -> None:
    tickets = Tickets()
    outcome = await run(config(store, tickets, idempotent=True), "r1", INPUT)
    assert outcome.status == Status.COMPLETED
    (ctx,) = tickets.contexts
    assert (ctx.run_id, ctx.step, ctx.attempt) == ("r1", STEP, 1)
    assert re.fullmatch(r"r1:[0-9a-f]{12}:tool/1/0/create_ticket", ctx.idempotency_key)
    assert ctx.idempotency_key == idempotency_key("r1", STEP, store.load("r1")[0])


async def test_an_unfinished_idempotent_write_runs_again_with_the_same_key(
    store: FileStore,
) -> None:
    tickets = Tickets(lose_replies=1)
    cfg = config(store, tickets, idempotent=True)
    with pytest.raises(ConnectionError):
        await run(cfg, "r1", INPUT)
    last = store.load("r1")[-1]
    assert (last.type, last.step) == (STEP_STARTED, STEP)
    assert last.data == {"write": True, "idempotent": True, "hint": "search the tickets by key"}
    assert view_store(store, "r1").status != RunStatus.INDETERMINATE

    outcome = await run(cfg, "r1", None)
    assert outcome.status == Status.COMPLETED
    assert outcome.message is not None and outcome.message.content == "filed T-1"
    first, second = tickets.contexts
    assert (first.attempt, second.attempt) == (1, 2)
    assert first.idempotency_key == second.idempotency_key
    assert len(tickets.filed) == 1  # the system deduplicated the second call


async def test_an_unfinished_write_that_is_not_idempotent_still_stops_for_a_human(
    store: FileStore,
) -> None:
    tickets = Tickets(lose_replies=1)
    cfg = config(store, tickets, idempotent=False)
    with pytest.raises(ConnectionError):
        await run(cfg, "r1", INPUT)
    assert store.load("r1")[-1].data == {"write": True, "hint": "search the tickets by key"}
    outcome = await run(cfg, "r1", None)
    assert (outcome.status, outcome.step) == (Status.INDETERMINATE, STEP)
    assert len(tickets.contexts) == 1
    view = view_store(store, "r1")
    assert view.status == RunStatus.INDETERMINATE and view.indeterminate is not None
    assert view.indeterminate.hint == "search the tickets by key"
    assert not view.indeterminate.idempotent


def rec(seq: int, type: str, step: str = "", kind: str = "", data: Any = None) -> Record:
    return Record(seq, type, step, kind, {} if data is None else data, 100.0 + seq)


def open_write(started: dict[str, Any]) -> list[Record]:
    call = Message("assistant", tool_calls=(ToolCall("c1", "create_ticket", {}),)).to_dict()
    return [
        rec(1, RUN_STARTED, data={"input": [m.to_dict() for m in INPUT]}),
        rec(2, STEP_STARTED, "llm/1", "model"),
        rec(3, STEP_COMPLETED, "llm/1", "model", call),
        rec(4, STEP_STARTED, STEP, "tool", started),
    ]


def test_the_status_fold_calls_an_open_idempotent_write_ready_not_indeterminate() -> None:
    view = view_run(open_write({"write": True, "idempotent": True, "hint": "look"}))
    assert view.status == RunStatus.READY and view.indeterminate is None
    step = next(s for s in view.steps if s.name == STEP)
    assert step.write and step.idempotent and step.hint == "look"
    plain = view_run(open_write({"write": True}))
    assert plain.status == RunStatus.INDETERMINATE
    assert plain.indeterminate is not None and not plain.indeterminate.idempotent


@pytest.mark.parametrize(
    ("recorded", "gate_idempotent", "reruns"),
    [
        ({"write": True, "idempotent": True}, False, True),
        ({"write": True}, True, False),
        ({"write": False, "idempotent": True}, False, True),  # a read: always re-runs
    ],
)
async def test_the_recorded_flag_decides_not_todays_gate(
    store: FileStore, recorded: dict[str, Any], gate_idempotent: bool, reruns: bool
) -> None:
    for r in open_write(recorded):
        store.append("r1", r)
    ran: list[str] = []
    tool_ = Tool("create_ticket", fn=lambda args: ran.append("x") or "T-9")
    gate = PolicyGate(
        writes={"create_ticket"},
        approve=(),
        idempotent={"create_ticket"} if gate_idempotent else (),
    )
    outcome = await run(Config(AgentConfig(ScriptedModel(reply), [tool_]), gate, store), "r1", None)
    if reruns:
        assert outcome.status == Status.COMPLETED and ran == ["x"]
    else:
        assert outcome.status == Status.INDETERMINATE and ran == []


async def test_a_reads_start_records_only_write_false(store: FileStore) -> None:
    @tool
    def create_ticket(summary: str) -> str:
        """A read, whatever its name."""
        return "T-1"

    cfg = Config(
        AgentConfig(ScriptedModel(reply), [create_ticket]), gate_for([create_ticket]), store
    )
    await run(cfg, "r1", INPUT)
    started = next(r for r in store.load("r1") if r.step == STEP and r.type == STEP_STARTED)
    assert started.data == {"write": False}


async def test_a_read_run_again_after_a_failure_sees_attempt_two_and_the_same_key(
    store: FileStore,
) -> None:
    seen: list[ToolContext] = []

    @tool
    async def create_ticket(summary: str, ctx: ToolContext) -> str:
        """An async read that fails the first time."""
        seen.append(ctx)
        if len(seen) == 1:
            raise ConnectionError("down")
        return "T-1"

    cfg = Config(AgentConfig(ScriptedModel(reply), [create_ticket]), PolicyGate(), store)
    with pytest.raises(ConnectionError):
        await run(cfg, "r1", INPUT)
    assert (await run(cfg, "r1", None)).status == Status.COMPLETED
    assert [c.attempt for c in seen] == [1, 2]
    assert seen[0].idempotency_key == seen[1].idempotency_key


async def test_a_new_run_under_an_old_id_never_shares_its_keys(tmp_path: Any) -> None:
    keys = []
    for name in ("one", "two"):  # two stores, one ticket system, the same run id
        tickets = Tickets()
        await run(config(FileStore(tmp_path / name), tickets, idempotent=True), "r1", INPUT)
        keys.append(tickets.contexts[0].idempotency_key)
    assert keys[0] != keys[1]
    assert all(k.startswith("r1:") and k.endswith(":" + STEP) for k in keys)


async def test_a_plain_run_gives_no_run_id_attempt_one_and_a_fresh_key_per_call() -> None:
    tickets = Tickets()
    for _ in range(2):
        agent, gate = helpdesk(tickets, idempotent=True)
        await run_loop(agent, INPUT, gate=gate)
    first, second = tickets.contexts
    assert (first.run_id, first.step, first.attempt) == ("", STEP, 1)
    assert first.idempotency_key != second.idempotency_key
    assert len(tickets.filed) == 2  # nothing durable to deduplicate against


async def test_a_plain_tool_function_taking_ctx_gets_the_context(store: FileStore) -> None:
    seen: list[Any] = []

    def by_name(args: dict[str, Any], ctx: Any) -> str:
        seen.append(ctx)
        return "ok"

    def by_annotation(args: dict[str, Any], *, where: ToolContext) -> str:
        seen.append(where)
        return "ok"

    def without(args: dict[str, Any]) -> str:
        seen.append(None)
        return "ok"

    def calls(messages: Sequence[Message]) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message("assistant", "done")
        names = ("by_name", "by_annotation", "without")
        return Message(
            "assistant", tool_calls=tuple(ToolCall(f"c{i}", n, {}) for i, n in enumerate(names))
        )

    tools = [
        Tool("by_name", fn=by_name),
        Tool("by_annotation", fn=by_annotation),
        Tool("without", fn=without),
    ]
    await run(Config(AgentConfig(ScriptedModel(calls), tools), PolicyGate(), store), "r1", INPUT)
    assert [c.step if c else None for c in seen] == [
        "tool/1/0/by_name",
        "tool/1/1/by_annotation",
        None,
    ]


class OldRunner:
    """A StepRunner written before ``idempotent`` and ``hint`` existed."""

    async def run_step(
        self, name: str, kind: Any, fn: Any, *, write: bool = False, marker: Any = None
    ) -> Any:
        return await fn()

    def is_recorded(self, name: str) -> bool:
        return False


async def test_a_runner_without_the_new_keywords_still_runs_writes_that_do_not_use_them() -> None:
    tickets = Tickets()

    @tool(write=True, approve=False)
    def create_ticket(summary: str, ctx: ToolContext) -> str:
        """File a ticket."""
        return tickets.file(summary, ctx)

    agent = AgentConfig(ScriptedModel(reply), [create_ticket])
    out = await run_loop(agent, INPUT, runner=OldRunner(), gate=gate_for([create_ticket]))
    assert out.message is not None and out.message.content == "filed T-1"
