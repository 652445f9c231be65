"""The store as the TUI knows it: one tail per journal, folded with ``view_run``.

A tail remembers how many bytes of a journal it has read, so a change costs only the new bytes
(``FileStore.load_since``). Status always comes from the core fold (``view_run``, or
``view_store`` for a journal that does not load); this module only decides what to re-read.
Its methods do file I/O and are meant to run off the event loop.
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
    valid_run_id,
    view_run,
    view_store,
)

# (journal size, journal mtime, outcome mtime, lease size): what a rescan compares.
Signature = tuple[int, int, int, int]


@dataclass
class _Tail:
    offset: int = 0
    records: list[Record] = field(default_factory=list)
    signature: Signature = (0, 0, 0, 0)
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


class StoreTracker:
    """Per-run tails over a FileStore; every method returns the views that changed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._store: FileStore | None = None
        self._tails: dict[str, _Tail] = {}
        self._leased: set[str] = set()

    @property
    def store(self) -> FileStore | None:
        """The FileStore, once its directory exists (the TUI never creates a store)."""
        if self._store is None and self.root.is_dir():
            self._store = FileStore(self.root, create=False)
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
        """Look at every journal; re-read those whose signature moved. The safety net for
        missed watch events, and the whole of polling mode. One directory listing per folder
        keeps it cheap with many runs."""
        store = self.store
        if store is None:
            gone = frozenset(self._tails)
            self._tails.clear()
            return Changes(removed=gone)
        journals = _listing(self.root, ".jsonl", size=True)
        outcomes = _listing(self.root / ".outcomes", ".json", size=False)
        leases = _listing(self.root / ".leases", ".lock", size=True)
        gone = frozenset(self._tails.keys() - journals.keys())
        for rid in gone:
            self._tails.pop(rid, None)
        moved = []
        for rid, (size, mtime) in journals.items():
            if not valid_run_id(rid):
                continue
            tail = self._tails.get(rid)
            sig = (size, mtime, outcomes.get(rid, (0, 0))[1], leases.get(rid, (0, 0))[0])
            if tail is None or tail.signature != sig:
                moved.append(rid)
        changes = self.refresh(moved)
        return Changes(changes.views, changes.removed | gone, changes.resumed)

    def refresh(self, run_ids: list[str] | set[str]) -> Changes:
        """Re-read the given runs (new bytes only) and fold them again."""
        views: dict[str, RunView] = {}
        removed: set[str] = set()
        store = self.store
        if store is None:
            return Changes(removed=frozenset(self._tails))
        for rid in run_ids:
            sig = self._signature(rid)
            if sig is None:
                if self._tails.pop(rid, None) is not None:
                    removed.add(rid)
                continue
            views[rid] = self._read(store, rid, self._tails.get(rid), sig)
        resumed = {rid: self.resumed_at(rid) for rid in views}
        return Changes(views, frozenset(removed), resumed)

    def recheck_leases(self) -> Changes:
        """Refold the runs shown as running whose lease is gone: a worker that dies leaves its
        lease file as it was, so no file event tells us."""
        store = self.store
        if store is None:
            return Changes()
        dead = [rid for rid in self._leased if not store.is_leased(rid)]
        return self.refresh(dead) if dead else Changes()

    def _read(self, store: FileStore, rid: str, tail: _Tail | None, sig: Signature) -> RunView:
        if tail is None or tail.corrupt or sig[0] < tail.offset:
            tail = self._tails[rid] = _Tail()
        tail.signature = sig
        try:
            new, tail.offset = store.load_since(rid, tail.offset, len(tail.records) + 1)
        except DurableAgentError:
            # The core fold names the line and the reason of a journal that does not load.
            tail.corrupt = True
            self._leased.discard(rid)
            return view_store(store, rid)
        tail.records.extend(new)
        leased = store.is_leased(rid)
        view = view_run(tail.records, outcome=store.last_outcome(rid), leased=leased, run_id=rid)
        if view.outcome is not None and view.outcome.status != "completed":
            tail.boundary = view.outcome.seq
        if view.status == RunStatus.RUNNING:
            self._leased.add(rid)
        else:
            self._leased.discard(rid)
        return view

    def _signature(self, rid: str) -> Signature | None:
        root = self.root
        try:
            st = os.stat(root / f"{rid}.jsonl")
        except (FileNotFoundError, NotADirectoryError):
            return None
        return (
            st.st_size,
            st.st_mtime_ns,
            _mtime(root / ".outcomes" / f"{rid}.json"),
            _size(root / ".leases" / f"{rid}.lock"),
        )


def _listing(folder: Path, suffix: str, *, size: bool) -> dict[str, tuple[int, int]]:
    """``{stem: (size, mtime_ns)}`` of the folder's files ending in ``suffix``."""
    out: dict[str, tuple[int, int]] = {}
    cut = len(suffix)
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                name = e.name
                if name.endswith(suffix) and not name.startswith("."):
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    out[name[:-cut]] = (st.st_size if size else 0, st.st_mtime_ns)
    except (FileNotFoundError, NotADirectoryError):
        pass
    return out


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
