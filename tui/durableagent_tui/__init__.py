"""The Textual supervisor for durableagent stores (``agentrun tui``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["run_tui"]


def run_tui(root: Path, *, read_only: bool = False, poll: bool = False) -> int:
    """Run the supervisor on the store at ``root`` until the user quits; the exit code."""
    from .app import SupervisorApp

    result = SupervisorApp(Path(root), read_only=read_only, poll=poll).run()
    return int(result or 0)
