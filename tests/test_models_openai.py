"""OpenAIModel through the real ``openai`` SDK over a real socket to a local server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_llm import Call, Canned, FakeLLM, Say, helpdesk_config, helpdesk_tools

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    Message,
    ModelError,
    ModelRetryError,
    PolicyGate,
    Status,
    ToolCall,
    run,
)
from durableagent.models import OpenAIModel
from durableagent.record import STEP_COMPLETED, STEP_STARTED

INPUT = [Message("user", "I need access to the billing dashboard.")]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


def model(fake: FakeLLM, **settings: Any) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=fake.openai_url, api_key="sk-test", **settings)


def config(fake: FakeLLM, store: FileStore, filed: list[str], **settings: Any) -> Config:
    return helpdesk_config(model(fake, **settings), store, filed)


async def test_a_run_on_openai_model_completes_and_records_usage_model_and_response_id(
    fake: FakeLLM, store: FileStore
) -> None:
    filed: list[str] = []
    outcome = await run(config(fake, store, filed), "r1", INPUT)
    assert outcome.status == Status.COMPLETED
    assert outcome.message is not None and outcome.message.content == "Ticket filed: TICKET-1"
    assert filed == ["billing dashboard access"]
    assert fake.turns() == {1: 1, 2: 1, 3: 1}
    models = [r for r in store.load("r1") if r.type == STEP_COMPLETED and r.kind == "model"]
    assert [r.step for r in models] == ["llm/1", "llm/2", "llm/3"]
    first = models[0].data
    # The assistant message's keys, plus what the provider said about the call.
    assert first["role"] == "assistant"
    assert first["tool_calls"][0]["name"] == "lookup_policy"
    assert first["tool_calls"][0]["arguments"] == {"topic": "billing"}
    assert first["usage"] == {"input_tokens": 100, "output_tokens": 11}
    assert first["model"] == "fake-model-2025-01"
    assert first["response_id"] == "chatcmpl-1"
    assert models[2].data["usage"] == {"input_tokens": 300, "output_tokens": 13}


async def test_the_request_is_chat_completions_json_with_tools_and_no_journal_extras(
    fake: FakeLLM, store: FileStore
) -> None:
    await run(config(fake, store, [], temperature=0.25), "r1", INPUT)
    body = fake.requests[2].body
    assert body["model"] == "gpt-test" and body["temperature"] == 0.25
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert body["messages"][0]["content"] == "You are a helpdesk agent."
    asked = body["messages"][2]
    assert asked["tool_calls"] == [
        {
            "id": "call_1_0",
            "type": "function",
            "function": {"name": "lookup_policy", "arguments": '{"topic": "billing"}'},
        }
    ]
    assert body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1_0",
        "content": "billing: access needs a ticket",
    }
    for m in body["messages"]:  # recorded for humans, never sent back
        assert not {"usage", "model", "response_id"} & set(m)
    spec = {t["function"]["name"]: t for t in body["tools"]}
    assert spec["create_ticket"]["type"] == "function"
    assert spec["create_ticket"]["function"]["parameters"]["required"] == ["summary", "requester"]
    assert spec["lookup_policy"]["function"]["description"] == (
        "Look up the helpdesk policy on a topic."
    )
    # The SDK's own retries are off: the durable layer decides.
    assert fake.requests[0].headers.get("x-stainless-retry-count") == "0"


async def test_no_tools_means_no_tools_key_in_the_request(fake: FakeLLM) -> None:
    fake.brain = lambda r: Say("hello")
    reply = await model(fake).complete([Message("user", "hi")], [])
    assert reply.content == "hello"
    assert "tools" not in fake.requests[0].body


async def test_arguments_that_are_not_json_become_an_error_result_the_model_reads(
    fake: FakeLLM, store: FileStore
) -> None:
    filed: list[str] = []

    def brain(request: Any) -> Say | Call:
        if request.turn == 1:
            return Call((("create_ticket", '{"summary": "billing", "requester": '),))
        return Say(f"saw: {request.tool_results[-1]}")

    fake.brain = brain
    outcome = await run(config(fake, store, filed), "r1", INPUT)
    assert outcome.status == Status.COMPLETED
    assert filed == []  # the tool was not called
    records = store.load("r1")
    call = next(r for r in records if r.step == "llm/1" and r.type == STEP_COMPLETED)
    assert call.data["tool_calls"][0]["error"].startswith("arguments are not valid JSON: ")
    result = next(
        r for r in records if r.step == "tool/1/0/create_ticket" and r.type == STEP_COMPLETED
    )
    assert result.data["is_error"] is True
    assert result.data["content"].startswith("arguments are not valid JSON: ")
    started = next(
        r for r in records if r.step == "tool/1/0/create_ticket" and r.type == STEP_STARTED
    )
    # Refused without touching the tool: the gate's class is recorded, and that it was refused
    # (it never acted, so it is never indeterminate).
    assert started.data == {"write": True, "refused": True}
    # The model saw the error as that call's result.
    tool_msg = fake.requests[1].body["messages"][-1]
    assert tool_msg["role"] == "tool" and "arguments are not valid JSON" in tool_msg["content"]
    # and its own malformed call came back as a well-formed one (empty arguments).
    assert fake.requests[1].body["messages"][-2]["tool_calls"][0]["function"]["arguments"] == "{}"


async def test_a_malformed_call_to_a_gated_write_is_refused_not_put_to_a_human(
    fake: FakeLLM, store: FileStore
) -> None:
    fake.push(
        Canned(
            body=fake.openai_body(Call((("create_ticket", "[1, 2]"),)), 1, 1),
        )
    )
    fake.brain = lambda r: Say("ok")
    tools = helpdesk_tools([])
    gate = PolicyGate(writes={"create_ticket"})  # every call needs a human
    cfg = Config(AgentConfig(model(fake), tools), gate, store)
    outcome = await run(cfg, "r1", INPUT)
    assert outcome.status == Status.COMPLETED
    result = [r for r in store.load("r1") if r.step == "tool/1/0/create_ticket"][-1]
    assert result.data["content"] == "arguments must be a JSON object, got array"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ('{"topic": NaN}', "arguments are not valid JSON: NaN is not JSON"),
        ("not json", "arguments are not valid JSON: Expecting value"),
        ('"billing"', "arguments must be a JSON object, got str"),
    ],
)
async def test_arguments_the_journal_could_not_hold_are_an_error_on_the_call(
    fake: FakeLLM, arguments: str, error: str
) -> None:
    fake.brain = lambda r: Call((("lookup_policy", arguments),))
    reply = await model(fake).complete(INPUT, [])
    (call,) = reply.tool_calls
    assert call.arguments == {} and call.error is not None and call.error.startswith(error)
    json.dumps(reply.to_dict(), allow_nan=False)  # recordable


async def test_empty_arguments_text_is_a_call_without_arguments(fake: FakeLLM) -> None:
    fake.brain = lambda r: Call((("lookup_policy", ""),))
    reply = await model(fake).complete(INPUT, [])
    assert reply.tool_calls == (ToolCall("call_1_0", "lookup_policy", {}),)


def choice_body(fake: FakeLLM, message: dict[str, Any], finish: str) -> dict[str, Any]:
    body = fake.openai_body(Say(""), 1, 1)
    body["choices"][0]["message"] = {"role": "assistant", **message}
    body["choices"][0]["finish_reason"] = finish
    return body


@pytest.mark.parametrize(
    ("message", "finish", "content"),
    [
        (
            {"content": None, "refusal": "I can't help with that."},
            "stop",
            "I can't help with that.",
        ),
        (
            {"content": None},
            "content_filter",
            "[no answer: the provider's content filter withheld the reply "
            "(stop reason: content_filter)]",
        ),
        (
            {"content": ""},
            "length",
            "[no answer: the reply hit the output token limit before any text "
            "(stop reason: length)]",
        ),
        ({"content": "Partial ans"}, "length", "Partial ans"),
        (
            {"content": None},
            "stop",
            "[no answer: the model returned an empty reply (stop reason: stop)]",
        ),
    ],
)
async def test_refusals_filters_and_cut_replies_are_recorded_as_answers(
    fake: FakeLLM, store: FileStore, message: dict[str, Any], finish: str, content: str
) -> None:
    fake.push(Canned(body=choice_body(fake, message, finish)))
    outcome = await run(config(fake, store, []), "r1", INPUT)
    assert outcome.status == Status.COMPLETED
    assert outcome.message is not None and outcome.message.content == content
    assert len(fake.requests) == 1


async def test_a_call_cut_off_at_the_token_limit_says_so_in_its_error(fake: FakeLLM) -> None:
    body = choice_body(
        fake,
        {
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": "lo'},
                }
            ],
        },
        "length",
    )
    fake.push(Canned(body=body))
    (call,) = (await model(fake).complete(INPUT, [])).tool_calls
    assert call.error is not None
    assert "cut off at the token limit" in call.error and call.error.startswith(
        "arguments are not valid JSON"
    )


async def test_rate_limit_raises_retry_error_with_retry_after_and_records_no_result(
    fake: FakeLLM, store: FileStore
) -> None:
    fake.push(
        Canned(
            429,
            {"error": {"message": "Rate limit reached", "type": "requests"}},
            {"retry-after": "7"},
        )
    )
    with pytest.raises(ModelRetryError) as e:
        await run(config(fake, store, []), "r1", INPUT)
    assert e.value.status == 429 and e.value.retry_after == 7.0
    assert "Rate limit reached" in str(e.value) and "wait 7s" in str(e.value)
    assert len(fake.requests) == 1  # the SDK did not retry on its own
    assert [r.type for r in store.load("r1")] == ["run.started", "step.started"]
    # The read re-runs on the next attempt.
    outcome = await run(config(fake, store, []), "r1", None)
    assert outcome.status == Status.COMPLETED
    assert fake.turns() == {1: 2, 2: 1, 3: 1}


async def test_503_with_an_http_date_retry_after_is_a_retry_error(fake: FakeLLM) -> None:
    fake.push(
        Canned(
            503,
            {"error": {"message": "overloaded"}},
            {"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"},
        )
    )
    with pytest.raises(ModelRetryError) as e:
        await model(fake).complete(INPUT, [])
    assert e.value.status == 503
    assert e.value.retry_after is not None and e.value.retry_after > 3600


async def test_a_server_error_is_transient_without_a_wait(fake: FakeLLM) -> None:
    fake.push(Canned(500, {"error": {"message": "boom"}}))
    with pytest.raises(ModelRetryError) as e:
        await model(fake).complete(INPUT, [])
    assert e.value.status == 500 and e.value.retry_after is None
    assert "HTTP 500 (boom)" in str(e.value)


async def test_a_refused_key_is_a_model_error_that_says_to_check_the_key(fake: FakeLLM) -> None:
    fake.push(Canned(401, {"error": {"message": "Incorrect API key provided"}}))
    with pytest.raises(ModelError) as e:
        await model(fake).complete(INPUT, [])
    assert not isinstance(e.value, ModelRetryError)
    assert e.value.status == 401 and "API key" in str(e.value)


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>502 Bad Gateway</body></html>",
        b'{"id": "x", "object": "chat.completion"}',
        b'{"id": "x", "choices": []}',
        b"[1, 2, 3]",
        b'{"choices": [{"index": 0, "finish_reason": "stop"}]}',
    ],
    ids=["not-json", "no-choices", "empty-choices", "a-list", "no-message"],
)
async def test_a_malformed_body_is_a_model_error_and_the_step_is_not_recorded(
    fake: FakeLLM, store: FileStore, body: bytes
) -> None:
    fake.push(Canned(200, body))
    with pytest.raises(ModelError, match="not a reply"):
        await run(config(fake, store, []), "r1", INPUT)
    assert not any(r.type == STEP_COMPLETED for r in store.load("r1"))
    assert (await run(config(fake, store, []), "r1", None)).status == Status.COMPLETED


async def test_an_html_error_page_with_an_html_content_type_is_a_model_error(fake: FakeLLM) -> None:
    fake.push(Canned(200, b"<html>proxy login</html>", {"content-type": "text/html"}))
    with pytest.raises(ModelError, match="not a reply"):
        await model(fake).complete(INPUT, [])


async def test_a_slow_reply_past_the_timeout_is_a_transient_error(fake: FakeLLM) -> None:
    fake.push(Canned(delay=2.0, body=fake.openai_body(Say("late"), 1, 1)))
    with pytest.raises(ModelRetryError, match="could not get an answer"):
        await model(fake, timeout=0.3).complete(INPUT, [])
    assert len(fake.requests) == 1


async def test_a_server_that_is_not_there_is_a_transient_error() -> None:
    with FakeLLM() as gone:
        url = gone.openai_url
    m = OpenAIModel("gpt-test", base_url=url, api_key="k")
    with pytest.raises(ModelRetryError) as e:
        await m.complete(INPUT, [])
    assert e.value.status is None and url in str(e.value)


def test_missing_credentials_are_said_when_the_model_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    with pytest.raises(ModelError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1")


def test_settings_cannot_override_what_the_adapter_sends() -> None:
    with pytest.raises(TypeError, match="messages"):
        OpenAIModel("m", api_key="k", messages=[])


def test_a_client_it_builds_never_retries_on_its_own() -> None:
    assert OpenAIModel("m", api_key="k", base_url="http://127.0.0.1:9/v1")._client.max_retries == 0


async def test_a_setting_the_sdk_does_not_know_is_a_model_error_naming_it(fake: FakeLLM) -> None:
    with pytest.raises(ModelError, match=r"could not send the request .*bogus"):
        await model(fake, bogus=1).complete(INPUT, [])
    assert fake.requests == []
