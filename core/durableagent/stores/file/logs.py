"""The FileStore's two side logs, both derived from or beside the journals, never replayed.

- ``.attempts/<run>.jsonl``: one line when an attempt takes the lease (its epoch, owner and
  first seq), one when it ends (its outcome). ``attempts()``, ``last_outcome()`` and the next
  lease epoch are read from it.
- ``.summaries/index.jsonl``: one status row per append, last row per run wins; compacted by
  readers when it has grown to twice the runs. A row records the journal's size and mtime when
  it was made: a row behind its journal (a crash between the two writes, a hand edit, an
  older writer) is rebuilt from the journal by the reader.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import threading
from typing import Any

from ...errors import StoreError
from ...fold import RunStatus, Summary, held_note
from ...gate import Pending
from ...lineage import ForkedFrom
from ...outcome import Outcome
from ..protocol import LOST, Attempt
from .fs import O_READ, O_WRITE, StoreDir, pread_all, replace_in, write_all

ATTEMPTS_DIR = ".attempts"
OUTCOMES_DIR = ".outcomes"  # written by earlier versions; read when no attempt says
SUMMARIES_DIR = ".summaries"
_INDEX = "index.jsonl"
_LOCK = "lock"
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _lines(data: bytes) -> list[Any]:
    """The JSON values of the complete lines of a side log (a torn or bad line is skipped:
    these logs are informational)."""
    out = []
    for line in data.split(b"\n")[:-1]:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


# -- attempts -------------------------------------------------------------------------------


def begin_line(epoch: int, owner: str, at: float | None, first_seq: int) -> bytes:
    return (
        _dumps({"e": "begin", "epoch": epoch, "owner": owner, "at": at, "first_seq": first_seq})
        + "\n"
    ).encode()


def end_line(epoch: int, at: float | None, ended: str, outcome: Outcome | None) -> bytes:
    d: dict[str, Any] = {"e": "end", "epoch": epoch, "at": at, "ended": ended}
    if outcome is not None:
        d["last_seq"] = outcome.seq
        d["outcome"] = outcome.to_dict()
    return (_dumps(d) + "\n").encode()


def attempts_log(attempts: list[Attempt]) -> bytes:
    """An attempts log that reads back as ``attempts`` (an attempt that never said how it
    ended gets no end line: it reads as lost again)."""
    out = []
    for a in attempts:
        out.append(begin_line(a.epoch, a.owner, a.started_at, a.first_seq))
        if a.ended is not None and a.ended != LOST:
            out.append(end_line(a.epoch, a.ended_at, a.ended, a.outcome))
    return b"".join(out)


def read_attempts(data: bytes | None, holder_epoch: int | None) -> list[Attempt]:
    """Fold an attempts log. An attempt that never said how it ended is ``lost`` unless its
    epoch holds the lease now (then it is running: ended None)."""
    attempts: list[dict[str, Any]] = []
    for d in _lines(data or b""):
        if not isinstance(d, dict):
            continue
        if d.get("e") == "begin":
            attempts.append(
                {
                    "number": len(attempts) + 1,
                    "owner": d.get("owner") or "",
                    "epoch": d.get("epoch") or 0,
                    "started_at": d.get("at"),
                    "first_seq": d.get("first_seq") or 0,
                }
            )
        elif d.get("e") == "end":
            match = next((a for a in reversed(attempts) if a["epoch"] == d.get("epoch")), None)
            if match is None or "ended" in match:  # an outcome saved without a lease
                match = {"number": len(attempts) + 1, "epoch": d.get("epoch") or 0}
                attempts.append(match)
            match["ended_at"] = d.get("at")
            match["ended"] = d.get("ended")
            match["last_seq"] = d.get("last_seq")
            match["outcome"] = d.get("outcome")
    out = []
    for a in attempts:
        if "ended" not in a and a["epoch"] != holder_epoch:
            a["ended"] = LOST
        try:
            out.append(Attempt.from_dict(a))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def next_epoch(data: bytes | None) -> int:
    """One more than the highest epoch the attempts log has seen."""
    epochs = [d.get("epoch") for d in _lines(data or b"") if isinstance(d, dict)]
    return max((e for e in epochs if isinstance(e, int)), default=0) + 1


def last_outcome(data: bytes | None) -> Outcome | None:
    """The outcome of the last attempt that ended with one."""
    for d in reversed(_lines(data or b"")):
        if isinstance(d, dict) and d.get("e") == "end" and d.get("outcome") is not None:
            try:
                return Outcome.from_dict(d["outcome"])
            except (ValueError, KeyError, TypeError):
                return None
    return None


class AttemptLogs:
    """The ``.attempts/<run>.jsonl`` logs of a store (and the ``.outcomes`` an older version
    kept): what the store, its leases and its summaries read and write of them."""

    def __init__(self, sdir: StoreDir) -> None:
        self.dir = sdir
        self._folder = f"{sdir.prefix}{ATTEMPTS_DIR}/"

    def read(self, run_id: str) -> bytes | None:
        return self.dir.read_file(ATTEMPTS_DIR, f"{run_id}.jsonl")

    def append(self, run_id: str, line: bytes, *, sync: bool) -> None:
        self.dir.append_line(ATTEMPTS_DIR, f"{run_id}.jsonl", line, sync=sync)

    def replace(self, run_id: str, attempts: list[Attempt]) -> None:
        self.dir.write_file(ATTEMPTS_DIR, f"{run_id}.jsonl", attempts_log(attempts))

    def size(self, run_id: str) -> int:
        """The log's size (0 when it is missing): it moves whenever an attempt begins or
        ends, so a last outcome read at one size is current while the size is."""
        try:
            return os.stat(f"{self._folder}{run_id}.jsonl", follow_symlinks=False).st_size
        except OSError:
            return 0

    def next_epoch(self, run_id: str) -> int:
        return next_epoch(self.read(run_id))

    def last_outcome(self, run_id: str) -> Outcome | None:
        """The last attempt's outcome; None when there is none or it does not parse (it is
        informational: replay never reads it)."""
        try:
            outcome = last_outcome(self.read(run_id))
            if outcome is not None:
                return outcome
            old = self.dir.read_file(OUTCOMES_DIR, f"{run_id}.json")
            return None if old is None else Outcome.from_dict(json.loads(old))
        except (StoreError, ValueError, KeyError, TypeError):
            return None

    def runs(self) -> set[str]:
        """The runs that have a log (or an older version's outcome)."""
        found = set(self.dir.listing(ATTEMPTS_DIR, ".jsonl"))
        return found | set(self.dir.listing(OUTCOMES_DIR, ".json"))


# -- the summaries index ----------------------------------------------------------------------

# A row is one line of tab-separated fields (text fields escaped): a listing reads 100,000 of
# them, and splitting lines is three times faster than parsing JSON.
#   run_id, stamp ("size:mtime_ns" of the journal), status, steps, model_calls, started_at,
#   last_activity, last_seq, waiting_on, error, answer, pending (JSON), indeterminate, signals,
#   forked_from (JSON), controls (JSON: budget, spent, the cancel or pause in force; "" for
#   most runs). Rows of another length (an older version's) are rebuilt by readers.
Row = list[str]
_FIELDS = 16
_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
_UNESCAPE = re.compile(r"\\(.)")
_UNESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}


