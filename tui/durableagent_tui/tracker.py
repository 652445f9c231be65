"""The store as the TUI knows it: one followed journal per run, folded with ``view_run``.

Everything goes through the ``Store`` protocol (a FileStore or a PostgresStore, the TUI cannot
tell): the store's summaries say which runs moved, ``load_since`` reads only their new records.
Status always comes from the core fold (``view_run``, or ``view_store`` for a journal that does
not load); this module only decides what to re-read. Its methods do I/O and are meant to run
off the event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from durableagent import (
    DurableAgentError,
    FileStore,
    Record,
    RunStatus,
    RunView,
    Store,
    Summary,
    view_run,
    view_store,
)

# What a summary says changed: the journal's end, the status, the lease.
Signature = tuple[int, str, bool, str]


@dataclass
class _Tail:
    records: list[Record] = field(default_factory=list)
    signature: Signature | None = None
    corrupt: bool = False
    boundary: int | None = None  # the seq an unfinished attempt ended at


@dataclass(frozen=True)
class Changes:
    """What a refresh found: new or changed views, and runs that are gone."""

    views: dict[str, RunView] = field(default_factory=dict)
    removed: frozenset[str] = frozenset()
    resumed: dict[str, int | None] = field(default_factory=dict)  # see resumed_at

    def __bool__(self) -> bool:
        return bool(self.views or self.removed)


def _signature(s: Summary) -> Signature:
    return (s.last_seq, str(s.status), s.leased, s.waiting_on)


class StoreTracker:
    """Per-run tails over a store; every method returns the views that changed.

    ``source`` is a Store, or a directory that becomes a FileStore once it exists (the TUI
    never creates a store)."""

    def __init__(self, source: Store | str | os.PathLike[str]) -> None:
        self._store: Store | None = None
        self._path: Path | None = None
        if isinstance(source, (str, os.PathLike)):
            self._path = Path(source)
        else:
            self._store = source
        self._tails: dict[str, _Tail] = {}
        self._leased: set[str] = set()

    @property
    def store(self) -> Store | None:
        """The store, once it exists."""
        if self._store is None and self._path is not None and self._path.is_dir():
            self._store = FileStore(self._path, create=False)
        return self._store

    def run_ids(self) -> list[str]:
        """The runs known so far."""
        return list(self._tails)

    def resumed_at(self, rid: str) -> int | None:
        """The last seq before a resumed attempt's first record (signals in between belong to
        the wait), or None when the run has not resumed since an unfinished attempt."""
        tail = self._tails.get(rid)
        if tail is None or tail.boundary is None:
            return None
        for r in tail.records[tail.boundary :]:
            if r.type != "signal":
                return r.seq - 1
        return None

    def scan(self) -> Changes:
        """Look at every run through the store's summaries; re-read those that moved. The
        safety net for missed change notices, and the whole of polling mode."""
        store = self.store
        if store is None:
            gone = frozenset(self._tails)
            self._tails.clear()
            return Changes(removed=gone)
        summaries = {s.run_id: s for s in store.summaries()}
        gone = frozenset(self._tails.keys() - summaries.keys())
        for rid in gone:
            self._tails.pop(rid, None)
        moved = [
            rid
            for rid, s in summaries.items()
            if (tail := self._tails.get(rid)) is None or tail.signature != _signature(s)
        ]
        changes = self.refresh(moved, summaries)
        return Changes(changes.views, changes.removed | gone, changes.resumed)

    def refresh(
        self, run_ids: list[str] | set[str], summaries: dict[str, Summary] | None = None
    ) -> Changes:
        """Re-read the given runs (new records only) and fold them again."""
        views: dict[str, RunView] = {}
        removed: set[str] = set()
        store = self.store
        if store is None:
            return Changes(removed=frozenset(self._tails))
        for rid in run_ids:
            summary = summaries.get(rid) if summaries is not None else store.summary(rid)
            if summary is None:
                if self._tails.pop(rid, None) is not None:
                    removed.add(rid)
                continue
            views[rid] = self._read(store, rid, summary)
        resumed = {rid: self.resumed_at(rid) for rid in views}
        return Changes(views, frozenset(removed), resumed)

    def recheck_leases(self) -> Changes:
        """Refold the runs shown as running whose lease is gone: a worker that dies leaves
        no change notice behind."""
        store = self.store
        if store is None:
            return Changes()
        dead = [rid for rid in self._leased if not store.is_leased(rid)]
        return self.refresh(dead) if dead else Changes()

    def _read(self, store: Store, rid: str, summary: Summary) -> RunView:
        tail = self._tails.get(rid)
        if tail is None or tail.corrupt or summary.last_seq < len(tail.records):
            tail = self._tails[rid] = _Tail()
        tail.signature = _signature(summary)
        try:
            tail.records.extend(store.load_since(rid, len(tail.records)))
        except DurableAgentError:
            # The core fold names the line and the reason of a journal that does not load.
            tail.corrupt = True
            self._leased.discard(rid)
            return view_store(store, rid)
        leased = summary.leased
        view = view_run(tail.records, outcome=store.last_outcome(rid), leased=leased, run_id=rid)
        if view.outcome is not None and view.outcome.status != "completed":
            tail.boundary = view.outcome.seq
        if view.status == RunStatus.RUNNING:
            self._leased.add(rid)
        else:
            self._leased.discard(rid)
        return view
