"""AnthropicModel: Messages with tool use over the official ``anthropic`` SDK (extra
``anthropic``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anthropic

from ..errors import ModelError
from ..messages import Message, ToolCall
from ..tools import Tool
from . import http, replies
from .sdk import SDKClient

PROVIDER = "the Anthropic API"
_RESERVED = frozenset({"model", "messages", "tools", "system", "max_tokens", "stream"})


class AnthropicModel(SDKClient[anthropic.AsyncAnthropic]):
    """A :class:`durableagent.Model` over ``AsyncAnthropic().messages.create``.

    ``client`` is an ``anthropic.AsyncAnthropic`` you configured yourself (give it
    ``max_retries=0``); without one, a client is built with ``max_retries=0`` from
    ``base_url`` and ``api_key`` (else ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``).
    ``max_tokens`` bounds each reply; ``settings`` (``stop_sequences``, ``metadata``,
    ``timeout``, ``extra_body``, ...) go to every request.

    The system prompt is sent as ``system``; tool results go back as ``tool_result`` blocks,
    the results of one turn merged into one user turn as the API requires.
    """

    def __init__(
        self,
        model: str,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 4096,
        **settings: Any,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.settings = settings
        self._base_url = base_url
        self._api_key = api_key
        self._hold(client, _RESERVED, settings)

    @property
    def output_limit(self) -> int:
        """The most tokens a reply may hold (what a budgeted run reserves for it)."""
        return self.max_tokens

    def _new_client(self) -> anthropic.AsyncAnthropic:
        try:
            return anthropic.AsyncAnthropic(
                base_url=self._base_url, api_key=self._api_key, max_retries=0
            )
        except anthropic.AnthropicError as e:
            raise ModelError(
                f"AnthropicModel cannot build its client ({e}); pass api_key= or set "
                "ANTHROPIC_API_KEY"
            ) from None

    def request(self, messages: Sequence[Message], tools: Sequence[Tool]) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for this conversation."""
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": _turns(messages),
            **self.settings,
        }
        if system:
            payload["system"] = system
        if tools:
            payload["tools"] = [_tool(t) for t in tools]
        return payload

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        """One Messages call. A failure raises ModelRetryError (it passes: rate limited,
        overloaded, a server error, no connection; ``retry_after`` from the provider) or
        ModelError."""
        client = self.client
        payload = self.request(messages, tools)
        try:
            response = await client.messages.create(**payload)
        except anthropic.APIStatusError as e:
            detail = getattr(e, "api_message", None) or str(e.message)
            raise http.status_error(PROVIDER, e.status_code, e.response.headers, detail) from e
        except anthropic.APIConnectionError as e:
            raise http.connection_error(PROVIDER, str(client.base_url), str(e)) from e
        except json.JSONDecodeError as e:
            raise replies.malformed(PROVIDER, f"a body that is not JSON: {e}") from e
        except (
            anthropic.AnthropicError,
            TypeError,
        ) as e:  # the SDK refused to send it (settings, key)
            raise ModelError(
                f"{type(self).__name__} could not send the request ({e}); check its settings "
                "and credentials"
            ) from e
        return parse_reply(response)


def _turns(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Our messages as Messages API turns: no system turns, content as blocks, and
    consecutive messages of one side (tool results, then perhaps user text) merged into one
    turn, since turns must alternate."""
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or ""}
        if m.content:
            block["content"] = m.content
        return [block]
    blocks: list[dict[str, Any]] = []
    if m.content:  # the API refuses empty text blocks
        blocks.append({"type": "text", "text": m.content})
    for c in m.tool_calls:
        blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments})
    return blocks or [{"type": "text", "text": "(empty)"}]


def _tool(t: Tool) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": t.name, "input_schema": t.parameters}
    if t.description:
        spec["description"] = t.description
    return spec


def parse_reply(response: Any) -> Message:
    """The assistant Message of a Messages reply.

    ``response`` is typed Any on purpose: the SDK does not validate replies, so a malformed
    body arrives as a str, a list, or a Message whose fields are None. Every field is checked
    here; what is not a reply raises ModelError (the step is not recorded)."""
    content = getattr(response, "content", None)
    if not isinstance(content, list):
        raise replies.malformed(PROVIDER, f"no content blocks in {type(response).__name__}")
    stop = getattr(response, "stop_reason", None)
    stop = stop if isinstance(stop, str) else None
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text" and isinstance(getattr(block, "text", None), str):
            texts.append(replies.clean(block.text))
        elif kind == "tool_use":
            arguments, error = replies.checked_arguments(getattr(block, "input", None))
            calls.append(
                replies.tool_call(
                    getattr(block, "id", None),
                    getattr(block, "name", None),
                    arguments,
                    error,
                    len(calls),
                )
            )
    if stop == "max_tokens" and calls and calls[-1].error is None:
        # The API cuts a reply at max_tokens wherever it is: the last call may be partial.
        last = calls[-1]
        calls[-1] = ToolCall(
            last.id,
            last.name,
            {},
            "the reply was cut off at max_tokens inside this call, so its arguments may be "
            "incomplete; call it again",
        )
    text = "".join(texts)
    if not text and not calls:
        text = replies.no_text(stop)
    u = getattr(response, "usage", None)
    return Message(
        "assistant",
        text,
        tool_calls=tuple(calls),
        usage=replies.usage(getattr(u, "input_tokens", None), getattr(u, "output_tokens", None)),
        model=replies.text_or_none(getattr(response, "model", None)),
        response_id=replies.text_or_none(getattr(response, "id", None)),
    )
