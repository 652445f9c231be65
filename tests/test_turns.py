"""The seam for an agent that brings its own loop (``AgentLoop`` over ``Turns``): run() executes
it in place of our loop, and the journal treats its steps as it treats our loop's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from durableagent import (
    AgentLoop,
    Budget,
    Config,
    FileStore,
    LoopOutcome,
    Message,
    PolicyGate,
    Status,
    Tool,
    ToolCall,
    Turns,
    run,
    signal,
    view_store,
)
from durableagent.tools import current_context


@dataclass(frozen=True)
class Named:
    """What a framework's model is, as far as the journal needs: its name and provider."""

    model: str = "toy-1"
    provider: str = "toy"


@dataclass
class ToyLoop:
    """A framework's loop in miniature: its own replies, its own way of calling tools."""

    replies: list[dict[str, Any]]
    effects: list[str] = field(default_factory=list)
    model: Named = field(default_factory=Named)
    tools: Sequence[Tool] = ()
    max_turns: int = 5
    budget: Budget | None = None
    prices: Any = None
    approve_within: float | None = None

    async def run_turns(self, messages: Sequence[Message], turns: Turns) -> LoopOutcome:
        turns.know([Tool("lookup", fn=lambda a: ""), Tool("send", fn=lambda a: "")])
        for reply in self.replies:

            async def ask(reply: dict[str, Any] = reply) -> dict[str, Any]:
                self.effects.append("model")
                return {"role": "assistant", **reply, "toy": {"raw": reply}}

            got = Message.from_dict(await turns.model(ask, reserve=lambda: 100))
            if not got.tool_calls:
                return LoopOutcome(got)
            pending = turns.pending(got.tool_calls)
            if pending:
                return LoopOutcome(None, pending)
            for i, call in enumerate(got.tool_calls):

                async def invoke(call: ToolCall = call) -> dict[str, Any]:
                    self.effects.append(f"{call.name}:{current_context().step}")
                    return {"content": "ok", "is_error": False, "toy": 1}

                await turns.tool(
                    i, call, invoke, refused=lambda r: {"content": r, "is_error": True}
                )
        raise AssertionError("the toy ran out of replies")


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"id": "c1", "name": name, "arguments": args}


async def test_an_agent_loop_runs_under_run_and_is_replayed_from_the_journal(tmp_path):
    store = FileStore(tmp_path)
    toy = ToyLoop(
        [
            {"content": "", "tool_calls": [_call("lookup", q=1), _call("send", to="a")]},
            {"content": "done"},
        ]
    )
    agent: AgentLoop = toy
    config = Config(agent, PolicyGate(writes={"send"}), store)
    first = await run(config, "r1", [Message("user", "hi")])
    assert first.status == Status.AWAITING_APPROVAL
    assert [p.step for p in first.pending] == ["tool/1/1/send"]
    assert toy.effects == ["model"]  # nothing of the turn ran

    signal(store, "r1", "approve", {"marker": first.pending[0].marker}, by="ann")
    done = await run(config, "r1", None)
    assert done.status == Status.COMPLETED and done.message is not None
    assert done.message.content == "done"
    # llm/1 replayed (no second "model" for it), both calls ran through the toy's own invoke.
    assert toy.effects == ["model", "lookup:tool/1/0/lookup", "send:tool/1/1/send", "model"]
    view = view_store(store, "r1")
    assert [s.name for s in view.steps] == ["llm/1", "tool/1/0/lookup", "tool/1/1/send", "llm/2"]
    assert [s.write for s in view.steps] == [False, False, True, False]


async def test_a_deny_reaches_the_loop_as_its_refusal_and_the_call_never_runs(tmp_path):
    store = FileStore(tmp_path)
    toy = ToyLoop([{"content": "", "tool_calls": [_call("send", to="a")]}, {"content": "ok"}])
    config = Config(toy, PolicyGate(writes={"send"}), store)
    first = await run(config, "r1", [Message("user", "hi")])
    signal(store, "r1", "deny", {"marker": first.pending[0].marker}, by="bo", reason="no")
    done = await run(config, "r1", None)
    assert done.status == Status.COMPLETED
    assert toy.effects == ["model", "model"]
    step = next(s for s in view_store(store, "r1").steps if s.name == "tool/1/0/send")
    assert step.result == {"content": "denied by bo: no", "is_error": True}


async def test_a_budgeted_run_records_the_loops_reservation_for_its_model(tmp_path):
    store = FileStore(tmp_path)
    toy = ToyLoop([{"content": "hi"}])
    config = Config(toy, PolicyGate(), store)
    await run(config, "r1", [Message("user", "hi")], budget=Budget(tokens=10_000))
    started = [r for r in store.load("r1") if r.type == "step.started" and r.step == "llm/1"]
    assert started[0].data == {"reserve": {"tokens": 100, "model": "toy-1"}}
