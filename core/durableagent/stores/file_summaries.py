"""FileStore summaries: every run's status line, kept in the summary index at each append
(under the journal's lock) and rebuilt from the journal when missing or behind it, so that a
listing of 100,000 runs reads no journal whole.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from contextlib import suppress
from typing import TYPE_CHECKING

from ..errors import DurableAgentError, StoreError
from ..fold import Fold, Summary, corrupt_summary, summarize
from ..ids import check_run_id, valid_run_id
from ..outcome import Outcome
from ..record import Record
from . import file_logs
from .file_logs import ATTEMPTS_DIR, OUTCOMES_DIR, SummaryIndex, fields, row_of, summary_of
from .fs import O_READ

if TYPE_CHECKING:
    from .file import FileStore

_FOLDS = 4096  # runs whose fold this process keeps, to update summaries without a reload


class SummaryKeeper:
    """A FileStore's summaries: the index, and the folds of the runs this process appended to
    (so that an append updates its run's row without reading the journal)."""

    def __init__(self, store: FileStore) -> None:
        self.store = store
        self.index = SummaryIndex(store.dir)
        # run -> ((journal size, attempts log size), its fold, its last outcome)
        self._folds: OrderedDict[str, tuple[tuple[int, int], Fold, Outcome | None]] = OrderedDict()
        self._folds_lock = threading.Lock()

    def note_append(
        self,
        run_id: str,
        stored: Record,
        stamp: str,
        records: list[Record] | None,
        *,
        before: int = 0,
    ) -> None:
        """Keep the run's summary row up to date (under the journal's lock). Derived data:
        a failure here never fails the append; the row is rebuilt when found behind."""
        with suppress(OSError, DurableAgentError, ValueError):
            attempts = self._attempts_size(run_id)
            with self._folds_lock:
                cached = self._folds.pop(run_id, None)
            if cached is not None and cached[0] == (before, attempts):
                f, outcome = cached[1], cached[2]
                f.add(stored)
            else:
                f = Fold()
                for r in [*records, stored] if records is not None else self.store.load(run_id):
                    f.add(r)
                outcome = self.store.last_outcome(run_id)
            self.remember(run_id, (_size(stamp), attempts), f, outcome)
            self.index.add([row_of(summarize(run_id, f, outcome), stamp)])

    def remember(self, run_id: str, key: tuple[int, int], f: Fold, outcome: Outcome | None) -> None:
        with self._folds_lock:
            self._folds[run_id] = (key, f, outcome)
            while len(self._folds) > _FOLDS:
                self._folds.popitem(last=False)

    def _attempts_size(self, run_id: str) -> int:
        try:
            return os.stat(
                f"{self.store._prefix}{ATTEMPTS_DIR}/{run_id}.jsonl", follow_symlinks=False
            ).st_size
        except OSError:
            return 0

    def summaries(self) -> list[Summary]:
        """Every run's status line. Reads the index, one directory listing and the held
        leases; rebuilds (and re-indexes) only the runs whose row is missing or behind."""
        rows, count = self.index.read()
        listed = rows.pop(file_logs.LISTING, None)
        # The root's mtime moves only when a journal is created or removed (appends do not):
        # unchanged since the last full listing, the index already names every run.
        root_mtime = os.stat(self.store.root).st_mtime_ns
        fresh = []
        if listed is not None and listed[1] == file_logs.stamp_of(root_mtime, 0):
            journals = {i: file_logs.is_regular(line) for i, line in rows.items()}
        else:
            journals = self._journal_names()
            fresh.append(file_logs.listing_row(root_mtime))
        # A completed run's journal never changes again (signals are refused, run() returns
        # its answer): its row needs no stat. Every other row is checked against its journal.
        unsettled = [
            i
            for i, regular in journals.items()
            if not regular or (line := rows.get(i)) is None or fields(line)[1] != "completed"
        ]
        with_attempts: set[str] | None = None
        for run_id, stamp in self.stamps(unsettled).items():
            line = rows.get(run_id)
            if line is None or fields(line)[0] != stamp:
                if with_attempts is None:  # one listing, not a failed open per new run
                    with_attempts = set(self.store.dir.listing(ATTEMPTS_DIR, ".jsonl"))
                    with_attempts |= set(self.store.dir.listing(OUTCOMES_DIR, ".json"))
                row = self.rebuild(run_id, stamp, run_id in with_attempts)
                rows[run_id] = file_logs.joined(row)
                fresh.append(row)
        if fresh:
            with suppress(OSError, DurableAgentError):
                self.index.add(fresh)
        if count + len(fresh) > 2 * len(journals) + 1024:
            with suppress(OSError, DurableAgentError):
                self.index.compact()
        held = self.store.leases.held()
        return [summary_of(rows[i].split("\t"), i in held) for i in sorted(journals) if i in rows]

    def summary(self, run_id: str) -> Summary | None:
        """One run's status line (from its journal: a single run is cheap to fold)."""
        check_run_id(run_id)
        stamp = self.stamps([run_id]).get(run_id)
        if stamp is None:
            return None
        return summary_of(self.rebuild(run_id, stamp), self.store.is_leased(run_id))

    def rebuild(self, run_id: str, stamp: str, attempts: bool = True) -> file_logs.Row:
        """A fresh index row for the run, from its journal (``attempts``: whether it may
        have an attempt log to read its last outcome from)."""
        if stamp == _IRREGULAR:
            return _corrupt_row(run_id, stamp, self._why_not_regular(run_id))
        try:
            records = self.store.load(run_id)
        except DurableAgentError as e:
            return _corrupt_row(run_id, stamp, str(e))
        f = Fold()
        for r in records:
            f.add(r)
        outcome = self.store.last_outcome(run_id) if attempts else None
        self.remember(run_id, (_size(stamp), self._attempts_size(run_id)), f, outcome)
        return row_of(summarize(run_id, f, outcome), stamp)

    def _journal_names(self) -> dict[str, bool]:
        """``{run: whether its journal is a regular file}`` (one listing, no stat)."""
        out: dict[str, bool] = {}
        try:
            with os.scandir(self.store.root) as entries:
                for e in entries:
                    name = e.name
                    if name.endswith(".jsonl") and valid_run_id(run_id := name[:-6]):
                        out[run_id] = e.is_file(follow_symlinks=False)
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise StoreError(f"cannot list the store {self.store.root}: {e.strerror}") from None
        return out

    def stamps(self, run_ids: list[str]) -> dict[str, str]:
        """``{run: "size:mtime_ns"}`` (the journal's stamp), "-1:0" for one that is not a regular
        file; a journal gone meanwhile is left out."""
        out: dict[str, str] = {}
        prefix = self.store._prefix
        for run_id in run_ids:
            try:
                st = os.stat(f"{prefix}{run_id}.jsonl", follow_symlinks=False)
            except OSError:
                continue
            out[run_id] = journal_stamp(st) if stat.S_ISREG(st.st_mode) else _IRREGULAR
        return out

    def _why_not_regular(self, run_id: str) -> str:
        try:
            fd = self.store.dir.open_regular(self.store._journal(run_id), O_READ)
        except FileNotFoundError:
            return "the journal disappeared"
        except StoreError as e:
            return str(e)
        os.close(fd)
        return "not a regular file"


def _corrupt_row(run_id: str, stamp: str, error: str) -> file_logs.Row:
    return row_of(corrupt_summary(run_id, error), stamp)


def journal_stamp(st: os.stat_result) -> str:
    return file_logs.stamp_of(st.st_size, st.st_mtime_ns)


_IRREGULAR = file_logs.stamp_of(-1, 0)


def _size(stamp: str) -> int:
    return int(stamp.partition(":")[0] or 0)
