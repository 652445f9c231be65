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
import threading
from typing import Any

from ..fold import RunStatus, Summary
from ..gate import Pending
from ..outcome import Outcome
from .fs import O_READ, O_WRITE, StoreDir, pread_all, replace_in, write_all
from .protocol import LOST, Attempt

ATTEMPTS_DIR = ".attempts"
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


def begin_line(epoch: int, owner: str, at: float, first_seq: int) -> bytes:
    return (
        _dumps({"e": "begin", "epoch": epoch, "owner": owner, "at": at, "first_seq": first_seq})
        + "\n"
    ).encode()


def end_line(epoch: int, at: float, ended: str, outcome: Outcome | None) -> bytes:
    d: dict[str, Any] = {"e": "end", "epoch": epoch, "at": at, "ended": ended}
    if outcome is not None:
        d["last_seq"] = outcome.seq
        d["outcome"] = outcome.to_dict()
    return (_dumps(d) + "\n").encode()


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


# -- the summaries index ----------------------------------------------------------------------

Row = list[Any]  # [run_id, [journal size, mtime ns], Summary fields as stored ...]


def row_of(summary: Summary, stamp: list[int]) -> Row:
    """A summary as an index row (the status as if the lease were free)."""
    return [
        summary.run_id,
        stamp,
        str(summary.status),
        summary.steps,
        summary.model_calls,
        summary.started_at,
        summary.last_activity,
        summary.last_seq,
        summary.waiting_on,
        summary.error,
        summary.input,
        summary.answer,
        [p.to_dict() for p in summary.pending],
        summary.indeterminate,
        summary.signals,
    ]


def summary_of(row: Row, leased: bool) -> Summary:
    """An index row as a summary, given whether the run's lease is held now."""
    status = RunStatus(row[2])
    running = leased and status not in (RunStatus.COMPLETED, RunStatus.CORRUPT)
    return Summary(
        run_id=row[0],
        status=RunStatus.RUNNING if running else status,
        steps=row[3],
        model_calls=row[4],
        started_at=row[5],
        last_activity=row[6],
        last_seq=row[7],
        waiting_on="" if running else row[8],
        error="" if running else row[9],
        input=row[10],
        answer=row[11],
        leased=leased,
        pending=() if running else tuple(Pending.from_dict(p) for p in row[12]),
        indeterminate=None if running else row[13],
        signals=row[14],
    )


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
        data = b"".join((_dumps(r) + "\n").encode() for r in rows)
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

    def read(self) -> tuple[dict[str, Row], int]:
        """The last row of each run, and how many rows the log holds."""
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
                body = b"".join((_dumps(r) + "\n").encode() for r in rows.values())
                with contextlib.suppress(OSError):  # a full disk keeps the long log
                    replace_in(dfd, _INDEX, body)
            finally:
                os.close(lock)


def _rows(data: bytes) -> tuple[dict[str, Row], int]:
    body = data[: data.rfind(b"\n") + 1]
    try:  # one parse of the whole log is twice as fast as a parse per line
        values = json.loads(b"[" + body[:-1].replace(b"\n", b",") + b"]") if body else []
    except ValueError:
        values = _lines(body)  # a damaged row: skip just that one
    rows: dict[str, Row] = {}
    for row in values:
        if isinstance(row, list) and len(row) >= 15 and isinstance(row[0], str):
            rows[row[0]] = row
    return rows, len(values)
