"""AnthropicModel through the real ``anthropic`` SDK over a real socket to a local server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_llm import Call, Canned, FakeLLM, Request, Say, helpdesk_config

from durableagent import (
    Config,
    FileStore,
    Message,
    ModelError,
    ModelRetryError,
    Status,
    ToolCall,
    run,
)
from durableagent.models import AnthropicModel
from durableagent.record import STEP_COMPLETED

INPUT = [Message("user", "I need access to the billing dashboard.")]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


def model(fake: FakeLLM, **settings: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=fake.url, api_key="sk-ant-test", **settings)


def config(fake: FakeLLM, store: FileStore, filed: list[str], **settings: Any) -> Config:
    return helpdesk_config(model(fake, **settings), store, filed)


async def test_a_run_on_anthropic_model_completes_and_records_usage_model_and_response_id(
    fake: FakeLLM, store: FileStore
) -> None:
    filed: list[str] = []
    outcome = await run(config(fake, store, filed), "r1", INPUT)
    assert outcome.status == Status.COMPLETED
    assert outcome.message is not None and outcome.message.content == "Ticket filed: TICKET-1"
    assert filed == ["billing dashboard access"] and fake.turns() == {1: 1, 2: 1, 3: 1}
    first = next(r for r in store.load("r1") if r.step == "llm/1" and r.type == STEP_COMPLETED)
    assert first.data["tool_calls"] == [
        {"id": "toolu_1_0", "name": "lookup_policy", "arguments": {"topic": "billing"}}
    ]
    assert first.data["usage"] == {"input_tokens": 100, "output_tokens": 11}
    assert (first.data["model"], first.data["response_id"]) == ("fake-model-2025-01", "msg_1")


async def test_the_system_prompt_goes_in_system_and_tool_results_are_tool_result_blocks(
    fake: FakeLLM, store: FileStore
) -> None:
    await run(config(fake, store, [], stop_sequences=["END"]), "r1", INPUT)
    body = fake.requests[1].body
    assert body["system"] == "You are a helpdesk agent."
    assert body["max_tokens"] == 4096 and body["stop_sequences"] == ["END"]
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"] == [{"type": "text", "text": INPUT[0].content}]
    assert body["messages"][1]["content"] == [
        {
            "type": "tool_use",
            "id": "toolu_1_0",
            "name": "lookup_policy",
            "input": {"topic": "billing"},
        }
    ]
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1_0",
            "content": "billing: access needs a ticket",
        }
    ]
    specs = {t["name"]: t for t in body["tools"]}
    assert specs["create_ticket"]["input_schema"]["required"] == ["summary", "requester"]
    assert specs["lookup_policy"]["description"] == "Look up the helpdesk policy on a topic."
    assert fake.requests[0].headers.get("x-stainless-retry-count") == "0"


async def test_the_results_of_one_turn_are_merged_into_one_user_turn(
    fake: FakeLLM, store: FileStore
) -> None:
    def brain(request: Request) -> Say | Call:
        if request.turn == 1:
            return Call(
                (
                    ("lookup_policy", json.dumps({"topic": "billing"})),
                    ("lookup_policy", json.dumps({"topic": "vpn"})),
                ),
                text="Let me check both.",
            )
        return Say("done")

    fake.brain = brain
    assert (await run(config(fake, store, []), "r1", INPUT)).status == Status.COMPLETED
    turns = fake.requests[1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"][0] == {"type": "text", "text": "Let me check both."}
    assert [b["tool_use_id"] for b in turns[2]["content"]] == ["toolu_1_0", "toolu_1_1"]
    assert all(b["type"] == "tool_result" for b in turns[2]["content"])


def test_consecutive_user_messages_after_tool_results_stay_one_user_turn() -> None:
    m = AnthropicModel("c", api_key="k", base_url="http://127.0.0.1:9")
    convo = [
        Message("system", "first"),
        Message("system", "second"),
        Message("user", "hi"),
        Message("assistant", tool_calls=(ToolCall("a", "f", {}),)),
        Message("tool", "r", tool_call_id="a", name="f"),
        Message("user", "and also"),
    ]
    req = m.request(convo, [])
    assert req["system"] == "first\n\nsecond"
    assert [t["role"] for t in req["messages"]] == ["user", "assistant", "user"]
    assert req["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a", "content": "r"},
        {"type": "text", "text": "and also"},
    ]
    assert "tools" not in req


def reply_body(fake: FakeLLM, content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    body = fake.anthropic_body(Say(""), 1, 1)
    body["content"] = content
    body["stop_reason"] = stop
    return body


async def test_a_refusal_without_text_is_recorded_with_a_marker(
    fake: FakeLLM, store: FileStore
) -> None:
    fake.push(Canned(body=reply_body(fake, [], "refusal")))
    outcome = await run(config(fake, store, []), "r1", INPUT)
    assert outcome.status == Status.COMPLETED and outcome.message is not None
    assert outcome.message.content == (
        "[no answer: the model refused to answer (stop reason: refusal)]"
    )


async def test_a_call_cut_at_max_tokens_is_refused_with_an_error_the_model_reads(
    fake: FakeLLM, store: FileStore
) -> None:
    filed: list[str] = []
    cut = [{"type": "tool_use", "id": "t1", "name": "create_ticket", "input": {"summary": "bil"}}]
    fake.push(Canned(body=reply_body(fake, cut, "max_tokens")))
    fake.brain = lambda r: Say(f"saw {r.tool_results[-1]}")
    outcome = await run(config(fake, store, filed), "r1", INPUT)
    assert filed == []
    assert outcome.message is not None and "cut off at max_tokens" in outcome.message.content


async def test_overloaded_529_with_retry_after_is_a_retry_error(fake: FakeLLM) -> None:
    fake.push(
        Canned(
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            {"retry-after": "3"},
        )
    )
    with pytest.raises(ModelRetryError) as e:
        await model(fake).complete(INPUT, [])
    assert (e.value.status, e.value.retry_after) == (529, 3.0)
    assert "Overloaded" in str(e.value) and len(fake.requests) == 1


async def test_rate_limit_with_retry_after_ms_is_a_retry_error(fake: FakeLLM) -> None:
    fake.push(
        Canned(
            429,
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
            {"retry-after-ms": "1500", "retry-after": "2"},
        )
    )
    with pytest.raises(ModelRetryError) as e:
        await model(fake).complete(INPUT, [])
    assert (e.value.status, e.value.retry_after) == (429, 1.5)


async def test_a_bad_request_is_a_model_error_not_a_retry(fake: FakeLLM) -> None:
    fake.push(
        Canned(
            400,
            {"type": "error", "error": {"type": "invalid_request_error", "message": "bad turn"}},
        )
    )
    with pytest.raises(ModelError) as e:
        await model(fake).complete(INPUT, [])
    assert not isinstance(e.value, ModelRetryError) and "bad turn" in str(e.value)


@pytest.mark.parametrize(
    "body",
    [b"not json at all", b'{"id": "x", "type": "message"}', b"[1]"],
    ids=["not-json", "no-content", "a-list"],
)
async def test_a_malformed_body_is_a_model_error(fake: FakeLLM, body: bytes) -> None:
    fake.push(Canned(200, body))
    with pytest.raises(ModelError, match="not a reply"):
        await model(fake).complete(INPUT, [])


async def test_a_slow_reply_past_the_timeout_is_a_transient_error(fake: FakeLLM) -> None:
    fake.push(Canned(delay=2.0, body=fake.anthropic_body(Say("late"), 1, 1)))
    with pytest.raises(ModelRetryError, match="could not get an answer"):
        await model(fake, timeout=0.3).complete(INPUT, [])


def test_settings_cannot_override_what_the_adapter_sends() -> None:
    with pytest.raises(TypeError, match="system"):
        AnthropicModel("c", api_key="k", system="x")


async def test_a_request_the_sdk_cannot_send_is_a_model_error_naming_why(
    fake: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")  # no credentials profile either
    with pytest.raises(ModelError, match=r"could not send the request .*authentication"):
        await AnthropicModel("c", base_url=fake.url).complete(INPUT, [])
    with pytest.raises(ModelError, match="temperature"):
        await model(fake, temperature=0.2).complete(INPUT, [])
    assert fake.requests == []
