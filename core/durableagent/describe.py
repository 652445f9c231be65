"""A journal record in words, one line: what ``agentrun show`` prints beside each record and
the TUI's timeline shows, from one definition.

Everything here comes from a journal, so it is read defensively (a hand-edited journal may
hold any JSON in ``data``) and made safe for a terminal: control characters are shown
escaped, never sent to it.
"""

from __future__ import annotations

import json
from typing import Any

from .lineage import ForkedFrom
from .messages import Message
from .record import RUN_COMPLETED, RUN_STARTED, SIGNAL, STEP_COMPLETED, STEP_STARTED, Record

LIMIT = 160  # characters of one line


def one_line(value: Any, limit: int = LIMIT) -> str:
    """``value`` squeezed onto one line and cut to ``limit`` characters."""
    s = value if isinstance(value, str) else as_json(value)
    s = " ".join(s.split())
    if not s.isprintable():
        s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def as_json(value: Any) -> str:
    """Compact JSON of ``value`` (its repr when it is not JSON)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def call_text(name: Any, arguments: Any) -> str:
    """``create_ticket(summary="billing")``: a tool call as it would be written."""
    if isinstance(arguments, dict):
        args = ", ".join(f"{k}={as_json(v)}" for k, v in arguments.items())
    else:
        args = as_json(arguments)
    return f"{name}({args})"


def record_line(record: Record) -> str:
    """What the record says, in one line."""
    data = record.data if isinstance(record.data, dict) else {}
    t = record.type
    if t == RUN_STARTED:
        msgs = data.get("input") or []
        first = msgs[0] if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) else {}
        origin = ForkedFrom.from_dict(data.get("forked_from"))
        fork = f"fork of {origin.run} at {origin.step} · " if origin is not None else ""
        return one_line(f"{fork}input: {first.get('content', '')}")
    if t == STEP_STARTED:
        return one_line(start_text(record.kind, data))
    if t == STEP_COMPLETED:
        if record.kind == "model":
            calls = data.get("tool_calls") or []
            if isinstance(calls, list) and calls:
                asked = "; ".join(
                    call_text(c.get("name"), c.get("arguments"))
                    for c in calls
                    if isinstance(c, dict)
                )
                return one_line(f"asks {asked}{usage_text(data)}")
            return one_line(f"answer: {data.get('content', '')}{usage_text(data)}")
        prefix = "error" if data.get("is_error") else "result"
        return one_line(f"{prefix}: {data.get('content', '')}")
    if t == SIGNAL:
        return one_line(signal_text(data))
    if t == RUN_COMPLETED:
        msg = data.get("message")
        content = msg.get("content", "") if isinstance(msg, dict) else ""
        return one_line(f"answer: {content}")
    return one_line(data)


def start_text(kind: str, data: dict[str, Any]) -> str:
    """``model call``, ``read started``, ``idempotent write started``, ``write refused`` ...,
    with where a tool's class came from when its code did not say."""
    if kind == "model":
        return "model call"
    what = "write" if data.get("write") is True else "read"
    if what == "write" and data.get("idempotent") is True:
        what = "idempotent write"
    text = f"{what} refused" if data.get("refused") is True else f"{what} started"
    source = data.get("classified_by")
    return text + (f" (class from {source})" if isinstance(source, str) and source else "")


def usage_text(data: dict[str, Any]) -> str:
    """`` [120 in, 13 out tokens]`` for a recorded reply that says what it used."""
    try:
        usage = Message.from_dict(data).usage
    except (ValueError, TypeError, KeyError, AttributeError):
        return ""
    if not usage:
        return ""
    return f" [{usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out tokens]"


def signal_text(data: dict[str, Any]) -> str:
    """``approve tool/1/1/x by alice: looks fine`` or ``reconcile done "T-9" by bob``."""
    name = data.get("name")
    given = data.get("payload")
    payload: dict[str, Any] = given if isinstance(given, dict) else {}
    if name == "reconcile":
        what = f"reconcile {payload.get('outcome')}"
        if payload.get("outcome") == "done":
            what += f" {as_json(payload.get('result'))}"
    elif name == "move":
        what = f"move to {payload.get('to')}"
    else:
        what = f"{name} {str(payload.get('marker', '')).partition('#')[0]}"
    by = data.get("by")
    reason = data.get("reason")
    return what + (f" by {by}" if by else "") + (f": {reason}" if reason else "")
