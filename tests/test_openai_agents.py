"""An OpenAI Agents SDK agent under the journal (durableagent.integrations.openai_agents), in
process: the real openai-agents package, its OpenAIChatCompletionsModel and the official openai
client talking to the local OpenAI-compatible server (tests/fake_llm.py) over a real socket;
each stumble of issue 24 checked. The same agents under real worker processes and SIGKILL are
in contract/test_openai_agents_kill.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from agents import (
    Agent as SdkAgent,
)
from agents import (
    ComputerTool,
    ModelProvider,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    RunContextWrapper,
    function_tool,
    handoff,
    input_guardrail,
    set_tracing_disabled,
)
from agents.models.interface import Model
from agents.tool_context import ToolContext
from fake_llm import Call, FakeLLM, Request, Say
from openai import AsyncOpenAI
from pydantic import BaseModel

from durableagent import (
    Budget,
    Config,
    FileStore,
    Message,
    PlanAction,
    PlanEnding,
    Reconcile,
    SignalError,
    Status,
    fork,
    plan,
    run,
    signal,
    view_store,
)
from durableagent.integrations.openai_agents import NotDurableError, durable, tool_context
from durableagent.tools import current_context
from durableagent.worker import Agent

set_tracing_disabled(True)  # the SDK's own traces go to OpenAI's servers; none here

PROMPT = [Message("user", "I cannot reach the billing dashboard")]


@dataclass
class Script:
    """The model server's brain: ``turns[n]`` answers a conversation's n-th request (its
    number of assistant messages), and everything it was sent is kept."""

    turns: list[Callable[[Request], Say | Call]]
    seen: list[Request] = field(default_factory=list)

    def __call__(self, request: Request) -> Say | Call:
        self.seen.append(request)
        return self.turns[request.turn - 1](request)


def calls(*parts: tuple[str, dict[str, Any]]) -> Callable[[Request], Call]:
    return lambda _: Call(tuple((name, json.dumps(args)) for name, args in parts))


def say(text: str) -> Callable[[Request], Say]:
    return lambda _: Say(text)


def tool_messages(request: Request) -> list[dict[str, Any]]:
    return [m for m in request.body["messages"] if m.get("role") == "tool"]


def echo(request: Request) -> Say:
    """Answer with what the tools returned, as the model read it."""
    return Say("; ".join(str(m["content"]) for m in tool_messages(request)))


@pytest.fixture
def script() -> Script:
    return Script([])


@pytest.fixture
def fake(script: Script) -> Iterator[FakeLLM]:
    with FakeLLM(brain=script) as f:
        yield f


def model(fake: FakeLLM) -> OpenAIChatCompletionsModel:
    return OpenAIChatCompletionsModel(
        "fake-model", AsyncOpenAI(base_url=fake.openai_url, api_key="k")
    )


def helpdesk(fake: FakeLLM, effects: list[str], **kw: Any) -> SdkAgent[Any]:
    """lookup (a read) and create_ticket (a write); each call noted in ``effects``."""

    @function_tool
    async def lookup(topic: str) -> str:
        """Look up a policy."""
        effects.append(f"lookup:{topic}")
        return f"policy for {topic}"

    @function_tool
    async def create_ticket(summary: str) -> str:
        """File a ticket."""
        effects.append(f"create_ticket:{summary}")
        return "T-1"

    tools = [lookup, create_ticket, *kw.pop("tools", [])]
    return SdkAgent(
        "helpdesk", instructions="You are the helpdesk.", model=model(fake), tools=tools, **kw
    )


def config(agent: Agent, store: FileStore) -> Config:
    return Config(agent.config, agent.gate, store)


async def test_a_run_records_one_step_per_model_request_and_tool_call(
    store: FileStore, fake: FakeLLM, script: Script
):
    effects: list[str] = []
    script.turns += [
        calls(("lookup", {"topic": "billing"})),
        calls(("create_ticket", {"summary": "s"})),
        echo,
    ]
    agent = durable(helpdesk(fake, effects), writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    assert out.status == Status.AWAITING_APPROVAL and effects == ["lookup:billing"]
    (pending,) = out.pending
    assert (pending.step, pending.arguments) == ("tool/2/0/create_ticket", {"summary": "s"})
    signal(store, "r1", "approve", {"marker": pending.marker}, by="ann")
    out = await run(config(agent, store), "r1", None)
    assert out.status == Status.COMPLETED and out.message is not None
    assert out.message.content == "policy for billing; T-1"
    assert effects == ["lookup:billing", "create_ticket:s"]
    assert fake.turns() == {1: 1, 2: 1, 3: 1}  # the resumed attempt replayed turns 1 and 2
    steps = [s.name for s in view_store(store, "r1").steps]
    assert steps == ["llm/1", "tool/1/0/lookup", "llm/2", "tool/2/0/create_ticket", "llm/3"]


async def test_the_persisted_step_names_and_record_shapes_are_pinned(
    store: FileStore, fake: FakeLLM, script: Script
):
    """A rename of a step, or of a key a reader of the journal depends on, must fail here:
    journals written today are replayed by the code of tomorrow."""
    script.turns += [calls(("lookup", {"topic": "vpn"})), say("done")]
    await run(config(durable(helpdesk(fake, [])), store), "r1", PROMPT)
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
    reply = store.load("r1")[2].data
    assert list(reply) == [
        "role",
        "content",
        "tool_calls",
        "usage",
        "model",
        "response_id",
        "agent",
        "openai_agents",
    ]
    assert reply["tool_calls"] == [
        {"id": "call_1_0", "name": "lookup", "arguments": {"topic": "vpn"}}
    ]
    assert reply["usage"] == {"input_tokens": 100, "output_tokens": 11}
    assert (reply["model"], reply["response_id"], reply["agent"]) == (
        "fake-model",
        "chatcmpl-1",
        "helpdesk",
    )
    assert list(reply["openai_agents"]) == [
        "output",
        "usage",
        "response_id",
        "request_id",
        "raw_usage",
    ]
    assert [i["type"] for i in reply["openai_agents"]["output"]] == ["function_call"]
    assert store.load("r1")[4].data == {
        "content": "policy for vpn",
        "is_error": False,
        "openai_agents": {"output": "policy for vpn"},
    }
    answer = store.load("r1")[6].data
    assert (answer["content"], answer["agent"]) == ("done", "helpdesk")


async def test_a_completed_run_replays_nothing(store: FileStore, fake: FakeLLM, script: Script):
    effects: list[str] = []
    script.turns += [calls(("lookup", {"topic": "a"})), echo]
    agent = durable(helpdesk(fake, effects))
    await run(config(agent, store), "r1", PROMPT)
    again = await run(config(agent, store), "r1", PROMPT)
    assert again.status == Status.COMPLETED and len(script.seen) == 2
    assert effects == ["lookup:a"]


# -- what durable() refuses ------------------------------------------------------------------


def test_what_cannot_be_made_durable_is_refused_in_one_line(fake: FakeLLM):
    with pytest.raises(TypeError, match=r"takes an agents\.Agent"):
        durable(object())  # type: ignore[arg-type]

    class Screen:
        environment = "linux"
        dimensions = (1, 1)

    cases: list[tuple[SdkAgent[Any], str]] = [
        (
            SdkAgent("a", model=model(fake), tools=[ComputerTool(computer=Screen())]),  # type: ignore[arg-type]
            "tool 'computer_use_preview' (ComputerTool) runs outside function calls",
        ),
    ]

    @input_guardrail
    async def strict(ctx: Any, agent: Any, data: Any) -> Any:
        raise AssertionError("never run")

    cases.append((SdkAgent("g", model=model(fake), input_guardrails=[strict]), "has guardrails"))
    twin = SdkAgent("a", model=model(fake))
    cases.append((SdkAgent("a", model=model(fake), handoffs=[twin]), "two agents are named 'a'"))

    @function_tool(failure_error_function=lambda ctx, e: "it went fine, really")
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    cases.append(
        (SdkAgent("p", model=model(fake), tools=[pay]), "write 'pay' has a failure_error_function")
    )

    @function_tool(timeout=5)
    async def wire(amount: int) -> str:
        """Wire."""
        return "wired"

    wire.name = "pay"
    cases.append(
        (SdkAgent("w", model=model(fake), tools=[wire]), "write 'pay' has timeout_seconds")
    )
    for agent, says in cases:
        with pytest.raises(NotDurableError) as e:
            durable(agent, writes=["pay"])
        assert says in str(e.value) and "\n" not in str(e.value)
    # The same tool as a read: its error text is a result like any other.
    durable(SdkAgent("p", model=model(fake), tools=[pay]))


# -- approvals ---------------------------------------------------------------------------------


async def test_a_needs_approval_tool_waits_for_a_human_bound_to_its_exact_arguments(
    store: FileStore, fake: FakeLLM, script: Script
):
    effects: list[str] = []

    @function_tool(needs_approval=True)
    async def refund(amount: int) -> str:
        """Refund."""
        effects.append(f"refund:{amount}")
        return f"refunded {amount}"

    script.turns += [calls(("refund", {"amount": 30})), echo]
    agent = durable(helpdesk(fake, effects, tools=[refund]))  # needs_approval: a gated write
    assert agent.gate.is_write("refund") and agent.gate.needs_approval("refund")
    out = await run(config(agent, store), "r1", PROMPT)
    assert out.status == Status.AWAITING_APPROVAL and effects == []
    (pending,) = out.pending
    assert (pending.step, pending.arguments) == ("tool/1/0/refund", {"amount": 30})
    # An approval names the call's marker, which binds it to these very arguments: another
    # amount (or the SDK's call id alone) is no approval here.
    other = pending.marker.replace(pending.marker.split("#")[1], "0" * 12)
    with pytest.raises(SignalError):
        signal(store, "r1", "approve", {"marker": other}, by="mallory")
    signal(store, "r1", "approve", {"marker": pending.marker}, by="ann")
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED and done.message is not None
    assert effects == ["refund:30"] and done.message.content == "refunded 30"


async def test_a_turns_calls_wait_while_one_of_them_waits_for_a_human(
    store: FileStore, fake: FakeLLM, script: Script
):
    effects: list[str] = []
    script.turns += [calls(("lookup", {"topic": "a"}), ("create_ticket", {"summary": "s"})), echo]
    agent = durable(helpdesk(fake, effects), writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    assert out.status == Status.AWAITING_APPROVAL and effects == []  # none of the turn ran
    signal(store, "r1", "approve", {"marker": out.pending[0].marker}, by="ann")
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED, done
    assert effects == ["lookup:a", "create_ticket:s"]


async def test_a_deny_reaches_the_model_as_the_sdks_rejection_with_the_humans_reason(
    store: FileStore, fake: FakeLLM, script: Script
):
    effects: list[str] = []
    script.turns += [calls(("create_ticket", {"summary": "s"})), echo]
    agent = durable(helpdesk(fake, effects), writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    signal(store, "r1", "deny", {"marker": out.pending[0].marker}, by="bo", reason="not today")
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED and done.message is not None
    assert done.message.content == "denied by bo: not today"
    assert effects == []
    step = view_store(store, "r1").steps[1]
    assert (step.name, step.result) == (
        "tool/1/0/create_ticket",
        {"content": "denied by bo: not today", "is_error": True},
    )


async def test_a_tool_denied_by_policy_is_refused_without_running(
    store: FileStore, fake: FakeLLM, script: Script
):
    effects: list[str] = []
    script.turns += [calls(("create_ticket", {"summary": "s"})), echo]
    agent = durable(helpdesk(fake, effects), deny=["create_ticket"])
    done = await run(config(agent, store), "r1", PROMPT)
    assert done.message is not None and effects == []
    assert done.message.content == "denied by policy: the tool 'create_ticket' is not allowed"


# -- order, context, what reaches the model ---------------------------------------------------


async def test_a_turns_calls_run_one_at_a_time_ordered_by_call_id(
    store: FileStore, fake: FakeLLM, script: Script
):
    order: list[str] = []

    @function_tool
    async def slow(n: int) -> str:
        """Slow."""
        order.append(f"start {n}")
        await asyncio.sleep(0.01 * n)  # in parallel, the shortest would end first
        order.append(f"end {n}")
        return str(n)

    script.turns += [calls(*(("slow", {"n": n}) for n in (3, 1, 2))), echo]
    agent = SdkAgent("p", model=model(fake), tools=[slow])
    await run(config(durable(agent), store), "r1", PROMPT)
    assert order == ["start 3", "end 3", "start 1", "end 1", "start 2", "end 2"]
    tools = [s.name for s in view_store(store, "r1").steps if s.kind == "tool"]
    assert tools == ["tool/1/0/slow", "tool/1/1/slow", "tool/1/2/slow"]


@dataclass
class Desk:
    made: int


async def test_tools_run_through_on_invoke_tool_with_the_sdks_tool_context_and_ours(
    store: FileStore, fake: FakeLLM, script: Script
):
    seen: list[Any] = []

    @function_tool
    async def whoami(ctx: ToolContext[Desk], n: int) -> str:
        """Who."""
        durable_ctx = tool_context(ctx)
        assert durable_ctx == current_context()
        seen.append((n, ctx.context.made, ctx.tool_call_id, durable_ctx.step, durable_ctx.run_id))
        seen.append(durable_ctx.idempotency_key)
        return "ok"

    script.turns += [calls(("whoami", {"n": "7"})), echo]
    made = iter(range(1, 10))
    agent = durable(
        SdkAgent("ctx", model=model(fake), tools=[whoami]), context=lambda: Desk(next(made))
    )
    await run(config(agent, store), "r1", PROMPT)
    # The SDK validated the arguments ("7" became 7) and gave its ToolContext with the context.
    assert seen[0] == (7, 1, "call_1_0", "tool/1/0/whoami", "r1")
    assert seen[1].startswith("r1:") and seen[1].endswith(":tool/1/0/whoami")


async def test_instructions_and_tools_reach_the_model_on_every_request_replayed_or_not(
    store: FileStore, fake: FakeLLM, script: Script
):
    effects: list[str] = []
    script.turns += [calls(("create_ticket", {"summary": "s"})), echo]
    agent = durable(helpdesk(fake, effects), writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    signal(store, "r1", "approve", {"marker": out.pending[0].marker}, by="ann")
    await run(config(agent, store), "r1", None)  # llm/1 replayed, llm/2 asked
    assert len(script.seen) == 2
    for request in script.seen:
        assert request.body["messages"][0] == {
            "role": "system",
            "content": "You are the helpdesk.",
        }
        names = sorted(t["function"]["name"] for t in request.body["tools"])
        assert names == ["create_ticket", "lookup"]
    # The request after the replayed turn holds that turn's recorded call and its result.
    assert tool_messages(script.seen[1]) == [
        {"role": "tool", "tool_call_id": "call_1_0", "content": "T-1"}
    ]


class Ticket(BaseModel):
    id: str
    priority: int


async def test_a_structured_output_is_recorded_as_json(
    store: FileStore, fake: FakeLLM, script: Script
):
    script.turns += [say(json.dumps({"id": "T-9", "priority": 2}))]
    agent = SdkAgent("typed", model=model(fake), output_type=Ticket)
    out = await run(config(durable(agent), store), "r1", PROMPT)
    assert out.message is not None
    assert json.loads(out.message.content) == {"id": "T-9", "priority": 2}


# -- writes that did not finish, reads that failed ---------------------------------------------


class Crash(Exception):
    """Stands in for the process dying inside a tool (the real SIGKILL: contract tests)."""


async def test_a_write_that_raised_stays_open_until_a_human_reconciles_it(
    store: FileStore, fake: FakeLLM, script: Script
):
    """By default the SDK makes a tool's exception the text "An error occurred while running
    the tool": a write that raised would be recorded as done. It stays open instead."""
    effects: list[str] = []
    crash = [True]

    @function_tool
    async def create_ticket(summary: str) -> str:
        """File."""
        effects.append("create_ticket")
        if crash.pop() if crash else False:
            raise Crash("after the ticket was filed")
        return "T-2"

    script.turns += [calls(("create_ticket", {"summary": "s"})), echo]
    sdk = SdkAgent("writes", model=model(fake), tools=[create_ticket])
    agent = durable(sdk, writes=["create_ticket"], approve=["nothing"])
    with pytest.raises(Crash):
        await run(config(agent, store), "r1", PROMPT)
    for _ in range(2):
        out = await run(config(agent, store), "r1", None)
        assert (out.status, out.step) == (Status.INDETERMINATE, "tool/1/0/create_ticket")
    assert effects == ["create_ticket"]
    signal(store, "r1", "reconcile", Reconcile("tool/1/0/create_ticket", "done", "T-1"), by="ops")
    done = await run(config(agent, store), "r1", None)
    assert done.message is not None and done.message.content == "T-1"
    assert effects == ["create_ticket"]  # what the human said is what the model read
    assert len(script.seen) == 2  # llm/1 was never asked again


