"""The journal store: the Store protocol and FileStore, one fsynced JSONL file per run."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import json
import os
import re
import socket
import stat
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
from .record import LineError, Record, decode_line, encode_line, is_whole_record, line_seq

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# O_NONBLOCK: a FIFO named like a journal must not hang a reader (the mode is checked after
# open); it changes nothing for regular files.
_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_O_WRITE = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

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

    def lease(self, run_id: str) -> AbstractContextManager[Lease]: ...

    def is_leased(self, run_id: str) -> bool: ...

    def save_outcome(self, run_id: str, outcome: Outcome) -> None: ...

    def last_outcome(self, run_id: str) -> Outcome | None: ...


def split_journal(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of ``data`` and the byte length they span.

    A torn tail is left out: it was never acknowledged. That is a final piece without its
    newline, unless the piece is a whole record whose crc matches (an fsynced record whose
    newline was lost or flipped: it is kept, and the next append writes the newline); and a
    final line that ends in NUL bytes (a block a power loss left zero-filled). A NUL anywhere
    else is not a tear: the line is reported as corrupt when it is parsed.
    """
    lines = data.split(b"\n")
    piece = lines.pop()
    good = len(data) - len(piece)
    if piece:
        for whole in (piece, piece[:-1]):
            if is_whole_record(whole):
                lines.append(whole)
                return lines, good + len(whole)
    if lines and lines[-1].endswith(b"\0"):
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


