"""Retries: the backoff between a failed run's attempts, and the failure count every worker on
a store shares (``Store.write_failures``), so that they share one budget of ``max_attempts``.
The count starts again from zero when a human acts on the run (a new signal) and is removed by
``agentrun retry RUN`` (:func:`reset_attempts`); either makes an exhausted failed run eligible
again."""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass

from ..errors import DurableAgentError
from ..stores import Store

# A worker's defaults (``agentrun worker --max-attempts --backoff --max-backoff``): a supervisor
# that cannot know how the workers were started says when the next try is due under these.
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 60.0


def backoff_delay(
    failures: int, base: float, cap: float, retry_after: float | None = None
) -> float:
    """Seconds to wait before the next attempt after ``failures`` failed ones (1, 2, 3, ...):
    ``base``, ``2*base``, ``4*base``, ... never more than ``cap``, and never less than the
    ``retry_after`` the last failure asked for (a provider's Retry-After outranks our cap)."""
    if failures <= 0:
        return 0.0
    return float(max(min(cap, base * 2 ** (failures - 1)), retry_after or 0.0))


def retry_after_of(error: BaseException) -> float | None:
    """How long the failure asked us to wait: its ``retry_after`` attribute (set by the model
    adapters from a provider's Retry-After), when that is a finite number of seconds."""
    value = getattr(error, "retry_after", None)
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e9:
        return float(value)
    return None


# -- the shared failure count ---------------------------------------------------------------


@dataclass(frozen=True)
class Attempts:
    """Failed attempts of one run since a human last acted on it (``signals`` is the number of
    signal records when the count was made; a new signal makes the count stale)."""

    failures: int
    signals: int
    at: float
    error: str = ""
    retry_after: float | None = None  # what the last failure asked us to wait, seconds

    def stale(self, signals: int) -> bool:
        """A human acted on the run since the count was made (a run with ``signals`` signal
        records now): its failures no longer count, and workers count afresh."""
        return self.signals != signals


def read_attempts(store: Store, run_id: str) -> Attempts | None:
    """The recorded failure count of ``run_id``, or None when there is none (or it is unreadable:
    the count is advisory, a lost one only means a few more retries)."""
    d = store.read_failures(run_id)
    if d is None:
        return None
    try:
        wait = d.get("retry_after")
        return Attempts(
            int(d["failures"]),
            int(d["signals"]),
            float(d["at"]),
            str(d["error"]),
            None if wait is None else float(wait),
        )
    except (ValueError, KeyError, TypeError):
        return None


def reset_attempts(store: Store, run_id: str) -> bool:
    """Forget the failures of ``run_id`` so workers retry it (``agentrun retry``). True when
    there was a count to forget."""
    return store.clear_failures(run_id)


def note_failure(
    store: Store, run_id: str, error: BaseException, *, max_attempts: int | None = None
) -> int:
    """Count one more failed attempt of ``run_id`` (shared by every worker on the store) and
    return the count. With ``max_attempts``, the count says ``exhausted`` when this was the
    last allowed try, so any process (a notifier) can tell the workers gave up. Raises
    StoreError when the count cannot be written."""
    signals = _signals(store, run_id)
    failures = _failures_now(read_attempts(store, run_id), signals) + 1
    text = f"{type(error).__name__}: {error}"
    attempts = Attempts(failures, signals, time.time(), text, retry_after_of(error))
    record = dict(attempts.__dict__)
    if max_attempts is not None and failures >= max_attempts:
        record["exhausted"] = True
    store.write_failures(run_id, record)
    return failures


def mark_exhausted(store: Store, run_id: str, signals: int) -> None:
    """Say in the run's failure count that the workers gave up on it, when a worker leaves
    it failed on a count that does not say so yet (counted by a worker allowed more tries,
    or by a program that gave no ``max_attempts``): a notifier tells of a failed run only
    then. A count a human has signalled since is left alone (it no longer counts); one
    that cannot be written is only a notice not sent."""
    d = store.read_failures(run_id)
    if not d or d.get("exhausted") or d.get("signals") != signals:
        return
    with suppress(DurableAgentError, OSError):
        store.write_failures(run_id, {**d, "exhausted": True})


def _signals(store: Store, run_id: str) -> int:
    summary = store.summary(run_id)
    return summary.signals if summary is not None else 0


def _failures_now(attempts: Attempts | None, signals: int) -> int:
    """Failures that still count: none once a human has signalled since they were counted
    (the one rule the workers and every screen apply: see Attempts.stale)."""
    if attempts is None or attempts.stale(signals):
        return 0
    return attempts.failures