async def test_a_read_that_raised_is_the_sdks_error_text_and_the_run_goes_on(
    store: FileStore, fake: FakeLLM, script: Script
):
    @function_tool
    async def lookup(topic: str) -> str:
        """Look."""
        raise Crash("the network")

    script.turns += [calls(("lookup", {"topic": "x"})), echo]
    done = await run(
        config(durable(SdkAgent("r", model=model(fake), tools=[lookup])), store), "r1", PROMPT
    )
    assert done.status == Status.COMPLETED and done.message is not None
    assert done.message.content.startswith("An error occurred while running the tool")
    step = view_store(store, "r1").steps[1]
    assert step.result["is_error"] is True


# -- handoffs ------------------------------------------------------------------------------------


async def test_a_handoff_is_a_step_naming_the_agent_and_runs_its_callback_once(
    store: FileStore, fake: FakeLLM, script: Script
):
    effects: list[str] = []
    handed: list[str] = []
    billing = helpdesk(fake, effects, handoff_description="billing questions")
    billing.name = "billing"
    triage = SdkAgent(
        "triage",
        instructions="Route the request.",
        model=model(fake),
        handoffs=[handoff(billing, on_handoff=lambda ctx: handed.append("billing"))],
    )
    script.turns += [
        calls(("transfer_to_billing", {})),
        calls(("create_ticket", {"summary": "s"})),
        echo,
    ]
    agent = durable(triage, writes=["create_ticket"])
    out = await run(config(agent, store), "r1", PROMPT)
    assert out.status == Status.AWAITING_APPROVAL and handed == ["billing"]
    signal(store, "r1", "approve", {"marker": out.pending[0].marker}, by="ann")
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED, done
    assert handed == ["billing"]  # replayed: the handoff's callback did not run again
    assert effects == ["create_ticket:s"]
    steps = view_store(store, "r1").steps
    assert [s.name for s in steps] == [
        "llm/1",
        "tool/1/0/transfer_to_billing",
        "llm/2",
        "tool/2/0/create_ticket",
        "llm/3",
    ]
    assert [s.result["agent"] for s in steps if s.kind == "model"] == [
        "triage",
        "billing",
        "billing",
    ]
    assert steps[1].result["openai_agents"] == {"handoff": "billing"}
    # The billing agent's instructions reached the model after the handoff, replayed or not.
    assert script.seen[-1].body["messages"][0]["content"] == "You are the helpdesk."


