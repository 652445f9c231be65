"""Turning a provider's reply into an assistant Message that can always be recorded.

Nothing in a reply is trusted: arguments that are not a JSON object become the call's
``error`` (the model reads it as the call's result), a reply with no text and no calls gets a
marker saying why, and text that JSON cannot carry (a lone surrogate) is repaired, so that a
strange reply never stops a run from recording its model step.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ModelError
from ..messages import ToolCall

NO_TEXT = {
    "length": "the reply hit the output token limit before any text",
    "max_tokens": "the reply hit max_tokens before any text",
    "content_filter": "the provider's content filter withheld the reply",
    "refusal": "the model refused to answer",
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_arguments(raw: Any, *, cut_off: bool = False) -> tuple[dict[str, Any], str | None]:
    """A call's arguments from their JSON text: ``(arguments, None)``, or ``({}, error)`` with
    an error the model can act on. ``cut_off``: the reply stopped at the token limit, which is
    the likely reason."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None  # some servers send "" for a call without arguments
    if not isinstance(raw, str):
        return checked_arguments(raw)
    why = " (the reply was cut off at the token limit)" if cut_off else ""
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except ValueError as e:
        return {}, f"arguments are not valid JSON{why}: {e}; they began {clean(raw[:200])!r}"
    return checked_arguments(value)


def checked_arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """Arguments a provider already parsed: a JSON object, or ``({}, error)``."""
    if not isinstance(value, dict):
        kind = "array" if isinstance(value, list) else type(value).__name__
        return {}, f"arguments must be a JSON object, got {kind}"
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode()
    except (TypeError, ValueError) as e:  # NaN, a lone surrogate: the journal cannot hold it
        return {}, f"arguments are not valid JSON: {e}"
    return value, None


def tool_call(
    call_id: Any, name: Any, arguments: dict[str, Any], error: str | None, index: int
) -> ToolCall:
    """A ToolCall with a usable id and name whatever the provider sent."""
    cid = clean(call_id) if isinstance(call_id, str) and call_id else f"call_{index}"
    if not isinstance(name, str) or not name:
        return ToolCall(cid, "?", {}, error or "the call names no tool")
    return ToolCall(cid, clean(name), arguments, error)


def no_text(reason: str | None) -> str:
    """The content of a reply that has neither text nor tool calls: a marker saying why."""
    why = NO_TEXT.get(reason or "", "the model returned an empty reply")
    return f"[no answer: {why} (stop reason: {clean(reason or 'none')})]"


def usage(input_tokens: Any, output_tokens: Any) -> dict[str, int] | None:
    """``{"input_tokens", "output_tokens"}`` when the provider reported both as counts."""
    counts = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()):
        return counts
    return None


def text_or_none(value: Any) -> str | None:
    return clean(value) if isinstance(value, str) and value else None


def clean(text: Any) -> str:
    """Text as a journal line can hold it (lone surrogates become U+FFFD)."""
    s = str(text)
    try:
        s.encode()
    except UnicodeEncodeError:
        s = s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return s


def malformed(provider: str, what: str) -> ModelError:
    """A reply that is not one (a proxy's HTML page, a truncated body): the step is not
    recorded and the next attempt asks again."""
    return ModelError(
        f"{provider} sent something that is not a reply ({what}); the model step will be "
        "tried again: if this repeats, check base_url points at the provider's API"
    )
