"""A Pydantic AI agent under the journal (durableagent.integrations.pydantic_ai), in process:
the real pydantic-ai package and its FunctionModel, each stumble of issue 24 checked. The same
agents under real worker processes and SIGKILL are in contract/test_pydantic_ai_kill.py."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import FunctionToolset, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset
from pydantic_ai.usage import RequestUsage

from durableagent import (
    Budget,
    Config,
    FileStore,
    Message,
    PlanAction,
    PlanEnding,
    Reconcile,
    RunStatus,
    SignalError,
    Status,
    fork,
    plan,
    run,
    signal,
    view_store,
)
from durableagent.integrations.pydantic_ai import NotDurableError, durable, tool_context
from durableagent.worker import Agent, Worker

PROMPT = [Message("user", "I cannot reach the billing dashboard")]
TESTS = Path(__file__).parent


@dataclass
class Script:
    """A FunctionModel's brain: ``turns[n]`` answers the n-th request of a conversation (the
    responses it already holds), and everything the model was sent is kept."""

    turns: list[Callable[[list[ModelMessage]], list[Any]]]
    seen: list[AgentInfo] = field(default_factory=list)
    sent: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(info)
        self.sent.append(list(messages))
        n = sum(1 for m in messages if isinstance(m, ModelResponse))
        return ModelResponse(
            parts=self.turns[n](messages), usage=RequestUsage(input_tokens=50, output_tokens=7)
        )


def calls(*parts: tuple[str, dict[str, Any], str]) -> Callable[[list[ModelMessage]], list[Any]]:
    return lambda _: [ToolCallPart(name, args, tool_call_id=cid) for name, args, cid in parts]


def say(text: str) -> Callable[[list[ModelMessage]], list[Any]]:
    return lambda _: [TextPart(text)]


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The tool returns the model was sent in the last request."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return [p for p in last.parts if isinstance(p, ToolReturnPart)]


def echo(messages: list[ModelMessage]) -> list[Any]:
    """Answer with what the tools returned (and whether a human denied one)."""
    got = [
        f"{p.tool_name}={p.content}" + (" (denied)" if p.outcome == "denied" else "")
        for p in returns(messages)
    ]
    return [TextPart("; ".join(got))]


def helpdesk(script: Script, effects: list[str], **kw: Any) -> PydanticAgent[Any, Any]:
    """lookup (a read) and create_ticket (a write); each call noted in ``effects``."""
    agent = PydanticAgent(
        FunctionModel(script), name="helpdesk", instructions="You are the helpdesk.", **kw
    )

    @agent.tool
    async def lookup(ctx: RunContext[Any], topic: str) -> str:
        effects.append(f"lookup:{topic}")
        return f"policy for {topic}"

    @agent.tool
    async def create_ticket(ctx: RunContext[Any], summary: str) -> str:
        effects.append(f"create_ticket:{summary}")
        return "T-1"

    return agent


def config(agent: Agent, store: FileStore) -> Config:
    return Config(agent.config, agent.gate, store)


async def test_a_run_records_one_step_per_model_request_and_tool_call(store: FileStore):
    effects: list[str] = []
    script = Script(
        [
            calls(("lookup", {"topic": "billing"}, "c1")),
            calls(("create_ticket", {"summary": "s"}, "c1")),
            echo,
        ]
    )
    agent = durable(
        helpdesk(script, effects), writes=["create_ticket"], approve=["lookup", "create_ticket"]
    )
    # lookup is a read a human approves here, create_ticket a write that needs approval.
    out = await run(config(agent, store), "r1", PROMPT)
    assert out.status == Status.AWAITING_APPROVAL
    for _ in range(2):
        signal(store, "r1", "approve", {"marker": out.pending[0].marker}, by="ann")
        out = await run(config(agent, store), "r1", None)
    assert out.status == Status.COMPLETED and out.message is not None
    assert out.message.content == "create_ticket=T-1"
    assert effects == ["lookup:billing", "create_ticket:s"]
    steps = [s.name for s in view_store(store, "r1").steps]
    assert steps == ["llm/1", "tool/1/0/lookup", "llm/2", "tool/2/0/create_ticket", "llm/3"]


async def test_the_persisted_step_names_and_record_shapes_are_pinned(store: FileStore):
    """A rename of a step, or of a key a reader of the journal depends on, must fail here:
    journals written today are replayed by the code of tomorrow."""
    effects: list[str] = []
    script = Script([calls(("lookup", {"topic": "vpn"}, "call_a")), say("done")])
    agent = durable(helpdesk(script, effects))
    await run(config(agent, store), "r1", PROMPT)
    records = [(r.type, r.step, r.kind) for r in store.load("r1")]
    assert records == [
        ("run.started", "", ""),
        ("step.started", "llm/1", "model"),
        ("step.completed", "llm/1", "model"),
        ("step.started", "tool/1/0/lookup", "tool"),
        ("step.completed", "tool/1/0/lookup", "tool"),
        ("step.started", "llm/2", "model"),
        ("step.completed", "llm/2", "model"),
        ("run.completed", "", ""),
    ]
    model = store.load("r1")[2].data
    assert list(model) == ["role", "content", "tool_calls", "usage", "model", "pydantic_ai"]
    assert model["tool_calls"] == [
        {"id": "call_a", "name": "lookup", "arguments": {"topic": "vpn"}}
    ]
    assert model["usage"] == {"input_tokens": 50, "output_tokens": 7}
    assert model["model"] == "function:Script:"
    assert model["pydantic_ai"]["kind"] == "response"
    assert [p["part_kind"] for p in model["pydantic_ai"]["parts"]] == ["tool-call"]
    tool = store.load("r1")[4].data
    assert tool == {
        "content": "policy for vpn",
        "is_error": False,
        "pydantic_ai": {"result": "policy for vpn", "kind": "tool_return"},
    }


async def test_a_completed_run_replays_nothing_and_a_resumed_one_asks_the_model_only_for_new_turns(
    store: FileStore,
):
    effects: list[str] = []
    script = Script([calls(("create_ticket", {"summary": "s"}, "c1")), echo])
    agent = durable(helpdesk(script, effects), writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    assert len(script.seen) == 1
    signal(store, "r1", "approve", {"marker": out.pending[0].marker}, by="ann")
    await run(config(agent, store), "r1", None)
    assert len(script.seen) == 2  # llm/1 was replayed from the journal
    again = await run(config(agent, store), "r1", PROMPT)
    assert again.status == Status.COMPLETED and len(script.seen) == 2
    assert effects == ["create_ticket:s"]


# -- what durable() refuses ------------------------------------------------------------------


def test_an_agent_without_a_name_is_refused_in_one_line():
    agent = PydanticAgent(FunctionModel(Script([say("hi")])))
    with pytest.raises(NotDurableError) as e:
        durable(agent)
    assert "needs a name" in str(e.value) and "\n" not in str(e.value)


def test_a_toolset_without_an_id_is_refused_in_one_line():
    tools = FunctionToolset()

    @tools.tool_plain
    def ping() -> str:
        return "pong"

    agent = PydanticAgent(FunctionModel(Script([say("hi")])), name="a", toolsets=[tools])
    with pytest.raises(NotDurableError) as e:
        durable(agent)
    assert "unique `id`" in str(e.value) and "\n" not in str(e.value)


def test_external_tools_and_unknown_toolsets_are_refused_naming_them():
    external = ExternalToolset([], id="outside")
    agent = PydanticAgent(FunctionModel(Script([say("hi")])), name="a", toolsets=[external])
    with pytest.raises(NotDurableError, match="'outside' holds external tools"):
        durable(agent)

    class Homemade(AbstractToolset[Any]):
        @property
        def id(self) -> str:
            return "homemade"

        async def get_tools(self, ctx: RunContext[Any]) -> dict[str, Any]:
            return {}

        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
            return None

    agent = PydanticAgent(FunctionModel(Script([say("hi")])), name="a", toolsets=[Homemade()])
    with pytest.raises(NotDurableError, match="'homemade' \\(Homemade\\) is not a function"):
        durable(agent)


def test_a_capability_with_durable_units_of_its_own_is_refused_naming_them():
    from pydantic_ai.capabilities import AbstractCapability, durable_operation

    class Audit(AbstractCapability[Any]):
        id = "audit"

        @durable_operation(name="record")
        async def record(self, ctx: RunContext[Any], message: str) -> bool:
            return bool(message)

    agent = PydanticAgent(FunctionModel(Script([say("hi")])), name="a", capabilities=[Audit()])
    with pytest.raises(NotDurableError) as e:
        durable(agent)
    assert "CapabilityOperationId" in str(e.value) and "audit" in str(e.value)
    assert "\n" not in str(e.value)


# -- approvals ---------------------------------------------------------------------------------


async def test_a_requires_approval_tool_waits_for_a_human_bound_to_its_exact_arguments(
    store: FileStore,
):
    effects: list[str] = []
    script = Script([calls(("refund", {"amount": 30}, "c1")), echo])
    pyd = helpdesk(script, effects)

    @pyd.tool(requires_approval=True)
    async def refund(ctx: RunContext[Any], amount: int) -> str:
        effects.append(f"refund:{amount}:{ctx.tool_call_approved}")
        return f"refunded {amount}"

    agent = durable(pyd)  # no writes= needed: requires_approval makes it a gated write
    assert agent.gate.is_write("refund") and agent.gate.needs_approval("refund")
    out = await run(config(agent, store), "r1", PROMPT)
    assert out.status == Status.AWAITING_APPROVAL and effects == []
    (pending,) = out.pending
    assert (pending.step, pending.arguments) == ("tool/1/0/refund", {"amount": 30})
    # An approval names the call's marker, which binds it to these very arguments: another
    # amount (Pydantic AI's override_args, or a tool_call_id alone) is no approval here.
    other = pending.marker.replace(pending.marker.split("#")[1], "0" * 12)
    with pytest.raises(SignalError):
        signal(store, "r1", "approve", {"marker": other}, by="mallory")
    signal(store, "r1", "approve", {"marker": pending.marker}, by="ann")
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED and done.message is not None
    assert effects == ["refund:30:True"]
    assert done.message.content == "refund=refunded 30"


async def test_a_deny_reaches_the_model_as_tool_denied_with_the_humans_reason(store: FileStore):
    effects: list[str] = []
    script = Script([calls(("create_ticket", {"summary": "s"}, "c1")), echo])
    agent = durable(helpdesk(script, effects), writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    signal(store, "r1", "deny", {"marker": out.pending[0].marker}, by="bo", reason="not today")
    done = await run(config(agent, store), "r1", None)
    assert done.message is not None
    assert done.message.content == "create_ticket=denied by bo: not today (denied)"
    assert effects == []
    step = view_store(store, "r1").steps[1]
    assert (step.name, step.result) == (
        "tool/1/0/create_ticket",
        {"content": "denied by bo: not today", "is_error": True},
    )
    # Replayed, the model of the next turn is sent the same denial.
    again = await run(config(agent, store), "r1", None)
    assert again.message == done.message


async def test_a_tool_denied_by_policy_is_refused_without_running(store: FileStore):
    effects: list[str] = []
    script = Script([calls(("create_ticket", {"summary": "s"}, "c1")), echo])
    agent = durable(helpdesk(script, effects), deny=["create_ticket"])
    done = await run(config(agent, store), "r1", PROMPT)
    assert done.message is not None and effects == []
    assert "denied by policy" in done.message.content and "(denied)" in done.message.content


# -- steps by position ----------------------------------------------------------------------


async def test_steps_are_keyed_by_position_when_the_model_reuses_a_call_id(store: FileStore):
    """One call id in two turns (and across resumes) is two calls: each its own step, each
    approved on its own (Pydantic AI keys its approvals by call id; the journal does not)."""
    effects: list[str] = []
    script = Script(
        [
            calls(
                ("lookup", {"topic": "a"}, "call_1"), ("create_ticket", {"summary": "s"}, "call_2")
            ),
            calls(("create_ticket", {"summary": "s"}, "call_2")),
            echo,
        ]
    )
    agent = durable(helpdesk(script, effects), writes=["create_ticket"])
    first = await run(config(agent, store), "r1", PROMPT)
    assert effects == []  # one call of the turn waits for a human: none of them ran
    signal(store, "r1", "approve", {"marker": first.pending[0].marker}, by="ann")
    second = await run(config(agent, store), "r1", None)
    assert second.status == Status.AWAITING_APPROVAL, second
    assert [p.step for p in second.pending] == ["tool/2/0/create_ticket"]
    assert effects == ["lookup:a", "create_ticket:s"]
    signal(store, "r1", "approve", {"marker": second.pending[0].marker}, by="ann")
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED, done
    assert effects == ["lookup:a", "create_ticket:s", "create_ticket:s"]
    tools = [s.name for s in view_store(store, "r1").steps if s.kind == "tool"]
    assert tools == ["tool/1/0/lookup", "tool/1/1/create_ticket", "tool/2/0/create_ticket"]


async def test_a_turns_calls_run_one_at_a_time_in_the_replys_order(store: FileStore):
    effects: list[str] = []
    order: list[str] = []
    script = Script([calls(*((("slow", {"n": n}, f"c{n}")) for n in (3, 1, 2))), echo])
    pyd = helpdesk(script, effects)

    @pyd.tool_plain
    async def slow(n: int) -> str:
        order.append(f"start {n}")
        await asyncio.sleep(0.01 * n)  # in parallel, the shortest would end first
        order.append(f"end {n}")
        return str(n)

    await run(config(durable(pyd), store), "r1", PROMPT)
    assert order == ["start 3", "end 3", "start 1", "end 1", "start 2", "end 2"]
    tools = [s.name for s in view_store(store, "r1").steps if s.kind == "tool"]
    assert tools == ["tool/1/0/slow", "tool/1/1/slow", "tool/1/2/slow"]


async def test_calls_pydantic_ai_refuses_are_recorded_refused_so_none_stays_open(
    store: FileStore,
):
    """An unknown tool and arguments its schema rejects never run: Pydantic AI asks the model
    again; the journal records each such call refused, so no requested call stays open."""
    effects: list[str] = []
    script = Script(
        [
            calls(("lookup", {"subject": "a"}, "c1"), ("teleport", {}, "c2")),
            calls(("lookup", {"topic": "a"}, "c3")),
            echo,
        ]
    )
    done = await run(config(durable(helpdesk(script, effects)), store), "r1", PROMPT)
    assert done.status == Status.COMPLETED, done
    assert effects == ["lookup:a"]
    steps = {s.name: s.result for s in view_store(store, "r1").steps if s.kind == "tool"}
    assert list(steps) == ["tool/1/1/teleport", "tool/1/0/lookup", "tool/2/0/lookup"]
    assert (
        steps["tool/1/1/teleport"]["is_error"]
        and "unknown tool" in steps["tool/1/1/teleport"]["content"]
    )
    assert steps["tool/1/0/lookup"]["is_error"]
    assert steps["tool/1/0/lookup"]["content"].startswith("arguments rejected")
    assert plan(store.load("r1")).ending == PlanEnding.COMPLETED


# -- what reaches the tools and the model ---------------------------------------------------


@dataclass
class Deps:
    made: int


async def test_tools_run_through_the_toolset_with_its_run_context_deps_and_tool_context(
    store: FileStore,
):
    seen: list[Any] = []
    script = Script([calls(("whoami", {"n": "7"}, "c1")), echo])
    pyd = PydanticAgent(FunctionModel(script), name="ctx", deps_type=Deps)

    @pyd.tool
    async def whoami(ctx: RunContext[Deps], n: int) -> str:
        # Validated by Pydantic AI ("7" became 7) and given its RunContext with the deps.
        durable_ctx = tool_context(ctx)
        seen.append((n, ctx.deps.made, ctx.tool_call_id, durable_ctx.step, durable_ctx.run_id))
        seen.append(durable_ctx.idempotency_key)
        return "ok"

    made = iter(range(1, 10))
    agent = durable(pyd, deps=lambda: Deps(next(made)))
    await run(config(agent, store), "r1", PROMPT)
    assert seen[0] == (7, 1, "c1", "tool/1/0/whoami", "r1")
    assert seen[1].endswith(":tool/1/0/whoami")


async def test_instructions_and_tools_reach_the_model_on_every_request_replayed_or_not(
    store: FileStore,
):
    effects: list[str] = []
    script = Script([calls(("create_ticket", {"summary": "s"}, "c1")), echo])
    agent = durable(helpdesk(script, effects), writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    signal(store, "r1", "approve", {"marker": out.pending[0].marker}, by="ann")
    await run(config(agent, store), "r1", None)  # llm/1 replayed, llm/2 asked
    assert len(script.seen) == 2
    for info in script.seen:
        assert info.instructions == "You are the helpdesk."
        assert sorted(t.name for t in info.function_tools) == ["create_ticket", "lookup"]
    # The request after the replayed turn holds that turn's recorded reply and its result.
    after = script.sent[1]
    assert isinstance(after[1], ModelResponse)
    assert [(c.tool_name, c.tool_call_id) for c in after[1].tool_calls] == [("create_ticket", "c1")]
    assert [(p.tool_name, p.content) for p in returns(after)] == [("create_ticket", "T-1")]


class Ticket(BaseModel):
    id: str
    priority: int


async def test_a_structured_output_is_recorded_as_json(store: FileStore):
    script = Script([lambda _: [ToolCallPart("final_result", {"id": "T-9", "priority": 2}, "o1")]])
    pyd = PydanticAgent(FunctionModel(script), name="typed", output_type=Ticket)
    out = await run(config(durable(pyd), store), "r1", PROMPT)
    assert out.message is not None
    assert json.loads(out.message.content) == {"id": "T-9", "priority": 2}
    # The output tool's call ends the run: it is no tool step, and the journal agrees.
    model = store.load("r1")[2].data
    assert "tool_calls" not in model
    assert view_store(store, "r1").status == RunStatus.COMPLETED
    assert [s.name for s in view_store(store, "r1").steps] == ["llm/1"]


# -- writes that did not finish ---------------------------------------------------------------


class Crash(Exception):
    """Stands in for the process dying inside a tool (the real SIGKILL: contract tests)."""


async def test_a_write_that_raised_stays_open_until_a_human_reconciles_it(store: FileStore):
    effects: list[str] = []
    script = Script([calls(("create_ticket", {"summary": "s"}, "c1")), echo])
    pyd = PydanticAgent(FunctionModel(script), name="writes")
    crash = [True]

    @pyd.tool
    async def create_ticket(ctx: RunContext[Any], summary: str) -> str:
        effects.append("create_ticket")
        if crash.pop() if crash else False:
            raise Crash("after the ticket was filed")
        return "T-2"

    agent = durable(pyd, writes=["create_ticket"], approve=["nothing"])
    with pytest.raises(Crash):
        await run(config(agent, store), "r1", PROMPT)
    for _ in range(2):
        out = await run(config(agent, store), "r1", None)
        assert (out.status, out.step) == (Status.INDETERMINATE, "tool/1/0/create_ticket")
    assert effects == ["create_ticket"]
    signal(store, "r1", "reconcile", Reconcile("tool/1/0/create_ticket", "done", "T-1"), by="ops")
    done = await run(config(agent, store), "r1", None)
    assert done.message is not None and done.message.content == "create_ticket=T-1"
    assert effects == ["create_ticket"]  # what the human said is what the model read


async def test_a_read_that_raised_runs_again_and_the_model_is_not_asked_again(store: FileStore):
    effects: list[str] = []
    script = Script([calls(("lookup", {"topic": "x"}, "c1")), echo])
    pyd = PydanticAgent(FunctionModel(script), name="reads")
    failures = [Crash("the network")]

    @pyd.tool_plain
    async def lookup(topic: str) -> str:
        effects.append(topic)
        if failures:
            raise failures.pop()
        return "found"

    agent = durable(pyd)
    with pytest.raises(Crash):
        await run(config(agent, store), "r1", PROMPT)
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED and effects == ["x", "x"] and len(script.seen) == 2


# -- usage, budgets, cancel -------------------------------------------------------------------


async def test_usage_a_tool_adds_to_the_run_is_recorded_and_given_back_on_replay(
    store: FileStore,
):
    """Pydantic AI #6886: a nested agent's usage, added to the run inside a step, was lost
    when another engine replayed the step."""
    totals: list[int] = []
    inner = PydanticAgent(FunctionModel(Script([say("sub")])), name="inner")
    script = Script([calls(("delegate", {}, "c1")), calls(("report", {}, "c2")), say("done")])
    pyd = PydanticAgent(FunctionModel(script), name="outer")
    failures = [Crash("once")]

    @pyd.tool
    async def delegate(ctx: RunContext[Any]) -> str:
        return (await inner.run("go", usage=ctx.usage)).output

    @pyd.tool
    async def report(ctx: RunContext[Any]) -> str:
        totals.append(ctx.usage.input_tokens)
        if failures:
            raise failures.pop()
        return "reported"

    agent = durable(pyd)
    with pytest.raises(Crash):
        await run(config(agent, store), "r1", PROMPT)
    await run(config(agent, store), "r1", None)  # delegate's step is replayed
    assert totals[0] == totals[1] == 150  # two outer requests and the inner one, 50 each
    delegated = view_store(store, "r1").steps[1]
    assert delegated.result["usage"] == {"input_tokens": 50, "output_tokens": 7, "requests": 1}


async def test_a_budget_reserves_before_each_model_request_and_stops_the_run(store: FileStore):
    effects: list[str] = []
    script = Script([calls(("lookup", {"topic": "a"}, "c1")), echo])
    agent = durable(helpdesk(script, effects))
    out = await run(config(agent, store), "r1", PROMPT, budget=Budget(model_calls=1))
    assert out.status == Status.OVER_BUDGET and len(script.seen) == 1
    started = [r for r in store.load("r1") if r.type == "step.started" and r.step == "llm/1"]
    assert started[0].data["reserve"]["model"] == "function:Script:"
    assert started[0].data["reserve"]["tokens"] > 0


async def test_a_cancel_stops_a_read_in_flight_and_no_step_starts_after_it(store: FileStore):
    entered = asyncio.Event()
    script = Script([calls(("wait", {}, "c1")), say("never")])
    pyd = PydanticAgent(FunctionModel(script), name="waits")

    @pyd.tool_plain
    async def wait() -> str:
        entered.set()
        await asyncio.sleep(60)
        return "late"

    attempt = asyncio.create_task(run(config(durable(pyd), store), "r1", PROMPT))
    await asyncio.wait_for(entered.wait(), 20)
    signal(store, "r1", "cancel", {}, by="ann", reason="wrong ticket")
    out = await asyncio.wait_for(attempt, 20)
    assert out.status == Status.CANCELLED
    assert len(script.seen) == 1
    assert [r.step for r in store.load("r1") if r.type == "step.completed"] == ["llm/1"]


# -- plan and fork read the journal of such a run as any other --------------------------------


async def test_plan_and_fork_of_a_pydantic_ai_run(store: FileStore):
    effects: list[str] = []
    script = Script([calls(("lookup", {"topic": "a"}, "c1")), echo, echo])
    agent = durable(helpdesk(script, effects))
    await run(config(agent, store), "r1", PROMPT)
    assert len(script.seen) == 2

    forked = fork(store, "r1", "r2", at_step="llm/2", by="ann", reason="ask again")
    assert forked.type == "run.started"
    p = plan(store.load("r2"))
    assert [(s.step, s.action) for s in p.steps][:2] == [
        ("llm/1", PlanAction.REPLAY),
        ("tool/1/0/lookup", PlanAction.REPLAY),
    ]
    again = await run(config(agent, store), "r2", None)
    assert again.status == Status.COMPLETED
    assert effects == ["lookup:a"]  # the copied steps were replayed: the read did not run
    assert len(script.seen) == 3  # only the turn after the cut was asked


async def test_plan_of_a_run_stopped_in_doubt_says_where_it_is_blocked(store: FileStore):
    script = Script([calls(("create_ticket", {"summary": "s"}, "c1")), echo])
    pyd = PydanticAgent(FunctionModel(script), name="doubt")

    @pyd.tool_plain
    def create_ticket(summary: str) -> str:
        raise Crash("the worker died here")

    agent = durable(pyd, writes=["create_ticket"], approve=["nothing"])
    with pytest.raises(Crash):
        await run(config(agent, store), "r1", PROMPT)
    p = plan(store.load("r1"))
    assert (p.ending, p.stops_at) == (PlanEnding.INDETERMINATE, "tool/1/0/create_ticket")


async def test_a_worker_traces_a_pydantic_ai_run_and_marks_its_replayed_steps(store: FileStore):
    from telemetry_support import by_attempt_spans, run_approved, traced

    effects: list[str] = []
    script = Script([calls(("create_ticket", {"summary": "s"}, "c1")), echo])
    agent = durable(helpdesk(script, effects), writes=["create_ticket"])
    provider, exporter = traced()
    worker = Worker(agent, store, rescan=0.5, tracer_provider=provider)
    await asyncio.wait_for(run_approved(store, worker), 60)
    steps = by_attempt_spans(list(exporter.get_finished_spans()))
    assert [(s.name, s.attributes["durableagent.step.replayed"]) for s in steps[2]] == [
        ("chat function:Script:", True),
        ("execute_tool create_ticket", False),
        ("chat function:Script:", False),
    ]
    chat = steps[1][0].attributes
    assert chat["gen_ai.provider.name"] == "function"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (50, 7)
    assert steps[2][1].attributes["durableagent.tool.write"] is True


async def test_mcp_tools_are_classed_by_their_servers_annotations_only_when_trusted(
    store: FileStore, tmp_path: Path
):
    """Pydantic AI's MCPToolset over stdio to a real MCP server: untrusted, each of its tools
    is a write that needs approval; trusted, ``readOnlyHint`` is a read and an idempotent,
    non-destructive tool a write nobody approves; ``writes=``/``approve=`` win."""
    from fastmcp import Client
    from fastmcp.client.transports import PythonStdioTransport
    from pydantic_ai.mcp import MCPToolset

    folder = tmp_path / "mcp"
    folder.mkdir()
    server = PythonStdioTransport(
        TESTS / "_mcp_server.py", args=[str(folder)], python_cmd=sys.executable
    )
    script = Script(
        [calls(("lookup", {"topic": "vpn"}, "c1"), ("file_ticket", {"summary": "vpn"}, "c2")), echo]
    )
    agent = PydanticAgent(
        FunctionModel(script), name="mcp", toolsets=[MCPToolset(Client(server), id="tickets")]
    )

    untrusted = await run(config(durable(agent), store), "r1", PROMPT)
    assert [p.tool for p in untrusted.pending] == ["lookup", "file_ticket"]
    assert untrusted.pending[0].policy.startswith("write, needs approval · class from default")

    trusted = await run(config(durable(agent, trust_annotations=True), store), "r2", PROMPT)
    assert trusted.status == Status.COMPLETED, trusted
    steps = {s.name: s for s in view_store(store, "r2").steps if s.kind == "tool"}
    assert (steps["tool/1/0/lookup"].write, steps["tool/1/1/file_ticket"].write) == (False, True)
    started = {r.step: r.data for r in store.load("r2") if r.type == "step.started"}
    assert started["tool/1/1/file_ticket"] == {
        "write": True,
        "idempotent": True,
        "classified_by": "annotation",
    }
    assert (folder / "tickets.log").read_text().count("\n") == 1

    overridden = await run(
        config(durable(agent, trust_annotations=True, approve=["lookup"]), store), "r3", PROMPT
    )
    assert [p.tool for p in overridden.pending] == ["lookup"]
