"""The Textual supervisor for durableagent stores (``agentrun tui``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["run_tui"]


def run_tui(
    root: Path,
    *,
    read_only: bool = False,
    poll: bool = False,
    hints: Mapping[str, str] | None = None,
) -> int:
    """Run the supervisor on the store at ``root`` until the user quits; the exit code.
    ``hints`` maps a tool name to where a human should check whether its write happened
    (the reconcile dialog shows it; e.g. built from the agent's ``Tool.hint``)."""
    from .app import SupervisorApp

    result = SupervisorApp(Path(root), read_only=read_only, poll=poll, hints=hints).run()
    return int(result or 0)