# -- usage, budgets, cancel, providers ---------------------------------------------------------


async def test_a_budget_reserves_before_each_model_request_and_stops_the_run(
    store: FileStore, fake: FakeLLM, script: Script
):
    script.turns += [calls(("lookup", {"topic": "a"})), echo]
    agent = durable(helpdesk(fake, []))
    out = await run(config(agent, store), "r1", PROMPT, budget=Budget(model_calls=1))
    assert out.status == Status.OVER_BUDGET and len(script.seen) == 1
    started = [r for r in store.load("r1") if r.type == "step.started" and r.step == "llm/1"]
    assert started[0].data["reserve"]["model"] == "fake-model"
    assert started[0].data["reserve"]["tokens"] > 0


async def test_token_usage_is_recorded_so_a_token_budget_stops_the_run(
    store: FileStore, fake: FakeLLM, script: Script
):
    script.turns += [calls(("lookup", {"topic": "a"})), calls(("lookup", {"topic": "b"})), echo]
    agent = durable(helpdesk(fake, [], model_settings=ModelSettings(max_tokens=10)))
    # Turn 1 reserves about 60 tokens and uses 111: turn 2's reservation passes 150.
    out = await run(config(agent, store), "r1", PROMPT, budget=Budget(tokens=150))
    assert out.status == Status.OVER_BUDGET
    assert fake.turns() == {1: 1}


