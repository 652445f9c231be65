"""The journal store: the Store protocol and FileStore, one fsynced JSONL file per run."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any, Protocol

from .errors import (
    CorruptJournalError,
    DurabilityError,
    InvalidRunIdError,
    RunBusyError,
    StoreError,
)
from .outcome import Outcome
from .record import LineError, Record, decode_line, encode_line, line_seq

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
_O_WRITE = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC

Check = Callable[[list[Record]], None]


def valid_run_id(run_id: object) -> bool:
    """True for 1-128 ASCII letters, digits, ``_``, ``.``, ``-`` starting with a letter or digit."""
    return isinstance(run_id, str) and run_id.isascii() and _RUN_ID.fullmatch(run_id) is not None


def check_run_id(run_id: object) -> str:
    """Return ``run_id`` or raise InvalidRunIdError, before anything touches the disk."""
    if not valid_run_id(run_id):
        raise InvalidRunIdError(run_id)
    assert isinstance(run_id, str)
    return run_id


class Store(Protocol):
    """Where journals live. ``append`` is durable when it returns."""

    def load(self, run_id: str) -> list[Record]: ...

    def append(self, run_id: str, record: Record, *, check: Check | None = None) -> Record: ...

    def run_ids(self) -> list[str]: ...

    def lease(self, run_id: str) -> AbstractContextManager[None]: ...

    def is_leased(self, run_id: str) -> bool: ...

    def save_outcome(self, run_id: str, outcome: Outcome) -> None: ...

    def last_outcome(self, run_id: str) -> Outcome | None: ...


def split_journal(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of ``data`` and the byte length they span.

    A torn tail is left out: a final piece without its newline, and a final line holding NUL
    bytes (a block a power loss left zero-filled). Neither was ever acknowledged.
    """
    lines = data.split(b"\n")
    good = len(data) - len(lines.pop())
    if lines and b"\0" in lines[-1]:
        good -= len(lines.pop()) + 1
    return lines, good


def parse_lines(
    run_id: str, lines: list[bytes], first_seq: int = 1, first_line: int = 1
) -> list[Record]:
    """Decode lines, checking crcs and that seqs count up from ``first_seq``."""
    records: list[Record] = []
    append = records.append
    expected = first_seq
    for lineno, line in enumerate(lines, first_line):
        try:
            rec = decode_line(line)
        except LineError as e:
            raise CorruptJournalError(run_id, lineno, str(e)) from None
        if rec.seq != expected:
            raise CorruptJournalError(run_id, lineno, f"seq {rec.seq} where {expected} was due")
        expected += 1
        append(rec)
    return records


