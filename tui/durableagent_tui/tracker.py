"""The store as the TUI knows it: every run's summary, and the one run being looked at whole.

Everything goes through the ``Store`` protocol (a FileStore or a PostgresStore, the TUI cannot
tell). The table comes from ``summaries()`` (one listing, no journal read per run) and from
``summary(run)`` for the runs a change notice names; only the followed run's records are
read, with ``load_since`` so that following it reads only what is new. Status always comes
from the core fold (the stores' summaries and ``view_run`` share it). Its methods do I/O and
are meant to run off the event loop: summaries and the followed run each under their own lock,
so a long rescan never holds up the timeline. A store that does not answer raises
StoreUnavailableError from any of them (never a run shown as corrupt): what is known stays
as last seen.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from durableagent import (
    Attempt,
    DurableAgentError,
    Record,
    RunStatus,
    RunView,
    Store,
    StoreError,
    StoreUnavailableError,
    Summary,
    open_store,
    view_run,
    view_store,
    with_late_write,
)
from durableagent.stores.protocol import LOST


@dataclass(frozen=True)
class Changes:
    """What a refresh found: new or changed summaries, runs that are gone, and runs whose
    worker was lost (its attempt ended without saying: killed) since the last look."""

    summaries: dict[str, Summary] = field(default_factory=dict)
    removed: frozenset[str] = frozenset()
    lost: dict[str, Attempt] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.summaries or self.removed)


@dataclass(frozen=True)
class Followed:
    """The run being looked at: its whole view and its attempts."""

    run_id: str
    view: RunView
    attempts: tuple[Attempt, ...] = ()


class StoreTracker:
    """Summaries of every run, and the records of one followed run.

    ``source`` is a Store, or a directory that becomes a FileStore once it exists (the TUI
    never creates a store)."""

    def __init__(self, source: Store | str | os.PathLike[str]) -> None:
        self._store: Store | None = None
        self._path: Path | None = None
        if isinstance(source, (str, os.PathLike)):
            self._path = Path(source)
        else:
            self._store = source
        self.known: dict[str, Summary] = {}
        self.running: set[str] = set()  # runs whose lease was held at the last look
        self.summaries_lock = threading.RLock()
        self.follow_lock = threading.Lock()
        self._records: list[Record] = []
        self._followed: str | None = None
        # run id -> the runs forked from it (oldest first); each value is replaced whole, so
        # the loop reads it without the lock
        self._forks: dict[str, tuple[str, ...]] = {}

    @property
    def store(self) -> Store | None:
        """The store, once it exists."""
        if self._store is None and self._path is not None and self._path.is_dir():
            try:
                self._store = open_store(self._path, create=False)
            except StoreError:
                return None  # a directory, not (yet) a store: nothing is written into it
        return self._store

    def close(self) -> None:
        """Close the store if the tracker opened it (a store passed in is its owner's)."""
        if self._path is not None and self._store is not None:
            self._store.close()

    # -- summaries ----------------------------------------------------------------------------

    def count(self) -> int | None:
        """How many runs the store holds (one listing), for the header while it loads."""
        store = self.store
        if store is None:
            return None
        try:
            return len(store.run_ids())
        except DurableAgentError:
            return None

    def scan(self) -> Changes:
        """Every run's summary (``summaries()``), diffed against what is known: the safety net
        for missed change notices, the first load, and the whole of polling mode."""
        with self.summaries_lock:
            store = self.store
            if store is None:
                gone = frozenset(self.known)
                self.known.clear()
                return Changes(removed=gone)
            fresh = {s.run_id: s for s in store.summaries()}
            gone = frozenset(self.known.keys() - fresh.keys())
            for rid in gone:
                del self.known[rid]
            return self._diff(store, fresh.values(), gone)

    def refresh(self, run_ids: list[str] | set[str]) -> Changes:
        """The summaries of the given runs (``summary(run)`` each)."""
        with self.summaries_lock:
            store = self.store
            if store is None:
                return Changes()
            fresh: list[Summary] = []
            gone: set[str] = set()
            for rid in run_ids:
                try:
                    s = store.summary(rid)
                except StoreUnavailableError:
                    raise
                except DurableAgentError:
                    continue  # an id the store refuses: nothing to show
                if s is not None:
                    fresh.append(s)
                elif self.known.pop(rid, None) is not None:
                    gone.add(rid)
            return self._diff(store, fresh, frozenset(gone))

    def probe(self) -> None:
        """Ask the store one small thing (a known run's summary): StoreUnavailableError when
        it does not answer. A change feed that lost its server says nothing; this does."""
        store = self.store
        if store is None:
            return
        rid = next(iter(self.known), None)
        if rid is None:
            store.run_ids()
        else:
            store.summary(rid)

    def recheck_leases(self) -> Changes:
        """The runs shown as running whose lease is gone: a worker that dies leaves no change
        notice behind."""
        with self.summaries_lock:
            store = self.store
            if store is None or not self.running:
                return Changes()
            dead = [rid for rid in list(self.running) if not store.is_leased(rid)]
            return self.refresh(dead) if dead else Changes()

    def _diff(self, store: Store, fresh: Iterable[Summary], gone: frozenset[str]) -> Changes:
        changed: dict[str, Summary] = {}
        lost: dict[str, Attempt] = {}
        known = self.known
        for s in fresh:
            old = known.get(s.run_id)
            if old == s:
                continue
            known[s.run_id] = s
            changed[s.run_id] = s
            if s.forked_from is not None and (old is None or old.forked_from != s.forked_from):
                self._note_fork(s)
            if s.leased:
                self.running.add(s.run_id)
            elif s.run_id in self.running:
                self.running.discard(s.run_id)
                last = _last_attempt(store, s.run_id)
                if last is not None and last.ended == LOST:
                    lost[s.run_id] = last
        self.running -= gone
        return Changes(changed, gone, lost)

    def forks(self, run_id: str) -> tuple[str, ...]:
        """The runs forked from ``run_id`` that the store still holds, oldest first (from the
        summaries: no journal is read)."""
        known = self.known
        return tuple(rid for rid in self._forks.get(run_id, ()) if rid in known)

    def _note_fork(self, s: Summary) -> None:
        assert s.forked_from is not None
        parent = s.forked_from.run
        known = self.known
        forks = {rid for rid in self._forks.get(parent, ()) if rid in known} | {s.run_id}

        def started(rid: str) -> tuple[float, str]:
            return (known[rid].started_at or 0.0, rid)

        self._forks[parent] = tuple(sorted(forks, key=started))

    # -- the followed run ----------------------------------------------------------------------

    def follow(self, run_id: str) -> Followed | None:
        """The run's whole view and attempts, reading only the records added since the last
        call for the same run. None when the run is gone."""
        with self.follow_lock:
            store = self.store
            if store is None:
                return None
            if run_id != self._followed:
                self._followed, self._records = run_id, []
            summary = self.known.get(run_id)
            records = self._records
            try:
                if summary is not None and summary.last_seq < len(records):
                    records.clear()  # the journal shrank (restored from a copy): read it again
                records.extend(store.load_since(run_id, len(records)))
            except StoreUnavailableError:
                self._records = []  # read again whole once it answers
                raise
            except DurableAgentError:
                # The core fold names the line and the reason of a journal that does not load.
                self._records = []
                return Followed(run_id, view_store(store, run_id))
            if not records:
                return None
            leased = summary.leased if summary is not None else store.is_leased(run_id)
            outcome = store.last_outcome(run_id)
            view = view_run(records, outcome=outcome, leased=leased, run_id=run_id)
            try:
                attempts = tuple(store.attempts(run_id))
            except StoreUnavailableError:
                raise
            except DurableAgentError:
                attempts = ()
            # The reconcile dialog opens on this view: it warns as `show` does.
            view = with_late_write(store, view, records, attempts)
            return Followed(run_id, view, attempts)

    def view(self, run_id: str) -> RunView:
        """A fresh view of any run (for a dialog on a run not yet followed)."""
        store = self.store
        if store is None:
            return RunView(run_id=run_id, status=RunStatus.CORRUPT, error="the store is gone")
        return view_store(store, run_id)


def _last_attempt(store: Store, run_id: str) -> Attempt | None:
    try:
        attempts = store.attempts(run_id)
    except DurableAgentError:
        return None
    return attempts[-1] if attempts else None