async def test_a_cancel_stops_a_read_in_flight_and_no_step_starts_after_it(
    store: FileStore, fake: FakeLLM, script: Script
):
    entered = asyncio.Event()

    @function_tool
    async def wait() -> str:
        """Wait."""
        entered.set()
        await asyncio.sleep(60)
        return "late"

    script.turns += [calls(("wait", {})), say("never")]
    agent = durable(SdkAgent("waits", model=model(fake), tools=[wait]))
    attempt = asyncio.create_task(run(config(agent, store), "r1", PROMPT))
    await asyncio.wait_for(entered.wait(), 20)
    signal(store, "r1", "cancel", {}, by="ann", reason="wrong ticket")
    out = await asyncio.wait_for(attempt, 20)
    assert out.status == Status.CANCELLED and len(script.seen) == 1
    assert [r.step for r in store.load("r1") if r.type == "step.completed"] == ["llm/1"]


async def test_the_callers_model_provider_is_wrapped_not_replaced(
    store: FileStore, fake: FakeLLM, script: Script
):
    asked: list[str | None] = []

    class Local(ModelProvider):
        def get_model(self, model_name: str | None) -> Model:
            asked.append(model_name)
            return model(fake)

    script.turns += [calls(("lookup", {"topic": "a"})), echo]
    sdk = helpdesk(fake, [])
    sdk.model = "local-model"
    agent = durable(sdk, run_config=RunConfig(model_provider=Local()))
    out = await run(config(agent, store), "r1", PROMPT)
    assert out.status == Status.COMPLETED and asked == ["local-model", "local-model"]
    assert [s.name for s in view_store(store, "r1").steps] == ["llm/1", "tool/1/0/lookup", "llm/2"]
    again = await run(config(agent, store), "r1", PROMPT)
    assert again.status == Status.COMPLETED and len(script.seen) == 2


