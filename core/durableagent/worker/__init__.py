"""The worker: resumes every ready run of a store and retries failed ones with bounded
backoff (``serve.py``), counting failures in the store for all its workers (``retry.py``), and
holding an agent's connections open while it serves (``holder.py``), beating in the store's
registry (``heartbeat.py``), denying lapsed approvals (``lapses.py``), and serving from a
background thread (``thread.py``)."""

from __future__ import annotations

from .retry import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BACKOFF,
    Attempts,
    backoff_delay,
    note_failure,
    read_attempts,
    reset_attempts,
    retry_after_of,
)
from .serve import EXIT_STEPS_ABANDONED, Agent, Worker
from .thread import WorkerThread

__all__ = [
    "DEFAULT_BACKOFF",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_BACKOFF",
    "EXIT_STEPS_ABANDONED",
    "Agent",
    "Attempts",
    "Worker",
    "WorkerThread",
    "backoff_delay",
    "note_failure",
    "read_attempts",
    "reset_attempts",
    "retry_after_of",
]
