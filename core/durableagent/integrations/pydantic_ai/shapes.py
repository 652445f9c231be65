"""What the journal holds for a Pydantic AI agent's steps, and how it goes back to Pydantic AI.

A model step's ``step.completed`` keeps the assistant ``Message`` keys every reader of the
journal knows (``content``, ``tool_calls``, ``usage``, ``model``, ``response_id``) and adds
``"pydantic_ai"``: the ``ModelResponse`` as Pydantic AI's own type adapter dumps it (its
``JSON_CODEC``), which is what a replay gives back to the agent. A tool step's keeps the
``Result`` keys (``content``, ``is_error``) and adds ``"pydantic_ai"``: the tool call's outcome
as Pydantic AI journals one (``CallToolResult``), and ``"usage"`` when the call spent tokens of
the run (a nested agent's). A step whose result a human gave (``reconcile --done``) has no
``"pydantic_ai"``: its text goes back to the agent as the tool's return.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.durable_exec import JSON_CODEC, CallToolResult
from pydantic_ai.messages import ModelResponse
from pydantic_core import to_jsonable_python

from ...messages import ToolCall

KEY = "pydantic_ai"


def reply_of(payload: Any, output_tools: frozenset[str]) -> dict[str, Any]:
    """The model step's record for a response ``payload`` (the JSON the engine's codec made):
    the assistant message's keys and the payload itself. Calls of an output tool (a structured
    ``output_type``'s) end the run; they are never tool steps, so they are not among
    ``tool_calls``."""
    response: ModelResponse = JSON_CODEC.load(ModelResponse, payload)
    calls = [
        _call(p.tool_call_id, p.tool_name, p.args_as_dict())
        for p in response.tool_calls
        if p.tool_name not in output_tools
    ]
    out: dict[str, Any] = {"role": "assistant", "content": response.text or ""}
    if calls:
        out["tool_calls"] = calls
    usage = response.usage
    out["usage"] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if response.model_name:
        out["model"] = response.model_name
    if response.provider_response_id:
        out["response_id"] = response.provider_response_id
    out[KEY] = payload
    return out


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call as the journal's ``ToolCall`` dict; arguments that were not JSON (Pydantic AI
    keeps them under ``INVALID_JSON``) make an error the call is refused with."""
    if set(arguments) == {"INVALID_JSON"}:
        shown = str(arguments["INVALID_JSON"])[:200]
        return ToolCall(call_id, name, {}, f"arguments are not valid JSON: {shown}").to_dict()
    return ToolCall(call_id, name, arguments).to_dict()


def response_of(recorded: Any) -> Any:
    """The payload a replay gives back to Pydantic AI for a recorded model step."""
    if not isinstance(recorded, dict) or KEY not in recorded:
        raise ValueError("a model step without its Pydantic AI response cannot be replayed")
    return recorded[KEY]


def result_of(payload: Any, usage: dict[str, int] | None) -> dict[str, Any]:
    """A tool step's record for the outcome ``payload`` of a call (``CallToolResult`` as JSON):
    what the model will read as ``content``, an error for a retry or a failure, the payload."""
    kind = payload.get("kind") if isinstance(payload, dict) else None
    if kind in ("tool_return", "tool_content_result"):
        content, is_error = _text(payload.get("result")), False
    elif kind in ("model_retry", "tool_failed", "run_cancelled"):
        content, is_error = str(payload.get("message", "")), True
    elif kind == "validation_error":
        content, is_error = _text(payload.get("errors")), True
    else:
        content, is_error = _text(payload), True
    out: dict[str, Any] = {"content": content, "is_error": is_error, KEY: payload}
    if usage:
        out["usage"] = usage
    return out


def asks_a_human(payload: Any) -> str | None:
    """The control flow a tool raised from inside its body that asks for someone outside the
    run (``ApprovalRequired``, ``CallDeferred``), by name; None for any other outcome."""
    kind = payload.get("kind") if isinstance(payload, dict) else None
    return {"approval_required": "ApprovalRequired", "call_deferred": "CallDeferred"}.get(
        kind or ""
    )


def outcome_of(recorded: Any) -> Any:
    """The payload Pydantic AI gets for a recorded tool step: its own, or, for a result a human
    gave (a reconcile) or a refusal the journal made, that text as the tool's return."""
    if isinstance(recorded, dict) and KEY in recorded:
        return recorded[KEY]
    content = recorded.get("content", "") if isinstance(recorded, dict) else ""
    payload = {"kind": "tool_return", "result": content}
    # Through Pydantic AI's own type first: a change of its journal format fails here, loudly.
    return JSON_CODEC.dump(CallToolResult, JSON_CODEC.load(CallToolResult, payload))


def answer_text(output: Any) -> str:
    """The run's answer as the journal records it: a str as it is, any structured output as
    JSON."""
    if isinstance(output, str):
        return output
    return json.dumps(to_jsonable_python(output), sort_keys=False)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(to_jsonable_python(value))
    except (TypeError, ValueError):
        return str(value)
