"""OpenAIModel: Chat Completions with tools over the official ``openai`` SDK (extra
``openai``), for OpenAI and any OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio,
OpenRouter) through ``base_url``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai

from ..errors import ModelError
from ..messages import Message, ToolCall
from ..tools import Tool
from . import http, replies
from .sdk import SDKClient

PROVIDER = "the OpenAI-compatible server"
_RESERVED = frozenset({"model", "messages", "tools", "stream", "n"})


class OpenAIModel(SDKClient[openai.AsyncOpenAI]):
    """A :class:`durableagent.Model` over ``AsyncOpenAI().chat.completions.create``.

    ``model`` is the model name; ``client`` an ``openai.AsyncOpenAI`` you configured yourself
    (then ``base_url`` and ``api_key`` are not used; give it ``max_retries=0`` so that the
    durable layer decides when to try again). Without one, a client is built with
    ``max_retries=0`` from ``base_url`` and ``api_key`` (else ``OPENAI_BASE_URL`` and
    ``OPENAI_API_KEY``). ``settings`` (``temperature``, ``max_completion_tokens``,
    ``timeout``, ...) go to every request.
    """

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        **settings: Any,
    ) -> None:
        self.model = model
        self.settings = settings
        self._base_url = base_url
        self._api_key = api_key
        self._hold(client, _RESERVED, settings)

    @property
    def output_limit(self) -> int | None:
        """The most tokens a reply may hold, when the settings bound it
        (``max_completion_tokens``, ``max_tokens``): what a budgeted run reserves for it."""
        for key in ("max_completion_tokens", "max_tokens"):
            value = self.settings.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    def _new_client(self) -> openai.AsyncOpenAI:
        try:
            return openai.AsyncOpenAI(base_url=self._base_url, api_key=self._api_key, max_retries=0)
        except openai.OpenAIError as e:
            raise ModelError(
                f"OpenAIModel cannot build its client ({e}); pass api_key= or set "
                "OPENAI_API_KEY (a local server that needs no key takes any text, e.g. "
                "api_key='none')"
            ) from None

    def request(self, messages: Sequence[Message], tools: Sequence[Tool]) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for this conversation."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [_message(m) for m in messages],
            **self.settings,
        }
        if tools:
            payload["tools"] = [_tool(t) for t in tools]
        return payload

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        """One chat completion. A failure raises ModelRetryError (it passes: rate limited,
        a server error, no connection; ``retry_after`` from the provider) or ModelError."""
        client = self.client
        payload = self.request(messages, tools)
        try:
            response = await client.chat.completions.create(**payload)
        except openai.APIStatusError as e:
            raise http.status_error(PROVIDER, e.status_code, e.response.headers, _detail(e)) from e
        except openai.APIConnectionError as e:
            raise http.connection_error(PROVIDER, str(client.base_url), str(e)) from e
        except json.JSONDecodeError as e:
            raise replies.malformed(PROVIDER, f"a body that is not JSON: {e}") from e
        except (openai.OpenAIError, TypeError) as e:  # the SDK refused to send it (settings, key)
            raise ModelError(
                f"{type(self).__name__} could not send the request ({e}); check its settings "
                "and credentials"
            ) from e
        return parse_reply(response)


def _detail(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(e.message)


def _message(m: Message) -> dict[str, Any]:
    """One of our messages as Chat Completions takes it (usage, model and response id stay
    in the journal)."""
    if m.role == "assistant" and m.tool_calls:
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [_call(c) for c in m.tool_calls],
        }
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content}
    return {"role": m.role, "content": m.content}


def _call(c: ToolCall) -> dict[str, Any]:
    arguments = json.dumps(c.arguments, ensure_ascii=False)
    return {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments}}


def _tool(t: Tool) -> dict[str, Any]:
    function: dict[str, Any] = {"name": t.name, "parameters": t.parameters}
    if t.description:
        function["description"] = t.description
    return {"type": "function", "function": function}


def parse_reply(response: Any) -> Message:
    """The assistant Message of a chat completion.

    ``response`` is typed Any on purpose: the SDK does not validate replies, so a malformed
    body arrives as a str, a list, or a ChatCompletion whose fields are None. Every field is
    checked here; what is not a reply raises ModelError (the step is not recorded)."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise replies.malformed(PROVIDER, f"no choices in {type(response).__name__}")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise replies.malformed(PROVIDER, "a choice without a message")
    finish = getattr(choice, "finish_reason", None)
    finish = finish if isinstance(finish, str) else None
    calls = tuple(
        _parse_call(c, i, cut_off=finish == "length")
        for i, c in enumerate(getattr(message, "tool_calls", None) or ())
    )
    content = getattr(message, "content", None)
    content = replies.clean(content) if isinstance(content, str) else ""
    refusal = getattr(message, "refusal", None)
    if not content and isinstance(refusal, str) and refusal:
        content = replies.clean(refusal)
        finish = "refusal"
    if not content and not calls:
        content = replies.no_text(finish)
    u = getattr(response, "usage", None)
    return Message(
        "assistant",
        content,
        tool_calls=calls,
        usage=replies.usage(
            getattr(u, "prompt_tokens", None), getattr(u, "completion_tokens", None)
        ),
        model=replies.text_or_none(getattr(response, "model", None)),
        response_id=replies.text_or_none(getattr(response, "id", None)),
    )


def _parse_call(c: Any, index: int, *, cut_off: bool) -> ToolCall:
    call_id = getattr(c, "id", None)
    function = getattr(c, "function", None)
    if function is None:  # a custom (free-text) tool call: our tools take JSON arguments
        name = getattr(getattr(c, "custom", None), "name", None)
        kind = getattr(c, "type", None)
        return replies.tool_call(
            call_id, name, {}, f"a {kind or 'non-function'} tool call is not supported", index
        )
    arguments, error = replies.parse_arguments(
        getattr(function, "arguments", None), cut_off=cut_off
    )
    return replies.tool_call(call_id, getattr(function, "name", None), arguments, error, index)