class FileStore:
    """The embedded store: ``<root>/<run_id>.jsonl``, leases under ``.leases/``, outcomes
    under ``.outcomes/``. Safe for several processes at once (flock)."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {self.root} is not a directory")
        if not self.root.is_dir():
            if not create:
                raise StoreError(
                    f"no store at {self.root}: pass --store DIR (or set AGENTRUN_STORE), "
                    "or submit a run to create it"
                )
            self.root.mkdir(parents=True, exist_ok=True)
            _fsync_dir(self.root.parent)
        self._prefix = os.path.join(self.root, "")  # str paths: pathlib costs µs per append

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    def path(self, run_id: str) -> Path:
        """The journal file of ``run_id`` (the id is checked first)."""
        return Path(self._journal(run_id))

    def _journal(self, run_id: str) -> str:
        return f"{self._prefix}{check_run_id(run_id)}.jsonl"

    # -- reading -----------------------------------------------------------------------------

    def load(self, run_id: str) -> list[Record]:
        """Every record of the run, [] for an unknown run. A torn tail is ignored."""
        data = self._read(run_id)
        if data is None:
            return []
        lines, _ = split_journal(data)
        return parse_lines(run_id, lines)

    def load_since(self, run_id: str, offset: int, next_seq: int) -> tuple[list[Record], int]:
        """The records after byte ``offset`` (whose first seq must be ``next_seq``) and the new
        offset: a tail reader for supervisors. A file shorter than ``offset`` raises StoreError
        (it was replaced: load it again)."""
        path = self._journal(run_id)
        try:
            fd = os.open(path, _O_READ)
        except FileNotFoundError:
            return [], offset
        except OSError as e:
            raise self._open_error(path, e) from None
        try:
            size = os.fstat(fd).st_size
            if size < offset:
                raise StoreError(f"journal of run {run_id!r} shrank below {offset} bytes")
            data = _pread_all(fd, size - offset, offset)
        finally:
            os.close(fd)
        lines, good = split_journal(data)
        return parse_lines(run_id, lines, next_seq, next_seq), offset + good

    def run_ids(self) -> list[str]:
        """Every run in the store, sorted."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        ids = [n[:-6] for n in names if n.endswith(".jsonl")]
        return sorted(i for i in ids if valid_run_id(i))

    def _read(self, run_id: str) -> bytes | None:
        path = self._journal(run_id)
        try:
            fd = os.open(path, _O_READ)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self._open_error(path, e) from None
        try:
            return _pread_all(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def _open_error(self, path: str | Path, e: OSError) -> StoreError:
        if e.errno == errno.ELOOP:
            return StoreError(f"{path} is a symlink; journals must be regular files")
        if e.errno == errno.ENOENT:
            return StoreError(f"store directory {self.root} does not exist")
        return StoreError(f"cannot open {path}: {e.strerror}")

    # -- appending ---------------------------------------------------------------------------

    def append(self, run_id: str, record: Record, *, check: Check | None = None) -> Record:
        """Append ``record`` with the next seq; durable when it returns.

        ``check(records)`` runs under the journal's exclusive lock and may raise to refuse the
        append; a refused append changes nothing (not even creating the file)."""
        path = self._journal(run_id)
        created = False
        try:
            fd = os.open(path, _O_WRITE)
        except FileNotFoundError:
            if check is not None:
                check([])
            try:
                fd = os.open(path, _O_WRITE | os.O_CREAT, 0o644)
            except OSError as e:
                raise self._open_error(path, e) from None
            created = True
        except OSError as e:
            raise self._open_error(path, e) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if check is not None:
                lines, good = split_journal(_pread_all(fd, size, 0))
                records = parse_lines(run_id, lines)
                check(records)
                last = records[-1].seq if records else 0
            else:
                good, last = self._last_seq(run_id, fd, size)
            try:
                line = encode_line(record, last + 1)
            except ValueError as e:
                raise StoreError(f"cannot record {record.type} {record.step!r}: {e}") from None
            if good < size:
                os.ftruncate(fd, good)  # cut the torn tail; made durable by the fsync below
            self._write(path, fd, line, good)
            try:
                os.fsync(fd)
            except OSError as e:
                raise DurabilityError(
                    f"fsync of {path} failed ({e.strerror}); the record may be lost: "
                    "reload the run from disk, do not retry the append"
                ) from None
            if created:
                _fsync_dir(self.root)
        finally:
            os.close(fd)
        return Record(last + 1, record.type, record.step, record.kind, record.data, record.at)

    def _write(self, path: str, fd: int, line: bytes, at: int) -> None:
        try:
            n = os.pwrite(fd, line, at)
        except OSError as e:
            _truncate_quietly(fd, at)
            raise StoreError(f"write to {path} failed: {e.strerror}") from None
        if n != len(line):
            _truncate_quietly(fd, at)
            raise StoreError(f"short write to {path} ({n} of {len(line)} bytes); cut back")

    def _last_seq(self, run_id: str, fd: int, size: int) -> tuple[int, int]:
        """(length to keep, seq of the last complete line), reading only the file's tail."""
        chunk = 4096
        while True:
            start = max(0, size - chunk)
            buf = _pread_all(fd, size - start, start)
            # Three newlines from the end give two whole lines: enough even when the last
            # complete one is a NUL-filled torn tail. Before that, the first piece may be cut.
            cut = len(buf)
            for _ in range(3):
                cut = buf.rfind(b"\n", 0, cut)
                if cut < 0:
                    break
            if cut < 0 and start > 0:
                chunk *= 4
                continue
            begin = cut + 1  # 0 when the chunk holds the whole file
            lines, good = split_journal(buf[begin:])
            if not lines:
                return start + begin + good, 0
            try:
                seq = line_seq(lines[-1])
            except LineError as e:
                lineno = _count_lines(fd, start + begin + good)
                raise CorruptJournalError(run_id, lineno, str(e)) from None
            return start + begin + good, seq

    # -- leases ------------------------------------------------------------------------------

    @contextmanager
    def lease(self, run_id: str) -> Iterator[None]:
        """Hold the run's lease while executing it. Raises RunBusyError at once when anyone
        (another process, or another lease() in this one) holds it. Not re-entrant."""
        path = self._lease_path(run_id)
        path.parent.mkdir(exist_ok=True)
        try:
            fd = os.open(path, _O_WRITE | os.O_CREAT, 0o644)
        except OSError as e:
            raise self._open_error(path, e) from None
        try:
            # A supervisor's is_leased() probe holds a shared lock for microseconds: retry.
            for attempt in range(3):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == 2:
                        raise RunBusyError(run_id, _holder_text(fd)) from None
                    time.sleep(0.002)
            holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(holder).encode(), 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)  # empty means free; the lock itself goes with the close
        finally:
            os.close(fd)

    def is_leased(self, run_id: str) -> bool:
        """True while anyone holds the run's lease."""
        path = self._lease_path(run_id)
        try:
            if os.stat(path).st_size == 0:
                return False  # released cleanly (a holder writes its name at once)
            fd = os.open(path, _O_READ)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False  # the holder died: its name is stale

    def lease_holder(self, run_id: str) -> dict[str, Any] | None:
        """Who holds the lease (pid, host, since), or None when it is free."""
        if not self.is_leased(run_id):
            return None
        path = self._lease_path(run_id)
        try:
            return dict(json.loads(path.read_bytes()))
        except (OSError, ValueError, TypeError):
            return None

    def _lease_path(self, run_id: str) -> Path:
        return self.root / ".leases" / f"{check_run_id(run_id)}.lock"

    # -- outcomes ----------------------------------------------------------------------------

    def save_outcome(self, run_id: str, outcome: Outcome) -> None:
        """Write the last attempt's outcome atomically."""
        data = json.dumps(outcome.to_dict(), ensure_ascii=False).encode()
        write_atomically(self._outcome_path(run_id), data)

    def last_outcome(self, run_id: str) -> Outcome | None:
        """The last attempt's outcome; None when there is none or it does not parse (it is
        informational: replay never reads it)."""
        path = self._outcome_path(run_id)
        try:
            return Outcome.from_dict(json.loads(path.read_bytes()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _outcome_path(self, run_id: str) -> Path:
        return self.root / ".outcomes" / f"{check_run_id(run_id)}.json"


WORKER_DIR = ".worker"  # the worker's per-run failure counts
# The per-run files of a store, by folder (the journal sits in the root itself).
_RUN_FILES = {".leases": ".lock", ".outcomes": ".json", WORKER_DIR: ".json"}


def run_of_path(root: Path, path: str | os.PathLike[str]) -> str | None:
    """The run a file of the store at ``root`` belongs to: its journal, lease, outcome or
    worker failure count; None for anything else (temp files included). ``root`` must be
    resolved (absolute), as the paths a file watcher reports are."""
    p = Path(path)
    name, parent = p.name, p.parent
    if name.startswith("."):
        return None
    if parent == root:
        suffix = ".jsonl"
    elif parent.parent == root and parent.name in _RUN_FILES:
        suffix = _RUN_FILES[parent.name]
    else:
        return None
    run_id = name[: -len(suffix)] if name.endswith(suffix) else ""
    return run_id if valid_run_id(run_id) else None


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old file or the new one, never
    a part: a temp file beside it (named per process and thread), fsynced, renamed over it,
    then the folder fsynced. Creates the folder when it is missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, _O_WRITE | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _pread_all(fd: int, n: int, offset: int) -> bytes:
    parts = []
    while n > 0:
        b = os.pread(fd, n, offset)
        if not b:
            break
        parts.append(b)
        n -= len(b)
        offset += len(b)
    return b"".join(parts)


def _count_lines(fd: int, upto: int) -> int:
    """The 1-based number of the last complete line ending at byte ``upto``."""
    return _pread_all(fd, upto, 0).count(b"\n")


def _truncate_quietly(fd: int, size: int) -> None:
    with suppress(OSError):
        os.ftruncate(fd, size)


def _holder_text(fd: int) -> str:
    try:
        h = json.loads(os.pread(fd, 4096, 0))
        return f"pid {h['pid']} on {h['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
