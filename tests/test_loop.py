"""The agent loop's seams, with a plain runner and with a journal."""

from __future__ import annotations

import pytest

from durableagent import (
    AgentConfig,
    MaxTurnsExceeded,
    Message,
    PolicyGate,
    Result,
    ScriptedModel,
    Tool,
    ToolCall,
    marker_for,
    run_loop,
    step_tool_name,
)


def calls(*tcs: ToolCall) -> Message:
    return Message("assistant", tool_calls=tcs)


async def test_an_answer_without_tool_calls_ends_the_loop():
    out = await run_loop(AgentConfig(ScriptedModel([Message("assistant", "hi")])), [])
    assert out.message == Message("assistant", "hi") and out.pending == ()


async def test_the_system_prompt_is_sent_first_on_every_call():
    seen = []

    def model(messages):
        seen.append([m.role for m in messages])
        return calls(ToolCall("1", "t", {})) if len(seen) == 1 else Message("assistant", "ok")

    config = AgentConfig(ScriptedModel(model), [Tool("t", fn=lambda a: "r")], system="be nice")
    await run_loop(config, [Message("user", "q")])
    assert seen == [["system", "user"], ["system", "user", "assistant", "tool"]]


async def test_one_gated_call_holds_back_every_call_of_the_turn():
    ran = []
    tools = [Tool(n, fn=lambda a, n=n: ran.append(n) or "ok") for n in ("read", "write")]
    model = ScriptedModel([calls(ToolCall("1", "read", {}), ToolCall("2", "write", {"x": 1}))])
    out = await run_loop(AgentConfig(model, tools), [], gate=PolicyGate(writes={"write"}))
    assert out.message is None
    assert [(p.step, p.tool) for p in out.pending] == [("tool/1/1/write", "write")]
    assert out.pending[0].marker == marker_for("tool/1/1/write", {"x": 1})
    assert ran == []


async def test_approved_marker_lets_the_call_through_and_results_feed_the_model():
    got = []

    def model(messages):
        if messages and messages[-1].role == "tool":
            got.append(messages[-1])
            return Message("assistant", "done")
        return calls(ToolCall("c9", "write", {"x": 1}))

    tools = [Tool("write", fn=lambda a: Result("W-1"))]
    out = await run_loop(
        AgentConfig(ScriptedModel(model), tools),
        [],
        gate=PolicyGate(writes={"write"}),
        approved=[marker_for("tool/1/0/write", {"x": 1})],
    )
    assert out.message is not None and out.message.content == "done"
    assert got == [Message("tool", "W-1", tool_call_id="c9", name="write")]


async def test_an_approval_for_other_arguments_does_not_count():
    model = ScriptedModel([calls(ToolCall("1", "write", {"x": 2}))])
    out = await run_loop(
        AgentConfig(model, [Tool("write", fn=lambda a: "ok")]),
        [],
        gate=PolicyGate(writes={"write"}),
        approved=[marker_for("tool/1/0/write", {"x": 1})],
    )
    assert len(out.pending) == 1


async def test_policy_deny_unknown_tool_and_deny_signal_record_errors_without_calling():
    ran = []
    results = []

    def model(messages):
        tool_msgs = [m for m in messages if m.role == "tool"]
        if tool_msgs:
            results.extend(tool_msgs)
            return Message("assistant", "ok")
        return calls(ToolCall("1", "rm", {}), ToolCall("2", "nope", {}), ToolCall("3", "write", {}))

    tools = [Tool(n, fn=lambda a, n=n: ran.append(n) or "x") for n in ("rm", "write")]
    marker = marker_for("tool/1/2/write", {})
    out = await run_loop(
        AgentConfig(ScriptedModel(model), tools),
        [],
        gate=PolicyGate(writes={"write", "rm"}, deny={"rm"}),
        approved=[marker],
        denied={marker: "denied by bob: no"},
    )
    assert out.message is not None
    assert ran == []
    assert "denied by policy" in results[0].content
    assert "unknown tool 'nope'" in results[1].content
    assert results[2].content == "denied by bob: no"


async def test_more_than_max_turns_raises():
    model = ScriptedModel(lambda m: calls(ToolCall("1", "t", {})))
    with pytest.raises(MaxTurnsExceeded):
        await run_loop(AgentConfig(model, [Tool("t", fn=lambda a: "r")], max_turns=3), [])
    assert model.calls == 3


async def test_async_tools_and_a_tool_returning_junk():
    async def good(args):
        return "async ok"

    model = ScriptedModel(
        lambda m: (
            calls(ToolCall("1", "t", {})) if len(m) == 0 else Message("assistant", m[-1].content)
        )
    )
    out = await run_loop(AgentConfig(model, [Tool("t", fn=good)]), [])
    assert out.message is not None and out.message.content == "async ok"
    bad = AgentConfig(ScriptedModel([calls(ToolCall("1", "t", {}))]), [Tool("t", fn=lambda a: 3)])
    with pytest.raises(TypeError, match="return a Result or str"):
        await run_loop(bad, [])


def test_step_names():
    assert step_tool_name("tool/2/0/create_ticket") == "create_ticket"
    assert step_tool_name("tool/2/0/ns/odd") == "ns/odd"
    assert step_tool_name("llm/3") is None
    assert step_tool_name("tool/2/0/") is None


def test_messages_round_trip_through_plain_dicts():
    m = Message("assistant", "x", (ToolCall("1", "t", {"a": [1]}),))
    assert Message.from_dict(m.to_dict()) == m
    assert Message.from_dict({"role": "user", "content": None}) == Message("user", "")
    with pytest.raises(ValueError):
        Message("robot", "x")
    assert Result.from_dict(Result("e", True).to_dict()) == Result("e", True)
