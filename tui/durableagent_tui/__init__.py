"""The Textual supervisor for durableagent stores (``agentrun tui``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from durableagent import Store

__all__ = ["run_tui"]


def run_tui(
    store: Store | str | os.PathLike[str],
    *,
    read_only: bool = False,
    poll: bool = False,
    hints: Mapping[str, str] | None = None,
) -> int:
    """Run the supervisor on ``store`` (a Store, or a directory) until the user quits; the
    exit code. ``hints`` maps a tool name to where a human should check whether its write
    happened (the reconcile dialog shows it; e.g. built from the agent's ``Tool.hint``)."""
    from .app import SupervisorApp

    result = SupervisorApp(store, read_only=read_only, poll=poll, hints=hints).run()
    return int(result or 0)