class Lease:
    """A held run lease. Released when its ``with`` block ends, unless :meth:`keep_until` handed
    it to a step that is still running: then it is released when that step really ends, so no
    other runner can start the run while the step can still act."""

    def __init__(self, run_id: str, owner: str, fd: int, epoch: int = 0) -> None:
        self.run_id = run_id
        self.owner = owner
        self.epoch = epoch
        self._fd: int | None = fd
        self.kept = False

    def keep_until(self, step: asyncio.Future[Any]) -> None:
        """Hold the lease past the ``with`` block until ``step`` is done."""
        self.kept = True
        step.add_done_callback(lambda _: self.release())

    def release(self) -> None:
        """Free the lease (idempotent): an empty lock file means free; the lock goes with
        the close."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)


class FileStore:
    """The embedded store: ``<root>/<run_id>.jsonl``, leases under ``.leases/``, outcomes
    under ``.outcomes/``, the worker's failure counts under ``.worker/``. Safe for several
    processes at once (flock).

    Nothing it writes leaves the root: the folders and the files in them are opened relative
    to the root without following symlinks, and a folder or file that is a symlink is refused
    with a StoreError. An entry that is not a regular file (a directory or a FIFO named like a
    journal) makes that one run corrupt, never the store: it is never read or blocked on."""

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
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                _fsync_dir(self.root.parent)
            except OSError as e:
                raise StoreError(f"cannot create the store {self.root}: {e.strerror}") from None
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
            fd = self._open_regular(path, _O_READ)
        except FileNotFoundError:
            return [], offset
        try:
            size = os.fstat(fd).st_size
            if size < offset:
                raise StoreError(f"journal of run {run_id!r} shrank below {offset} bytes")
            data = _pread_all(fd, size - offset, offset)
        finally:
            os.close(fd)
        lines, good = split_journal(data)
        if good and data[good - 1 : good] != b"\n":
            # A kept final record without its newline: read it again once the newline is
            # there, so the offset always ends on a line boundary.
            good -= len(lines.pop())
        return parse_lines(run_id, lines, next_seq, next_seq), offset + good

    def run_ids(self) -> list[str]:
        """Every run in the store, sorted."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise StoreError(f"cannot list the store {self.root}: {e.strerror}") from None
        ids = [n[:-6] for n in names if n.endswith(".jsonl")]
        return sorted(i for i in ids if valid_run_id(i))

    def _read(self, run_id: str) -> bytes | None:
        path = self._journal(run_id)
        try:
            fd = self._open_regular(path, _O_READ)
        except FileNotFoundError:
            return None
        try:
            return _pread_all(fd, os.fstat(fd).st_size, 0)
        except OSError as e:
            raise StoreError(f"cannot read {path}: {e.strerror}") from None
        finally:
            os.close(fd)

    def _open_regular(
        self, path: str, flags: int, mode: int = 0o644, *, dir_fd: int | None = None
    ) -> int:
        """Open a file that must be a regular file (``path`` relative to ``dir_fd`` when
        given, a folder of the root); FileNotFoundError passes through, every other problem
        is a StoreError naming the file."""
        shown = path if dir_fd is None else _fd_path(dir_fd, path)
        try:
            fd = os.open(path, flags, mode, dir_fd=dir_fd)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise self._open_error(shown, e) from None
        try:
            kind = stat.S_IFMT(os.fstat(fd).st_mode)
        except OSError as e:
            os.close(fd)
            raise self._open_error(path, e) from None
        if kind != stat.S_IFREG:
            os.close(fd)
            what = _KINDS.get(kind, "not a regular file")
            raise StoreError(f"{shown} is {what}, not a store file: move it out of the store")
        return fd

    def _open_error(self, shown: str | Path, e: OSError) -> StoreError:
        if e.errno == errno.ELOOP:
            return StoreError(f"{shown} is a symlink; store files must be regular files")
        if e.errno == errno.EISDIR:
            return StoreError(
                f"{shown} is a directory, not a journal file: move it out of the store"
            )
        if e.errno == errno.ENOENT:
            return StoreError(f"store directory {self.root} does not exist")
        return StoreError(f"cannot open {shown}: {e.strerror}")

    # -- appending ---------------------------------------------------------------------------

    def append(self, run_id: str, record: Record, *, check: Check | None = None) -> Record:
        """Append ``record`` with the next seq; durable when it returns.

        ``check(records)`` runs under the journal's exclusive lock and may raise to refuse the
        append; a refused append changes nothing. A new journal appears only with its first
        complete record (written aside, fsynced, then linked into place)."""
        path = self._journal(run_id)
        while True:
            try:
                fd = self._open_regular(path, _O_WRITE)
                break
            except FileNotFoundError:
                pass
            if check is not None:
                check([])
            line = self._encode(record, 1)
            if self._create(path, line):
                return Record(1, record.type, record.step, record.kind, record.data, record.at)
            # Another process created the journal meanwhile: append to it as usual.
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if check is not None:
                data = _pread_all(fd, size, 0)
                lines, good = split_journal(data)
                records = parse_lines(run_id, lines)
                check(records)
                last = records[-1].seq if records else 0
                newline = good > 0 and data[good - 1 : good] != b"\n"
            else:
                good, last, newline = self._last_seq(run_id, fd, size)
            line = self._encode(record, last + 1)
            if newline:
                line = b"\n" + line  # the kept final record lost its newline: restore it
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
        finally:
            os.close(fd)
        return Record(last + 1, record.type, record.step, record.kind, record.data, record.at)

    @staticmethod
    def _encode(record: Record, seq: int) -> bytes:
        try:
            return encode_line(record, seq)
        except ValueError as e:
            raise StoreError(f"cannot record {record.type} {record.step!r}: {e}") from None

    def _create(self, path: str, line: bytes) -> bool:
        """Make a new journal holding ``line``: write it to a temp file, fsync, link it into
        place, fsync the folder. False when the journal already exists (nothing written)."""
        tmp = f"{self._prefix}.{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}.new"
        try:
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
            )
        except OSError as e:
            raise self._open_error(tmp, e) from None
        try:
            try:
                _write_all(fd, line)
            except OSError as e:
                raise StoreError(f"cannot create {path}: {e.strerror}") from None
            try:
                os.fsync(fd)
            except OSError as e:
                raise DurabilityError(
                    f"fsync of {tmp} failed ({e.strerror}); nothing was recorded"
                ) from None
            os.close(fd)
            fd = -1
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError as e:
                raise StoreError(f"cannot create {path}: {e.strerror}") from None
            _fsync_dir(self.root)
            return True
        finally:
            if fd >= 0:
                os.close(fd)
            with suppress(OSError):
                os.unlink(tmp)

    def _write(self, path: str, fd: int, line: bytes, at: int) -> None:
        try:
            n = os.pwrite(fd, line, at)
        except OSError as e:
            _truncate_quietly(fd, at)
            raise StoreError(f"write to {path} failed: {e.strerror}") from None
        if n != len(line):
            _truncate_quietly(fd, at)
            raise StoreError(f"short write to {path} ({n} of {len(line)} bytes); cut back")

    def _last_seq(self, run_id: str, fd: int, size: int) -> tuple[int, int, bool]:
        """(length to keep, seq of the last complete line, whether that line lacks its
        newline), reading only the file's tail."""
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
            keep = start + begin + good
            if not lines:
                return keep, 0, False
            newline = buf[begin + good - 1 : begin + good] != b"\n"
            try:
                seq = line_seq(lines[-1])
            except LineError as e:
                lineno = _count_lines(fd, keep)
                raise CorruptJournalError(run_id, lineno, str(e)) from None
            return keep, seq, newline

    # -- leases ------------------------------------------------------------------------------

    @contextmanager
    def lease(self, run_id: str) -> Iterator[Lease]:
        """Hold the run's lease while executing it. Raises RunBusyError at once when anyone
        (another process, or another lease() in this one) holds it. Not re-entrant."""
        name = f"{check_run_id(run_id)}.lock"
        with self._folder(LEASES_DIR, create=True) as dfd:
            assert dfd is not None
            try:
                fd = self._open_regular(name, _O_WRITE | os.O_CREAT, dir_fd=dfd)
            except FileNotFoundError as e:
                raise self._open_error(f"{LEASES_DIR}/{name}", e) from None
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
        except BaseException:
            os.close(fd)  # not ours: leave the holder's name as it is
            raise
        lease = Lease(run_id, f"{socket.gethostname()}:{os.getpid()}", fd)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        try:
            os.ftruncate(fd, 0)
            _write_all(fd, json.dumps(holder).encode())
        except OSError as e:
            lease.release()
            raise StoreError(
                f"cannot take the lease of run {run_id!r} in {self.root}: {e.strerror}"
            ) from None
        try:
            yield lease
        finally:
            if not lease.kept:
                lease.release()

    def is_leased(self, run_id: str) -> bool:
        """True while anyone holds the run's lease."""
        name = f"{check_run_id(run_id)}.lock"
        try:
            with self._folder(LEASES_DIR, create=False) as dfd:
                if dfd is None:
                    return False
                if os.stat(name, dir_fd=dfd, follow_symlinks=False).st_size == 0:
                    return False  # released cleanly (a holder writes its name at once)
                fd = self._open_regular(name, _O_READ, dir_fd=dfd)
        except (OSError, StoreError):
            return False  # no lock file, or one no runner could have taken (see lease())
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
        try:
            data = self._read_file(LEASES_DIR, f"{run_id}.lock")
            return dict(json.loads(data or b""))
        except (StoreError, ValueError, TypeError):
            return None

    # -- outcomes and the worker's failure counts ----------------------------------------------

    def save_outcome(self, run_id: str, outcome: Outcome) -> None:
        """Write the last attempt's outcome atomically."""
        data = json.dumps(outcome.to_dict(), ensure_ascii=False).encode()
        self._write_file(OUTCOMES_DIR, f"{check_run_id(run_id)}.json", data)

    def last_outcome(self, run_id: str) -> Outcome | None:
        """The last attempt's outcome; None when there is none or it does not parse (it is
        informational: replay never reads it)."""
        name = f"{check_run_id(run_id)}.json"
        try:
            data = self._read_file(OUTCOMES_DIR, name)
            return None if data is None else Outcome.from_dict(json.loads(data))
        except (StoreError, ValueError, KeyError, TypeError):
            return None

    def read_failures(self, run_id: str) -> dict[str, Any] | None:
        """The worker's failure bookkeeping of the run (shared by every worker on the store),
        or None when there is none or it does not parse (it is advisory)."""
        name = f"{check_run_id(run_id)}.json"
        try:
            data = self._read_file(WORKER_DIR, name)
            value = None if data is None else json.loads(data)
        except (StoreError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def write_failures(self, run_id: str, failures: dict[str, Any]) -> None:
        """Replace the run's failure bookkeeping atomically."""
        self._write_file(WORKER_DIR, f"{check_run_id(run_id)}.json", json.dumps(failures).encode())

    def clear_failures(self, run_id: str) -> bool:
        """Forget the run's failures; True when there were some."""
        name = f"{check_run_id(run_id)}.json"
        with self._folder(WORKER_DIR, create=False) as dfd:
            if dfd is None:
                return False
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                return False
            except OSError as e:
                raise StoreError(
                    f"cannot remove {self.root}/{WORKER_DIR}/{name}: {e.strerror}"
                ) from None
        return True

    # -- the folders under the root ------------------------------------------------------------

    @contextmanager
    def _folder(self, name: str, *, create: bool) -> Iterator[int | None]:
        """An fd of ``<root>/<name>``, opened without following a symlink (None when it is
        missing and ``create`` is False). A symlink or a non-directory is a StoreError: files
        are only ever written inside the root."""
        try:
            root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise self._open_error(self.root, e) from None
        try:
            try:
                fd = os.open(name, _O_DIR, dir_fd=root)
            except FileNotFoundError:
                if not create:
                    fd = None
                else:
                    try:
                        os.mkdir(name, 0o755, dir_fd=root)
                        os.fsync(root)
                    except FileExistsError:
                        pass
                    except OSError as e:
                        raise StoreError(
                            f"cannot create {self.root}/{name}: {e.strerror}"
                        ) from None
                    fd = self._open_folder(name, root)
            except OSError as e:
                raise self._folder_error(name, e) from None
        finally:
            os.close(root)
        try:
            yield fd
        finally:
            if fd is not None:
                os.close(fd)

    def _open_folder(self, name: str, root: int) -> int:
        try:
            return os.open(name, _O_DIR, dir_fd=root)
        except OSError as e:
            raise self._folder_error(name, e) from None

    def _folder_error(self, name: str, e: OSError) -> StoreError:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            return StoreError(
                f"{self.root}/{name} is a symlink or not a directory; the store only writes "
                "inside its own folder: replace it with a plain directory"
            )
        return StoreError(f"cannot open {self.root}/{name}: {e.strerror}")

    def _read_file(self, folder: str, name: str) -> bytes | None:
        """A small file under ``<root>/<folder>``; None when it (or the folder) is missing."""
        with self._folder(folder, create=False) as dfd:
            if dfd is None:
                return None
            try:
                fd = self._open_regular(name, _O_READ, dir_fd=dfd)
            except FileNotFoundError:
                return None
        try:
            return _pread_all(fd, os.fstat(fd).st_size, 0)
        except OSError as e:
            raise StoreError(f"cannot read {self.root}/{folder}/{name}: {e.strerror}") from None
        finally:
            os.close(fd)

    def _write_file(self, folder: str, name: str, data: bytes) -> None:
        """Replace ``<root>/<folder>/<name>`` atomically (see :func:`write_atomically`)."""
        with self._folder(folder, create=True) as dfd:
            assert dfd is not None
            try:
                _replace_in(dfd, name, data)
            except OSError as e:
                raise StoreError(
                    f"cannot write {self.root}/{folder}/{name}: {e.strerror}"
                ) from None


LEASES_DIR = ".leases"
OUTCOMES_DIR = ".outcomes"
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


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
    then the folder fsynced. Creates the folder when it is missing. On any failure the temp
    file is removed and the old file is left whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _replace_in(fd, path.name, data)
    finally:
        os.close(fd)


def _replace_in(dir_fd: int, name: str, data: bytes) -> None:
    """write_atomically inside the folder ``dir_fd``; never follows a symlink."""
    tmp = f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644, dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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


def _fd_path(dir_fd: int, name: str) -> str:
    """The path of ``name`` in the open folder ``dir_fd``, for messages."""
    try:
        return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
    except OSError:
        return name


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
