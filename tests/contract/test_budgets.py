"""Budgets (SPEC §10) on both stores: recorded in run.started, spent folded from the journal
(usage, plus the reservation of every model call without a reply), checked before each
step; ``budget`` signals let an over_budget run go on; a fork starts with the spend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest

from durableagent import (
    AgentConfig,
    Budget,
    Config,
    Message,
    PolicyGate,
    RunStatus,
    ScriptedModel,
    SignalError,
    Status,
    Store,
    Tool,
    ToolCall,
    fork,
    run,
    signal,
    submit,
    view_store,
)
from durableagent.record import STEP_STARTED

INPUT = [Message("user", "keep looking")]
USAGE = {"input_tokens": 300, "output_tokens": 50}


class Looper:
    """A model that looks something up every turn, reporting USAGE; it may hold a call."""

    def __init__(self, output_limit: int = 100) -> None:
        self.calls = 0
        self.output_limit = output_limit
        self.hold: asyncio.Event | None = None
        self.held = asyncio.Event()

    def config(self, store: Store, **agent: Any) -> Config:
        model = ScriptedModel(self.reply, output_limit=self.output_limit)
        complete = model.complete

        async def counting(messages: Sequence[Message], tools: Any) -> Message:
            self.calls += 1
            if self.hold is not None:
                self.held.set()
                await self.hold.wait()
            return await complete(messages, tools)

        model.complete = counting  # type: ignore[method-assign]
        tools = [Tool("lookup", "look up", {"type": "object"}, lambda args: "more")]
        return Config(AgentConfig(model, tools, max_turns=50, **agent), PolicyGate(), store)

    def reply(self, messages: Sequence[Message]) -> Message:
        n = sum(1 for m in messages if m.role == "tool")
        call = ToolCall(f"c{n}", "lookup", {})
        return Message("assistant", tool_calls=(call,), usage=dict(USAGE), model="m1")


async def test_a_run_stops_over_budget_before_the_call_that_would_pass_a_limit(
    any_store: Store,
) -> None:
    looper = Looper()
    config = looper.config(any_store)
    out = await run(config, "b1", INPUT, budget=Budget(tokens=2000))
    assert out.status == Status.OVER_BUDGET
    assert out.error.startswith("over budget: tokens: ")
    assert "would pass the limit of 2,000" in out.error
    records = any_store.load("b1")
    assert records[0].data["budget"] == {"tokens": 2000}
    starts = [r for r in records if r.type == STEP_STARTED and r.kind == "model"]
    assert starts and all(r.data["reserve"]["tokens"] > looper.output_limit for r in starts)
    view = view_store(any_store, "b1")
    assert view.status == RunStatus.OVER_BUDGET and view.needs_human
    spent = view.controls.spend
    assert spent.tokens == 350 * looper.calls <= 2000
    assert spent.tokens + starts[-1].data["reserve"]["tokens"] > 2000 - 350  # stopped in time
    summary = any_store.summary("b1")
    assert summary is not None and summary.status == RunStatus.OVER_BUDGET
    assert summary.budget == Budget(tokens=2000)
    assert summary.spent is not None and summary.spent["tokens"] == spent.tokens

    calls = looper.calls
    again = await run(config, "b1", None)  # a restart cannot reset what was spent
    assert again.status == Status.OVER_BUDGET and looper.calls == calls

    signal(any_store, "b1", "budget", {"add": {"tokens": 1000}}, by="ana", reason="worth it")
    assert view_store(any_store, "b1").status == RunStatus.READY
    out = await run(config, "b1", None)
    assert out.status == Status.OVER_BUDGET and looper.calls > calls
    assert view_store(any_store, "b1").controls.spend.tokens <= 3000


async def test_model_and_tool_call_limits_count_every_call_made(any_store: Store) -> None:
    looper = Looper()
    out = await run(looper.config(any_store), "b2", INPUT, budget=Budget(model_calls=3))
    assert out.status == Status.OVER_BUDGET and "model calls: 3 made of a limit of 3" in out.error
    assert looper.calls == 3
    looper = Looper()
    out = await run(looper.config(any_store), "b3", INPUT, budget=Budget(tool_calls=2))
    assert out.status == Status.OVER_BUDGET and "tool calls: 2 made" in out.error
    assert out.step == "tool/3/0/lookup"


async def test_a_deadline_counts_from_run_started(any_store: Store) -> None:
    looper = Looper()
    looper.hold = asyncio.Event()
    attempt = asyncio.create_task(
        run(looper.config(any_store), "b4", INPUT, budget=Budget(deadline=0.3))
    )
    await asyncio.wait_for(looper.held.wait(), 10)
    await asyncio.sleep(0.4)
    looper.hold.set()
    out = await asyncio.wait_for(attempt, 10)
    assert out.status == Status.OVER_BUDGET and out.error.startswith("over budget: deadline: ")
    assert looper.calls == 1


async def test_cost_counts_in_the_agents_prices(any_store: Store) -> None:
    looper = Looper()
    prices = {"m1": (1.0, 10.0)}  # per million: a call costs 300 * 1 + 50 * 10 = 800 µ
    config = looper.config(any_store, prices=prices)
    out = await run(config, "b5", INPUT, budget=Budget(cost=0.004))
    assert out.status == Status.OVER_BUDGET and out.error.startswith("over budget: cost: ")
    spend = view_store(any_store, "b5").controls.spend
    assert (
        spend.cost(prices) == pytest.approx(0.0008 * looper.calls) and spend.cost(prices) <= 0.004
    )


async def test_a_model_call_lost_in_a_crash_counts_its_reservation(any_store: Store) -> None:
    looper = Looper()
    looper.hold = asyncio.Event()
    config = looper.config(any_store)
    attempt = asyncio.create_task(run(config, "b6", INPUT, budget=Budget(tokens=100_000)))
    await asyncio.wait_for(looper.held.wait(), 10)
    attempt.cancel()  # the process dies inside the call: its reply is never recorded
    with pytest.raises(asyncio.CancelledError):
        await attempt
    start = next(r for r in any_store.load("b6") if r.type == STEP_STARTED)
    reserved = start.data["reserve"]["tokens"]
    view = view_store(any_store, "b6")
    assert view.controls.spend.tokens == reserved and view.controls.spend.reserved == reserved
    looper.hold = None
    looper.output_limit = 10**6  # the next call would not fit: it stops before making it
    config = looper.config(any_store)
    out = await run(config, "b6", None)
    assert out.status == Status.OVER_BUDGET
    spend = view_store(any_store, "b6").controls.spend
    assert spend.tokens == reserved  # the lost call still counts, nothing more was spent


def test_budget_signals_are_checked_and_a_bad_one_writes_nothing(any_store: Store) -> None:
    submit(any_store, "b7", INPUT, budget=Budget(tokens=1000))
    before = any_store.export_run("b7")
    bad = [
        ({"add": {"tokens": 5}}, None, "budget needs a reason"),
        ({"add": {"model_calls": 5}}, "x", "no model calls limit to raise"),
        ({"add": {"tokens": "lots"}}, "x", "must be a number"),
        ({"grow": {"tokens": 5}}, "x", "'add'"),
        ({"add": {"tokens": 5}, "set": {"tokens": 5}}, "x", "one of them"),
        ({"set": {"bananas": 5}}, "x", "unknown budget limit 'bananas'"),
        ({"set": {}}, "x", "at least one limit"),
    ]
    for payload, reason, match in bad:
        with pytest.raises(SignalError, match=match):
            signal(any_store, "b7", "budget", payload, by="ana", reason=reason)
    assert any_store.export_run("b7") == before
    signal(any_store, "b7", "budget", {"set": {"tokens": None, "deadline": 60}}, by="a", reason="x")
    assert view_store(any_store, "b7").controls.budget == Budget(deadline=60)


async def test_a_fork_starts_with_the_spend_and_the_budget_in_force_and_no_control(
    any_store: Store,
) -> None:
    looper = Looper()
    config = looper.config(any_store)
    out = await run(config, "f1", INPUT, budget=Budget(tokens=1500))
    assert out.status == Status.OVER_BUDGET
    signal(any_store, "f1", "budget", {"add": {"tokens": 500}}, by="ana", reason="more")
    signal(any_store, "f1", "pause", {}, by="ana", reason="look first")
    spent = view_store(any_store, "f1").controls.spend.tokens
    fork(any_store, "f1", "f2", at_step="llm/3", by="bo", reason="try again")
    view = view_store(any_store, "f2")
    assert view.controls.budget == Budget(tokens=2000)
    assert view.controls.paused is None and view.status == RunStatus.READY
    assert 0 < view.controls.spend.tokens == 2 * 350 < spent
    fork(any_store, "f1", "f3", at_step="llm/3", by="bo", reason="x", budget=Budget(tokens=9))
    assert view_store(any_store, "f3").controls.budget == Budget(tokens=9)
    assert (await run(config, "f3", None)).status == Status.OVER_BUDGET


async def test_a_restart_reads_the_budget_it_recorded_not_the_agents_new_one(
    any_store: Store,
) -> None:
    looper = Looper()
    first = looper.config(any_store, budget=Budget(model_calls=2))
    out = await run(first, "b8", INPUT)
    assert out.status == Status.OVER_BUDGET and looper.calls == 2
    later = looper.config(any_store, budget=Budget(model_calls=50))
    assert (await run(later, "b8", None)).status == Status.OVER_BUDGET
    assert looper.calls == 2
    started = time.time()
    assert any_store.load("b8")[0].data["budget"] == {"model_calls": 2}
    assert time.time() - started < 5