async def test_the_agent_runs_plainly_outside_a_durable_run(fake: FakeLLM, script: Script):
    from agents import Runner

    effects: list[str] = []
    script.turns += [calls(("lookup", {"topic": "a"})), echo]
    sdk = helpdesk(fake, effects)
    durable(sdk, writes=["create_ticket"])
    result = await Runner.run(sdk, "hi")
    assert result.final_output == "policy for a" and effects == ["lookup:a"]


# -- plan and fork read the journal of such a run as any other --------------------------------


async def test_plan_and_fork_of_an_agents_sdk_run(store: FileStore, fake: FakeLLM, script: Script):
    effects: list[str] = []
    script.turns += [calls(("lookup", {"topic": "a"})), echo]
    agent = durable(helpdesk(fake, effects))
    await run(config(agent, store), "r1", PROMPT)
    forked = fork(store, "r1", "r2", at_step="llm/2", by="ann", reason="ask again")
    assert forked.type == "run.started"
    p = plan(store.load("r2"))
    assert [(s.step, s.action) for s in p.steps][:2] == [
        ("llm/1", PlanAction.REPLAY),
        ("tool/1/0/lookup", PlanAction.REPLAY),
    ]
    again = await run(config(agent, store), "r2", None)
    assert again.status == Status.COMPLETED
    assert effects == ["lookup:a"] and len(script.seen) == 3