def _esc(text: str | None) -> str:
    if not text:
        return ""
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        return "".join(_ESCAPES.get(c, c) for c in text)
    return text


def _unesc(field: str) -> str:
    if "\\" not in field:
        return field
    return _UNESCAPE.sub(lambda m: _UNESCAPES.get(m.group(1), m.group(1)), field)


def _num(value: float | None) -> str:
    return "" if value is None else repr(value)


def stamp_of(size: int, mtime_ns: int) -> str:
    """A journal's stamp as rows record it: a row at another stamp is behind its journal."""
    return f"{size}:{mtime_ns}"


def row_of(summary: Summary, stamp: str) -> Row:
    """A summary as an index row (the status as if the lease were free)."""
    pending = json.dumps([p.to_dict() for p in summary.pending]) if summary.pending else ""
    origin = summary.forked_from
    return [
        summary.run_id,
        stamp,
        str(summary.status),
        str(summary.steps),
        str(summary.model_calls),
        _num(summary.started_at),
        _num(summary.last_activity),
        str(summary.last_seq),
        _esc(summary.waiting_on),
        _esc(summary.error),
        _esc(summary.answer),
        pending,
        _esc(summary.indeterminate),
        str(summary.signals),
        "" if origin is None else json.dumps(origin.to_dict()),
        _esc(summary.controls),
    ]


LISTING = ""  # the row that records the root's mtime at the last full listing


def listing_row(root_mtime: int) -> Row:
    """The index row saying the index named every run when the root had this mtime."""
    return [
        LISTING,
        stamp_of(root_mtime, 0),
        "ready",
        "0",
        "0",
        "",
        "",
        "0",
        "",
        "",
        "",
        "",
        "",
        "0",
        "",
        "",
    ]


def fields(line: str) -> tuple[str, str]:
    """A stored row's (stamp, status), without splitting the rest."""
    _, stamp, status, _ = line.split("\t", 3)
    return stamp, status


def is_regular(line: str) -> bool:
    """False for the row of a journal that is not a regular file."""
    return not fields(line)[0].startswith("-")


def joined(row: Row) -> str:
    """A row as the index stores it (without its newline)."""
    return "\t".join(row)


_STATUS = {str(s): s for s in RunStatus}
_SETTLED = (RunStatus.COMPLETED, RunStatus.CORRUPT)


_new = tuple.__new__  # a listing turns 100,000 rows into summaries: no per-field defaults


