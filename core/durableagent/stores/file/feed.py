"""The FileStore's change feed: a file watch (watchfiles) on the store's root, each changed
file mapped to its run. A watch can miss a change (one made while it was being set up, an
overflowed queue), so the feed also names every run once the watch is up and at least every
``rescan`` seconds; whoever reads it looks at the store for what changed."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from ...ids import valid_run_id
from .failures import WORKER_DIR
from .leases import LEASES_DIR
from .logs import ATTEMPTS_DIR


async def change_feed(
    root: Path, run_ids: Callable[[], list[str]], *, rescan: float
) -> AsyncIterator[set[str]]:
    """Sets of run ids whose journal, lease, attempts or failure count changed under
    ``root``, and every run (``run_ids()``) at least every ``rescan`` seconds and once the
    watch is up (a change made while it was being set up makes no event)."""
    from watchfiles import awatch

    root = root.resolve()
    settled = False
    last_full = time.monotonic()
    async for batch in awatch(
        root,
        watch_filter=lambda _change, path: run_of_path(root, path) is not None,
        debounce=50,
        step=25,
        rust_timeout=500,
        yield_on_timeout=True,
        recursive=True,
        ignore_permission_denied=True,
    ):
        ids = {rid for _, path in batch if (rid := run_of_path(root, path))}
        now = time.monotonic()
        if not settled or now - last_full >= rescan:
            settled, last_full = True, now
            ids |= set(await asyncio.to_thread(run_ids))
        if ids:
            yield ids


# The per-run files of a store, by folder (the journal sits in the root itself).
_RUN_FILES = {LEASES_DIR: ".lock", ATTEMPTS_DIR: ".jsonl", WORKER_DIR: ".json"}


def run_of_path(root: Path, path: str | os.PathLike[str]) -> str | None:
    """The run a file of the store at ``root`` belongs to: its journal, lease, attempts or
    failure count; None for anything else (temp files and the summaries index included).
    ``root`` must be resolved (absolute), as the paths a file watcher reports are."""
    p = Path(path)
    name, parent = p.name, p.parent
    if name.startswith("."):
        return None
    if parent == root:
        suffix = ".jsonl"
    elif parent.parent == root and parent.name in _RUN_FILES:
        suffix = _RUN_FILES[parent.name]
    else:
        return None
    run_id = name[: -len(suffix)] if name.endswith(suffix) else ""
    return run_id if valid_run_id(run_id) else None
