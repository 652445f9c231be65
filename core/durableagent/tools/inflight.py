"""The calls this process is running in threads, per run.

A thread cannot be stopped: a sync tool's call that outlives the attempt that made it (a read
cancelled by a pause or a cancel, an attempt cancelled) goes on until it returns.
A worker must not start the run again meanwhile, or it would hold two attempts of one run
(the old call still acting for an epoch that is over). The thread itself counts here, from
the moment it starts the call to the moment it returns, so the count is the truth however
its attempt ended; ``watch`` is told each time a run's last call ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_running: dict[str, int] = {}
_watchers: list[Callable[[str], None]] = []


def calls_in_flight(run_id: str) -> int:
    """How many calls of ``run_id`` run in this process's threads now."""
    with _lock:
        return _running.get(run_id, 0)


@contextmanager
def in_flight(run_id: str) -> Iterator[None]:
    """Count the block as a call of ``run_id`` in flight ("" counts nothing)."""
    if not run_id:
        yield
        return
    with _lock:
        _running[run_id] = _running.get(run_id, 0) + 1
    try:
        yield
    finally:
        with _lock:
            left = _running[run_id] - 1
            if left:
                _running[run_id] = left
            else:
                del _running[run_id]
            watchers = list(_watchers) if not left else []
        for w in watchers:
            w(run_id)


@contextmanager
def watch(ended: Callable[[str], None]) -> Iterator[None]:
    """Call ``ended(run_id)`` (from the call's thread) while the block runs, each time the
    last call in flight of a run ends."""
    with _lock:
        _watchers.append(ended)
    try:
        yield
    finally:
        with _lock:
            _watchers.remove(ended)