async def test_plan_of_a_run_stopped_in_doubt_says_where_it_is_blocked(
    store: FileStore, fake: FakeLLM, script: Script
):
    @function_tool
    def create_ticket(summary: str) -> str:
        """File."""
        raise Crash("the worker died here")

    script.turns += [calls(("create_ticket", {"summary": "s"})), echo]
    sdk = SdkAgent("doubt", model=model(fake), tools=[create_ticket])
    with pytest.raises(Crash):
        await run(
            config(durable(sdk, writes=["create_ticket"], approve=["x"]), store), "r1", PROMPT
        )
    p = plan(store.load("r1"))
    assert (p.ending, p.stops_at) == (PlanEnding.INDETERMINATE, "tool/1/0/create_ticket")


def test_the_sdk_context_reaches_a_tool_context_check(fake: FakeLLM):
    """tool_context() refuses a ToolContext that is not the call running now."""
    from durableagent.integrations.openai_agents.attempt import CALL

    token = CALL.set("call_9")
    try:
        ctx = ToolContext(context=None, tool_name="t", tool_call_id="call_1", tool_arguments="{}")
        with pytest.raises(ValueError, match="not the tool call running now"):
            tool_context(ctx)
    finally:
        CALL.reset(token)
    assert isinstance(RunContextWrapper(context=None), RunContextWrapper)


class Remembers:
    """A StepRunner that keeps each step's value (through JSON, as the journal does) and hands
    it back when the step comes again: enough to see what the model wrapper records."""

    def __init__(self) -> None:
        self.held: dict[str, Any] = {}

    async def run_step(self, name: str, kind: Any, fn: Any, **kw: Any) -> Any:
        if name not in self.held:
            self.held[name] = json.loads(json.dumps(await fn()))
        return self.held[name]

    def is_recorded(self, name: str) -> bool:
        return name in self.held