def summary_of(row: Row, leased: bool, note: str = "") -> Summary:
    """An index row as a summary, given whether the run's lease is held now (``note``: what a
    running run waits on, e.g. that its holder is stuck)."""
    status = _STATUS[row[2]]
    started = float(row[5]) if row[5] else None
    last = float(row[6]) if row[6] else None
    origin = ForkedFrom.from_dict(json.loads(row[14])) if row[14] else None
    # A journal that does not load stays corrupt whoever holds its lease; a fork's journal
    # is "corrupt" only until its copy is whole, and its forker holds the lease meanwhile.
    controls = _unesc(row[15])
    if leased and (status not in _SETTLED or (status == RunStatus.CORRUPT and origin)):
        note = note or held_note(status, _unesc(row[8]))
        fields: tuple[Any, ...] = (
            row[0], RunStatus.RUNNING, int(row[3]), int(row[4]), started, last, int(row[7]),
            note, "", _unesc(row[10]), True, (), None, int(row[13]), origin, controls,
        )  # fmt: skip
    else:
        pending = tuple(Pending.from_dict(p) for p in json.loads(row[11])) if row[11] else ()
        fields = (
            row[0], status, int(row[3]), int(row[4]), started, last, int(row[7]),
            _unesc(row[8]), _unesc(row[9]), _unesc(row[10]), leased, pending,
            _unesc(row[12]) or None, int(row[13]), origin, controls,
        )  # fmt: skip
    summary: Summary = _new(Summary, fields)
    return summary


def _line(row: Row) -> bytes:
    return ("\t".join(row) + "\n").encode()


class SummaryIndex:
    """The index log. Writers append under a shared lock, a compacting reader takes it
    exclusive, so no row lands in a log being replaced. A writer keeps the folder, the lock
    and the log open between appends (an append is on every journal append's path); it
    reopens the log when a compaction replaced it."""

    def __init__(self, sdir: StoreDir) -> None:
        self.sdir = sdir
        self._mutex = threading.Lock()  # flock is per open file, not per thread
        self._dfd: int | None = None
        self._lock: int | None = None
        self._log: int | None = None
        self._log_id: tuple[int, int] = (0, 0)

    def _open(self) -> tuple[int, int]:
        """The folder and lock fds (opened once, without following symlinks)."""
        if self._dfd is None or self._lock is None:
            self.close()
            with self.sdir.folder(SUMMARIES_DIR, create=True) as dfd:
                assert dfd is not None
                self._dfd = os.dup(dfd)
            self._lock = self.sdir.open_regular(_LOCK, O_WRITE | os.O_CREAT, dir_fd=self._dfd)
        return self._dfd, self._lock

    def add(self, rows: list[Row]) -> None:
        """Append rows (no fsync: the index is rebuilt from the journals when behind)."""
        data = b"".join(map(_line, rows))
        with self._mutex:
            dfd, lock = self._open()
            fcntl.flock(lock, fcntl.LOCK_SH)
            try:
                st = os.stat(_INDEX, dir_fd=dfd, follow_symlinks=False) if self._log else None
                if self._log is None or st is None or (st.st_dev, st.st_ino) != self._log_id:
                    if self._log is not None:
                        os.close(self._log)
                        self._log = None
                    flags = O_WRITE | os.O_CREAT | os.O_APPEND
                    self._log = self.sdir.open_regular(_INDEX, flags, dir_fd=dfd)
                    now = os.fstat(self._log)
                    self._log_id = (now.st_dev, now.st_ino)
                write_all(self._log, data)
            except FileNotFoundError:
                self.close()  # the folder went away: open it all again next time
                raise
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(lock, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self._log, self._lock, self._dfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._dfd = self._lock = self._log = None

    def read(self) -> tuple[dict[str, str], int]:
        """The last row of each run (unsplit: a listing keeps 100,000 of them), and how many
        rows the log holds."""
        data = self.sdir.read_file(SUMMARIES_DIR, _INDEX) or b""
        return _rows(data)

    def compact(self) -> None:
        """Rewrite the log with one row per run."""
        with self._mutex, self.sdir.folder(SUMMARIES_DIR, create=True) as dfd:
            assert dfd is not None
            lock = self.sdir.open_regular(_LOCK, O_WRITE | os.O_CREAT, dir_fd=dfd)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    log = self.sdir.open_regular(_INDEX, O_READ, dir_fd=dfd)
                except FileNotFoundError:
                    return
                try:
                    data = pread_all(log, os.fstat(log).st_size, 0)
                finally:
                    os.close(log)
                rows, _ = _rows(data)
                body = "".join(f"{line}\n" for line in rows.values()).encode()
                with contextlib.suppress(OSError):  # a full disk keeps the long log
                    replace_in(dfd, _INDEX, body)
            finally:
                os.close(lock)


def _rows(data: bytes) -> tuple[dict[str, str], int]:
    """The last row of each run in an index log, unsplit, and how many rows it holds (a torn
    last line and rows of another shape are skipped)."""
    lines = data.decode("utf-8", "replace").split("\n")
    lines.pop()  # after the last newline: empty, or torn
    rows: dict[str, str] = {}
    tabs = _FIELDS - 1
    for line in lines:
        if line.count("\t") == tabs:
            rows[line[: line.index("\t")]] = line
    return rows, len(lines)
