"""The Textual supervisor for durableagent stores (``agentrun tui``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from durableagent import Store

__all__ = ["run_tui"]


def run_tui(
    store: Store | str | os.PathLike[str], *, read_only: bool = False, poll: bool = False
) -> int:
    """Run the supervisor on ``store`` (a Store, or a directory) until the user quits; the
    exit code."""
    from .app import SupervisorApp

    result = SupervisorApp(store, read_only=read_only, poll=poll).run()
    return int(result or 0)