async def test_a_streamed_response_is_one_model_step_replayed_as_one_completed_event():
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseTextDeltaEvent,
    )

    from durableagent.integrations.openai_agents.attempt import ATTEMPT, Attempt
    from durableagent.integrations.openai_agents.graph import Graph, JournalModel
    from durableagent.turns import Turns

    streamed: list[int] = []
    text = ResponseOutputText(type="output_text", text="hello", annotations=[])
    message = ResponseOutputMessage(
        id="m1", type="message", role="assistant", status="completed", content=[text]
    )

    class Streams(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("streamed only")

        async def stream_response(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            streamed.append(1)
            yield ResponseTextDeltaEvent.model_construct(type="response.output_text.delta")
            body = Response.model_construct(
                id="resp_1", output=[message], usage=None, model="m", object="response"
            )
            yield ResponseCompletedEvent(
                type="response.completed", response=body, sequence_number=1
            )

    sdk = SdkAgent("streamer", model=Streams())
    runner = Remembers()
    wrapped = JournalModel(Streams())
    for _ in range(2):
        attempt = Attempt(Turns(runner), Graph(sdk, durable(sdk).gate))
        attempt.active = "streamer"
        token = ATTEMPT.set(attempt)
        try:
            events = [
                e async for e in wrapped.stream_response(None, "hi", None, [], None, [], None)
            ]
        finally:
            ATTEMPT.reset(token)
        (event,) = events  # the whole stream, as one response
        assert isinstance(event, ResponseCompletedEvent)
        assert [o.content[0].text for o in event.response.output] == ["hello"]  # type: ignore[union-attr]
    assert streamed == [1]  # the second time, replayed from the step
    assert runner.held["llm/1"]["content"] == "hello"
    assert runner.held["llm/1"]["response_id"] == "resp_1"


async def test_mcp_tools_are_steps_classed_by_their_servers_annotations_only_when_trusted(
    store: FileStore, fake: FakeLLM, script: Script, tmp_path: Any
):
    """The SDK's MCPServerStdio to a real MCP server: its tools' calls are steps; untrusted,
    each tool is a write that needs approval; trusted, ``readOnlyHint`` is a read and an
    idempotent, non-destructive tool a write nobody approves; ``writes=``/``approve=`` win."""
    import sys
    from pathlib import Path

    from agents.mcp import MCPServerStdio

    folder = tmp_path / "mcp"
    folder.mkdir()
    server_py = Path(__file__).parent / "_mcp_server.py"
    server = MCPServerStdio(
        params={"command": sys.executable, "args": [str(server_py), str(folder)]},
        name="tickets",
    )
    script.turns += [calls(("lookup", {"topic": "vpn"}), ("file_ticket", {"summary": "vpn"})), echo]
    agent = SdkAgent("mcp", model=model(fake), mcp_servers=[server])

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
    assert (folder / "effects.log").read_text().count("file_ticket") == 1
    again = await run(config(durable(agent, trust_annotations=True), store), "r2", PROMPT)
    assert again.status == Status.COMPLETED
    assert (folder / "effects.log").read_text().count("file_ticket") == 1  # replayed

    overridden = await run(
        config(durable(agent, trust_annotations=True, approve=["lookup"]), store), "r3", PROMPT
    )
    assert [p.tool for p in overridden.pending] == ["lookup"]


async def test_a_worker_traces_an_agents_sdk_run_and_marks_its_replayed_steps(
    store: FileStore, fake: FakeLLM, script: Script
):
    from telemetry_support import by_attempt_spans, run_approved, traced

    from durableagent.worker import Worker

    script.turns += [calls(("create_ticket", {"summary": "s"})), echo]
    agent = durable(helpdesk(fake, []), writes=["create_ticket"])
    provider, exporter = traced()
    worker = Worker(agent, store, rescan=0.5, tracer_provider=provider)
    await asyncio.wait_for(run_approved(store, worker), 60)
    steps = by_attempt_spans(list(exporter.get_finished_spans()))
    assert [(s.name, s.attributes["durableagent.step.replayed"]) for s in steps[2]] == [
        ("chat fake-model", True),
        ("execute_tool create_ticket", False),
        ("chat fake-model", False),
    ]
    chat = steps[1][0].attributes
    assert chat["gen_ai.provider.name"] == "openai"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (100, 11)
    assert steps[2][1].attributes["durableagent.tool.write"] is True


async def test_a_call_of_an_unknown_tool_is_recorded_refused_so_none_stays_open(
    store: FileStore, fake: FakeLLM, script: Script
):
    """The SDK raises on a tool it does not know, or, with ``tool_not_found_behavior=
    "return_error_to_model"``, answers the model itself: either way the call has its step."""
    effects: list[str] = []
    script.turns += [calls(("teleport", {}), ("lookup", {"topic": "a"})), echo]
    sdk = helpdesk(fake, effects)
    raising = durable(sdk)
    with pytest.raises(Exception, match="Tool teleport not found"):
        await run(config(raising, store), "r1", PROMPT)
    steps = {s.name: s.result for s in view_store(store, "r1").steps if s.kind == "tool"}
    assert steps["tool/1/0/teleport"]["content"] == "unknown tool 'teleport' for agent 'helpdesk'"

    answering = durable(sdk, run_config=RunConfig(tool_not_found_behavior="return_error_to_model"))
    done = await run(config(answering, store), "r2", PROMPT)
    assert done.status == Status.COMPLETED, done
    assert effects == ["lookup:a"]
    steps = {s.name: s.result for s in view_store(store, "r2").steps if s.kind == "tool"}
    assert list(steps) == ["tool/1/0/teleport", "tool/1/1/lookup"]
    assert steps["tool/1/0/teleport"]["is_error"] is True
    assert plan(store.load("r2")).ending == PlanEnding.COMPLETED


async def test_a_pause_stops_a_read_in_flight_and_a_resume_goes_on_from_the_journal(
    store: FileStore, fake: FakeLLM, script: Script
):
    entered = asyncio.Event()
    ran: list[str] = []

    @function_tool
    async def wait(n: int) -> str:
        """Wait."""
        ran.append(str(n))
        if len(ran) == 1:
            entered.set()
            await asyncio.sleep(60)
        return "waited"

    script.turns += [calls(("wait", {"n": 1})), echo]
    agent = durable(SdkAgent("waits", model=model(fake), tools=[wait]))
    attempt = asyncio.create_task(run(config(agent, store), "r1", PROMPT))
    await asyncio.wait_for(entered.wait(), 20)
    signal(store, "r1", "pause", {}, by="ann", reason="vendor outage")
    out = await asyncio.wait_for(attempt, 20)
    assert out.status == Status.PAUSED and len(script.seen) == 1
    signal(store, "r1", "resume", {}, by="ann")
    done = await run(config(agent, store), "r1", None)
    assert done.status == Status.COMPLETED and done.message is not None
    assert done.message.content == "waited"
    assert ran == ["1", "1"] and len(script.seen) == 2  # the read again; llm/1 replayed


async def test_the_sdks_own_retry_of_a_failed_request_never_asks_a_second_turn(
    store: FileStore, fake: FakeLLM, script: Script
):
    """A request that failed left its step open; a retry policy of the SDK's would make the
    same request again, inside the attempt: it gets the failure again, never ``llm/2``."""
    from agents.retry import ModelRetryBackoffSettings, ModelRetrySettings
    from fake_llm import Canned

    retry = ModelRetrySettings(
        max_retries=3,
        backoff=ModelRetryBackoffSettings(initial_delay=0, max_delay=0),
        policy=lambda ctx: True,
    )
    script.turns += [calls(("lookup", {"topic": "a"})), echo]
    sdk = helpdesk(fake, [], model_settings=ModelSettings(retry=retry))
    agent = durable(sdk)
    fake.push(Canned(status=400, body={"error": {"message": "bad", "type": "invalid"}}))
    with pytest.raises(Exception, match="bad"):
        await run(config(agent, store), "r1", PROMPT)
    assert len(fake.requests) == 1
    assert [r.step for r in store.load("r1") if r.type == "step.started"] == ["llm/1"]
    done = await run(config(agent, store), "r1", None)  # the open model step is asked again
    assert done.status == Status.COMPLETED and done.message is not None
    assert [s.name for s in view_store(store, "r1").steps] == ["llm/1", "tool/1/0/lookup", "llm/2"]


def test_a_deploys_fingerprint_sees_the_agents_tools_model_and_instructions(fake: FakeLLM):
    from durableagent.deploys import code_of

    first = code_of(durable(helpdesk(fake, [])).config)
    assert sorted(first.schemas) == ["create_ticket", "lookup"]
    assert first.fingerprint["model"] == "fake-model"
    changed = helpdesk(fake, [])
    changed.instructions = "You are a different helpdesk."
    again = code_of(durable(changed).config)
    assert again.fingerprint["prompt"] != first.fingerprint["prompt"]
    assert again.fingerprint["tools"] == first.fingerprint["tools"]
