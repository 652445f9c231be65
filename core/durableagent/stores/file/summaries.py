"""FileStore summaries: every run's status line, kept in the summary index at each append
(under the journal's lock) and rebuilt from the journal when missing or behind it, so that a
listing of 100,000 runs reads no journal whole.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from contextlib import suppress

from ...errors import DurableAgentError, StoreError
from ...fold import Fold, Summary, corrupt_summary, summarize
from ...ids import check_run_id, valid_run_id
from ...outcome import Outcome
from ...record import LineError, Record, line_seq
from . import logs
from .fs import O_READ
from .journals import JournalFiles
from .leases import LeaseKeeper, stuck_note
from .logs import (
    AttemptLogs,
    Row,
    SummaryIndex,
    fields,
    row_of,
    summary_of,
)

_TIPS = 4096  # runs whose tip this process keeps, to append and update rows without a reload
ROW_EVERY = 1.0  # seconds between the index rows of a run appended to under a lease


class Tip:
    """What this process knows of a run's journal as of its last append there (made under
    the journal's lock): the last seq, where the file and its last line end, the file's
    identity, and the status fold of every record up to there (None: unknown, rebuilt when a
    row is due).

    While the file still ``follows`` the tip (same inode, not shorter, and the last line
    this process wrote still there, whole, its crc matching) the next append reads only what
    others appended since, or nothing at all."""

    __slots__ = ("attempts", "fold", "ino", "line_at", "offset", "outcome", "row_at", "seq")

    def __init__(self, fold: Fold | None, outcome: Outcome | None = None) -> None:
        self.seq = 0
        self.offset = 0
        self.line_at = 0  # where the last line this process wrote begins
        self.ino = -1
        self.fold = fold
        self.outcome = outcome
        self.attempts = -1  # the attempts log's size when ``outcome`` was read; -1: unread
        self.row_at = 0.0  # monotonic time of this process's last index row for the run

    def follows(self, fd: int, st: os.stat_result) -> bool:
        """The journal (``fd``, ``st`` its fstat, under its lock) is this tip's, grown or as
        it was: its line at the tip is the record this process wrote last, whole (as the
        line an append takes its seq from must be: see journals.last_seq)."""
        if st.st_ino != self.ino or st.st_size < self.offset or self.offset <= self.line_at:
            return False
        line = os.pread(fd, self.offset - self.line_at, self.line_at)
        if line[-1:] != b"\n":
            return False
        try:
            return line_seq(line[:-1]) == self.seq
        except LineError:
            return False

    def extend(self, records: list[Record]) -> None:
        """Fold in records others appended after the tip."""
        if self.fold is not None:
            for r in records:
                self.fold.add(r)

    def moved(self, stored: list[Record], data: bytes, end: int, ino: int) -> None:
        """The tip after this process wrote ``data`` (the lines of ``stored``) to the end of
        the journal (inode ``ino``), which now ends at ``end``."""
        self.extend(stored)
        self.seq = stored[-1].seq
        self.offset = end
        self.line_at = end - (len(data) - data.rfind(b"\n", 0, len(data) - 1) - 1)
        self.ino = ino


class SummaryKeeper:
    """A FileStore's summaries: the index, and the tips of the runs this process appended to
    (so that an append updates its run's row without reading the journal). It reads the
    journals, the attempt logs (last outcomes) and the leases (who holds a run), nothing else
    of the store."""

    def __init__(self, journals: JournalFiles, attempts: AttemptLogs, leases: LeaseKeeper) -> None:
        self.journals = journals
        self.attempts = attempts
        self.leases = leases
        self.dir = journals.dir
        self.index = SummaryIndex(journals.dir)
        self._tips: OrderedDict[str, Tip] = OrderedDict()
        self._tips_lock = threading.Lock()

    def tip(self, run_id: str) -> Tip | None:
        """The run's tip, taken out (the appender holds the journal's lock and puts it back)."""
        with self._tips_lock:
            return self._tips.pop(run_id, None)

    def fresh_tip(self, records: list[Record]) -> Tip:
        """A tip from the whole journal (read under its lock)."""
        f = Fold()
        for r in records:
            f.add(r)
        return Tip(f)

    def _keep(self, run_id: str, tip: Tip) -> None:
        with self._tips_lock:
            self._tips[run_id] = tip
            while len(self._tips) > _TIPS:
                self._tips.popitem(last=False)

    def created(self, run_id: str, stored: list[Record], data: bytes, st: os.stat_result) -> None:
        """A new journal holding ``stored`` (``data``) was linked into place, fsynced."""
        tip = self.fresh_tip([])
        tip.moved(stored, data, st.st_size, st.st_ino)
        tip.row_at = time.monotonic()
        self._keep(run_id, tip)
        with suppress(OSError, DurableAgentError, ValueError):
            self.write_row(self._row(run_id, tip, st))

    def appended(
        self,
        run_id: str,
        tip: Tip | None,
        stored: list[Record],
        data: bytes,
        fd: int,
        ino: int,
        *,
        leased: bool,
        row: bool,
    ) -> Row | None:
        """Move the run's tip past ``stored`` (under the journal's lock) and say which index
        row to write once the append is durable: one per append, but under a lease at most one
        every ROW_EVERY seconds (a listing shows a leased run as running whatever its row says,
        and the attempt's end writes its row). Derived data: a failure here never fails the
        append; a row found behind its journal is rebuilt."""
        if tip is None:
            tip = Tip(None)
        tip.moved(stored, data, lseek_end(fd), ino)
        self._keep(run_id, tip)
        now = time.monotonic()
        if not row or (leased and now - tip.row_at < ROW_EVERY):
            return None
        tip.row_at = now
        try:
            return self._row(run_id, tip, os.fstat(fd))
        except (OSError, DurableAgentError, ValueError):
            return None

    def _row(self, run_id: str, tip: Tip, st: os.stat_result) -> Row:
        """The run's index row at ``tip``: its fold (rebuilt from the journal when unknown)
        and its last outcome (read again when the attempts log moved)."""
        if tip.fold is None:
            f = Fold()
            for r in self.journals.load(run_id):
                f.add(r)
            tip.fold = f
        attempts = self._attempts_size(run_id)
        if attempts != tip.attempts:
            tip.outcome = self.attempts.last_outcome(run_id) if attempts else None
            tip.attempts = attempts
        return row_of(summarize(run_id, tip.fold, tip.outcome), journal_stamp(st))

    def write_row(self, row: Row) -> None:
        """Add a row to the index (derived data: a failure is left for readers to mend)."""
        with suppress(OSError, DurableAgentError):
            self.index.add([row])

    def ended(self, run_id: str, outcome: Outcome | None) -> None:
        """An attempt of the run ended (the journal's lock held, the attempts log written):
        its row, from the tip when the journal is as the tip says, else from the journal."""
        stamp = self.stamps([run_id]).get(run_id)
        if stamp is None:
            return
        with self._tips_lock:
            tip = self._tips.get(run_id)
        try:
            st = os.stat(self.journals.path(run_id), follow_symlinks=False)
            if (
                tip is not None
                and tip.fold is not None
                and stamp == journal_stamp(st)
                and st.st_ino == tip.ino
                and st.st_size == tip.offset
            ):
                tip.attempts = self._attempts_size(run_id)
                if outcome is not None:
                    tip.outcome = outcome
                else:
                    tip.outcome = self.attempts.last_outcome(run_id)
                tip.row_at = time.monotonic()
                self.index.add([row_of(summarize(run_id, tip.fold, tip.outcome), stamp)])
            else:
                self.index.add([self.rebuild(run_id, stamp)])
        except (OSError, DurableAgentError, ValueError):
            pass

    def _attempts_size(self, run_id: str) -> int:
        return self.attempts.size(run_id)

    def summaries(self) -> list[Summary]:
        """Every run's status line. Reads the index, one directory listing and the held
        leases; rebuilds (and re-indexes) only the runs whose row is missing or behind."""
        rows, count = self.index.read()
        listed = rows.pop(logs.LISTING, None)
        # The root's mtime moves only when a journal is created or removed (appends do not):
        # unchanged since the last full listing, the index already names every run.
        root_mtime = os.stat(self.dir.root).st_mtime_ns
        fresh = []
        if listed is not None and listed[1] == logs.stamp_of(root_mtime, 0):
            journals = {i: logs.is_regular(line) for i, line in rows.items()}
        else:
            journals = self._journal_names()
            fresh.append(logs.listing_row(root_mtime))
        # A completed run's journal never changes again (signals are refused, run() returns
        # its answer): its row needs no stat. Every other row is checked against its journal.
        unsettled = [
            i
            for i, regular in journals.items()
            if not regular or (line := rows.get(i)) is None or fields(line)[1] != "completed"
        ]
        with_attempts: set[str] | None = None
        # A leased run shows as running whatever its row says, and its holder writes rows
        # now and then (see appended): a row behind its journal is rebuilt only once free.
        held = self.leases.held()
        for run_id, stamp in self.stamps(unsettled).items():
            line = rows.get(run_id)
            if line is not None and run_id in held and fields(line)[0] != _IRREGULAR:
                continue
            if line is None or fields(line)[0] != stamp:
                if with_attempts is None:  # one listing, not a failed open per new run
                    with_attempts = self.attempts.runs()
                row = self.rebuild(run_id, stamp, run_id in with_attempts)
                rows[run_id] = logs.joined(row)
                fresh.append(row)
        if fresh:
            with suppress(OSError, DurableAgentError):
                self.index.add(fresh)
        if count + len(fresh) > 2 * len(journals) + 1024:
            with suppress(OSError, DurableAgentError):
                self.index.compact()
        return [
            summary_of(rows[i].split("\t"), i in held, stuck_note(held.get(i)))
            for i in sorted(journals)
            if i in rows
        ]

    def summary(self, run_id: str) -> Summary | None:
        """One run's status line (from its journal: a single run is cheap to fold)."""
        check_run_id(run_id)
        stamp = self.stamps([run_id]).get(run_id)
        if stamp is None:
            return None
        holder = self.leases.probe(run_id)
        return summary_of(self.rebuild(run_id, stamp), holder is not None, stuck_note(holder))

    def rebuild(self, run_id: str, stamp: str, attempts: bool = True) -> logs.Row:
        """A fresh index row for the run, from its journal (``attempts``: whether it may
        have an attempt log to read its last outcome from)."""
        if stamp == _IRREGULAR:
            return _corrupt_row(run_id, stamp, self._why_not_regular(run_id))
        try:
            records = self.journals.load(run_id)
        except DurableAgentError as e:
            return _corrupt_row(run_id, stamp, str(e))
        f = Fold()
        for r in records:
            f.add(r)
        outcome = self.attempts.last_outcome(run_id) if attempts else None
        return row_of(summarize(run_id, f, outcome), stamp)

    def _journal_names(self) -> dict[str, bool]:
        """``{run: whether its journal is a regular file}`` (one listing, no stat)."""
        out: dict[str, bool] = {}
        try:
            with os.scandir(self.dir.root) as entries:
                for e in entries:
                    name = e.name
                    if name.endswith(".jsonl") and valid_run_id(run_id := name[:-6]):
                        out[run_id] = e.is_file(follow_symlinks=False)
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise StoreError(f"cannot list the store {self.dir.root}: {e.strerror}") from None
        return out

    def stamps(self, run_ids: list[str]) -> dict[str, str]:
        """``{run: "size:mtime_ns"}`` (the journal's stamp), "-1:0" for one that is not a regular
        file; a journal gone meanwhile is left out."""
        out: dict[str, str] = {}
        prefix = self.journals.prefix
        for run_id in run_ids:
            try:
                st = os.stat(f"{prefix}{run_id}.jsonl", follow_symlinks=False)
            except OSError:
                continue
            out[run_id] = journal_stamp(st) if stat.S_ISREG(st.st_mode) else _IRREGULAR
        return out

    def _why_not_regular(self, run_id: str) -> str:
        try:
            fd = self.dir.open_regular(self.journals.path(run_id), O_READ)
        except FileNotFoundError:
            return "the journal disappeared"
        except StoreError as e:
            return str(e)
        os.close(fd)
        return "not a regular file"


def lseek_end(fd: int) -> int:
    """Where the file ends (no stat: its size is all an append needs to know)."""
    return os.lseek(fd, 0, os.SEEK_END)


def _corrupt_row(run_id: str, stamp: str, error: str) -> logs.Row:
    return row_of(corrupt_summary(run_id, error), stamp)


def journal_stamp(st: os.stat_result) -> str:
    return logs.stamp_of(st.st_size, st.st_mtime_ns)


_IRREGULAR = logs.stamp_of(-1, 0)
