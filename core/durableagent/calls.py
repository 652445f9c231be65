"""The tool calls a run's model steps requested, and their markers: what an approval or a
deny binds to. A call is the one a recorded model reply asked for (a model step's first
result: the one that counts); its marker is ``STEP#DIGEST`` of its exact arguments."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .messages import Message, ToolCall
from .record import STEP_COMPLETED, Record
from .steps import model_turn, parse_step, tool_step


def marker_for(step: str, arguments: dict[str, Any]) -> str:
    """``step#digest``: an approval binds to this step with exactly these arguments."""
    canon = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    return f"{step}#{hashlib.sha256(canon.encode()).hexdigest()[:12]}"


def is_marker(text: str) -> bool:
    """Whether ``text`` has a marker's shape: a tool step, ``#``, a digest (whether it names
    a call of some run is for that run's records to say)."""
    step, sep, digest = text.rpartition("#")
    parsed = parse_step(step) if sep else None
    return parsed is not None and not parsed.is_model and bool(digest)


def marker_step(marker: str) -> str:
    """The step a marker names (everything before the last ``#``)."""
    return marker.rpartition("#")[0]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call a model step requested: its step, the call, and its marker (None when
    its arguments are not an object: nothing can approve it)."""

    step: str
    call: ToolCall
    marker: str | None

    @property
    def tool(self) -> str:
        return self.call.name

    @property
    def arguments(self) -> Any:
        return self.call.arguments


def replies(records: Iterable[Record]) -> dict[int, Message]:
    """``{turn: the model's reply}`` for every recorded model step (its first result)."""
    out: dict[int, Message] = {}
    for r in records:
        if r.type != STEP_COMPLETED:
            continue
        turn = model_turn(r.step)
        if turn is None or turn in out:
            continue
        try:
            out[turn] = Message.from_dict(r.data)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    return out


def calls_of(turn: int, reply: Message) -> list[Call]:
    """The calls one model reply asked for, in order."""
    out = []
    for i, c in enumerate(reply.tool_calls):
        step = tool_step(turn, i, c.name)
        marker = marker_for(step, c.arguments) if isinstance(c.arguments, dict) else None
        out.append(Call(step, c, marker))
    return out


def requested_calls(records: Iterable[Record]) -> dict[str, Call]:
    """Every call a recorded model step asked for, by its step name, in turn order."""
    out: dict[str, Call] = {}
    for turn, reply in sorted(replies(records).items()):
        for c in calls_of(turn, reply):
            out[c.step] = c
    return out


def requested_call(records: Iterable[Record], step: str) -> Call | None:
    """The call ``step`` names, if a recorded model step asked for it (by that name, at that
    index: the tool's name is part of the step's)."""
    parsed = parse_step(step)
    if parsed is None or parsed.index is None:
        return None
    reply = replies(records).get(parsed.turn)
    if reply is None or parsed.index >= len(reply.tool_calls):
        return None
    call = calls_of(parsed.turn, reply)[parsed.index]
    return call if call.step == step else None


def requested_markers(records: Iterable[Record]) -> dict[str, str]:
    """``{tool step: marker}`` for every call a recorded model step asked for."""
    return {s: c.marker for s, c in requested_calls(records).items() if c.marker is not None}
