"""Journal text for the TUI: each record's one line is the core's (``durableagent.describe``,
as ``agentrun show`` prints it), shown as plain ``str`` (for ``Text``); what a run waits on,
and JSON made readable for the detail pane."""

from __future__ import annotations

import json
from typing import Any

from durableagent import RunStatus, RunView
from durableagent.describe import as_json, call_text, one_line, record_line, signal_text

summary = record_line


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


__all__ = ["as_json", "call_text", "one_line", "pretty", "signal_text", "summary", "waiting_text"]
