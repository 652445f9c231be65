"""The conversation's data: messages, tool calls, step kinds and step names."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

ROLES = frozenset({"system", "user", "assistant", "tool"})


class StepKind(enum.StrEnum):
    """What a journaled step calls: the model or a tool."""

    MODEL = "model"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call an assistant message asks for.

    ``error`` is set when the model's call could not be taken as asked (its arguments were not
    a JSON object, or the reply was cut off inside it): the loop records it as the call's error
    result, without calling the tool, so the model reads it on its next turn."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.error is not None:
            d["error"] = self.error
        return d

    @classmethod
    def from_dict(cls, d: Any) -> ToolCall:
        if not isinstance(d, dict):
            raise ValueError(f"a tool call must be an object, got {type(d).__name__}")
        args = d.get("arguments", {})
        if not isinstance(args, dict):
            raise ValueError("a tool call's arguments must be an object")
        error = d.get("error")
        return cls(
            id=str(d.get("id", "")),
            name=str(d["name"]),
            arguments=args,
            error=error if isinstance(error, str) else None,
        )


@dataclass(frozen=True, slots=True)
class Message:
    """A chat message. ``tool_calls`` on assistant messages, ``tool_call_id``/``name`` on
    tool results.

    ``usage`` (``{"input_tokens": n, "output_tokens": n}``), ``model`` (as the provider names
    it) and ``response_id`` describe how a model produced an assistant message. They are
    recorded with the message when set, for the humans reading the journal; adapters never send
    them back to a provider."""

    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    usage: dict[str, int] | None = None
    model: str | None = None
    response_id: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown message role {self.role!r}; use one of {sorted(ROLES)}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        if self.usage is not None:
            d["usage"] = dict(self.usage)
        if self.model is not None:
            d["model"] = self.model
        if self.response_id is not None:
            d["response_id"] = self.response_id
        return d

    @classmethod
    def from_dict(cls, d: Any) -> Message:
        if not isinstance(d, dict) or "role" not in d:
            raise ValueError("a message must be an object with a role")
        content = d.get("content") or ""
        if not isinstance(content, str):
            raise ValueError("a message's content must be a string")
        return cls(
            role=d["role"],
            content=content,
            tool_calls=tuple(ToolCall.from_dict(c) for c in d.get("tool_calls") or ()),
            tool_call_id=d.get("tool_call_id"),
            name=d.get("name"),
            usage=_usage(d.get("usage")),
            model=_text_or_none(d.get("model")),
            response_id=_text_or_none(d.get("response_id")),
        )


def _usage(value: Any) -> dict[str, int] | None:
    """Token counts as recorded; anything else (journal text is untrusted) reads as none, so
    an odd usage never makes a message unreadable."""
    if not isinstance(value, dict):
        return None
    counts = {
        k: v
        for k, v in value.items()
        if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
    }
    return counts or None


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
