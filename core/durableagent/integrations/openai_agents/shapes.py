"""What the journal holds for an OpenAI Agents SDK agent's steps, and how it goes back to the SDK.

A model step's ``step.completed`` keeps the assistant ``Message`` keys every reader of the
journal knows (``content``, ``tool_calls``, ``usage``, ``model``, ``response_id``), adds
``"agent"`` (the name of the agent whose request it was: the active agent is part of the step)
and ``"openai_agents"``: the SDK's ``ModelResponse`` as the SDK's own types dump it (its
output items are the ``openai`` package's Responses models), which is what a replay gives back
to the runner. A tool step's keeps the ``Result`` keys (``content``, ``is_error``) and adds
``"openai_agents"``: ``{"output": ...}``, what the tool returned, or ``{"handoff": NAME}`` for a
handoff. A step whose result a human gave (``reconcile --done``) has no ``"openai_agents"``: its
text goes back to the runner as the tool's return.
"""

from __future__ import annotations

import json
from typing import Any

from agents.items import ItemHelpers, ModelResponse
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from ...messages import ToolCall

KEY = "openai_agents"
RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)


def reply_of(response: ModelResponse, agent: str) -> dict[str, Any]:
    """The model step's record for ``response``, a request of the agent named ``agent``."""
    payload = RESPONSE.dump_python(response, mode="json")
    calls = [_call(item) for item in response.output if isinstance(item, ResponseFunctionToolCall)]
    text = "".join(
        ItemHelpers.extract_text(item) or ""
        for item in response.output
        if isinstance(item, ResponseOutputMessage)
    )
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        out["tool_calls"] = calls
    usage = response.usage
    out["usage"] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    model, response_id = _provider(response)
    if model:
        out["model"] = model
    if response_id:
        out["response_id"] = response_id
    out["agent"] = agent
    out[KEY] = payload
    return out


def _provider(response: ModelResponse) -> tuple[str, str]:
    """The model's name and the provider's response id, where the SDK keeps them."""
    model, response_id = "", response.response_id or ""
    for item in response.output:
        data = getattr(item, "provider_data", None) or {}
        model = model or str(data.get("model") or "")
        response_id = response_id or str(data.get("response_id") or "")
    return model, response_id


def _call(item: ResponseFunctionToolCall) -> dict[str, Any]:
    """A function call as the journal's ``ToolCall`` dict; arguments that are not a JSON object
    make an error the call is refused with."""
    try:
        arguments = json.loads(item.arguments or "{}")
    except ValueError:
        shown = item.arguments[:200]
        return ToolCall(
            item.call_id, item.name, {}, f"arguments are not valid JSON: {shown}"
        ).to_dict()
    if not isinstance(arguments, dict):
        return ToolCall(item.call_id, item.name, {}, "arguments are not a JSON object").to_dict()
    return ToolCall(item.call_id, item.name, arguments).to_dict()


def response_of(recorded: Any) -> ModelResponse:
    """The ``ModelResponse`` a replay gives back to the runner for a recorded model step."""
    if not isinstance(recorded, dict) or KEY not in recorded:
        raise ValueError("a model step without its Agents SDK response cannot be replayed")
    return RESPONSE.validate_python(recorded[KEY])


def result_of(output: Any, *, failed: bool) -> dict[str, Any]:
    """A tool step's record for what ``on_invoke_tool`` returned; ``failed``: the SDK turned
    the tool's exception into that text (a read's: the model reads it and goes on)."""
    value = to_jsonable_python(output, fallback=str)
    return {"content": text(value), "is_error": failed, KEY: {"output": value}}


def handoff_of(agent: str) -> dict[str, Any]:
    """A handoff step's record: the SDK's transfer message, and whom it handed off to."""
    return {"content": json.dumps({"assistant": agent}), "is_error": False, KEY: {"handoff": agent}}


def output_of(recorded: Any) -> Any:
    """What the runner gets for a recorded tool step: the tool's output, or, for a result a
    human gave (a reconcile) or a refusal the journal made, that text."""
    if isinstance(recorded, dict) and isinstance(recorded.get(KEY), dict):
        held = recorded[KEY]
        if "output" in held:
            return held["output"]
    return recorded.get("content", "") if isinstance(recorded, dict) else ""


def handed_to(recorded: Any) -> str | None:
    """The agent a recorded handoff step handed off to (None: a reconciled or refused one)."""
    if isinstance(recorded, dict) and isinstance(recorded.get(KEY), dict):
        name = recorded[KEY].get("handoff")
        return name if isinstance(name, str) else None
    return None


def answer_text(output: Any) -> str:
    """The run's answer as the journal records it: a str as it is, a structured output as
    JSON."""
    if isinstance(output, str):
        return output
    return json.dumps(to_jsonable_python(output, fallback=str))


def text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
