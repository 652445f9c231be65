"""One-line summaries of journal records for the timeline.

Everything here comes from a journal, so it is returned as plain ``str`` (for ``Text``) and
read defensively: a hand-edited journal may hold any JSON in ``data``.
"""

from __future__ import annotations

import json
from typing import Any

from durableagent import Record, RunStatus, RunView
from durableagent.lineage import ForkedFrom

_LIMIT = 160


def one_line(value: Any, limit: int = _LIMIT) -> str:
    """``value`` squeezed onto one line and cut to ``limit`` characters."""
    s = value if isinstance(value, str) else _json(value)
    s = " ".join(s.split())
    if not s.isprintable():  # control characters shown escaped, never sent to the terminal
        s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def call_text(name: Any, arguments: Any) -> str:
    """``create_ticket(summary="billing")``: a tool call as it would be written."""
    if isinstance(arguments, dict):
        args = ", ".join(f"{k}={_json(v)}" for k, v in arguments.items())
    else:
        args = _json(arguments)
    return f"{name}({args})"


def summary(record: Record) -> str:
    """What the record says, in one line."""
    data = record.data if isinstance(record.data, dict) else {}
    t = record.type
    if t == "run.started":
        msgs = data.get("input") or []
        first = msgs[0] if isinstance(msgs, list) and msgs and isinstance(msgs[0], dict) else {}
        origin = ForkedFrom.from_dict(data.get("forked_from"))
        fork = f"fork of {origin.run} at {origin.step} · " if origin is not None else ""
        return one_line(f"{fork}input: {first.get('content', '')}")
    if t == "step.started":
        if record.kind == "model":
            return "model call"
        what = "write" if data.get("write") else "read"
        return f"{what} refused" if data.get("refused") is True else f"{what} started"
    if t == "step.completed":
        if record.kind == "model":
            calls = data.get("tool_calls") or []
            if isinstance(calls, list) and calls:
                asked = "; ".join(
                    call_text(c.get("name"), c.get("arguments"))
                    for c in calls
                    if isinstance(c, dict)
                )
                return one_line(f"asks {asked}")
            return one_line(f"answer: {data.get('content', '')}")
        prefix = "error" if data.get("is_error") else "result"
        return one_line(f"{prefix}: {data.get('content', '')}")
    if t == "signal":
        return one_line(signal_text(data))
    if t == "run.completed":
        msg = data.get("message")
        content = msg.get("content", "") if isinstance(msg, dict) else ""
        return one_line(f"answer: {content}")
    return one_line(data)


def signal_text(data: dict[str, Any]) -> str:
    """``approve tool/1/1/x by alice: looks fine`` or ``reconcile done "T-9" by bob``."""
    name = data.get("name")
    given = data.get("payload")
    payload: dict[str, Any] = given if isinstance(given, dict) else {}
    if name == "reconcile":
        what = f"reconcile {payload.get('outcome')}"
        if payload.get("outcome") == "done":
            what += f" {_json(payload.get('result'))}"
    else:
        what = f"{name} {str(payload.get('marker', '')).partition('#')[0]}"
    by = data.get("by")
    reason = data.get("reason")
    return what + (f" by {by}" if by else "") + (f": {reason}" if reason else "")


def waiting_text(view: RunView) -> str:
    """What the run waits on; a corrupt journal as ``line N: reason`` (the short form)."""
    if view.status == RunStatus.CORRUPT and view.error_line:
        return f"line {view.error_line}: {view.error_reason or view.error}"
    return view.waiting_on


def pretty(value: Any) -> str:
    """Indented JSON for the detail pane."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
