"""FileStore: the embedded store, one fsynced JSONL journal per run in one directory.

Layout under the root: ``<run>.jsonl`` (the journal: ``journals.py``), ``.leases/<run>.lock``
(a flock'ed file that exists while the lease is held: ``leases.py``), ``.attempts/<run>.jsonl``
(each attempt and its outcome: ``logs.py``), ``.summaries/`` (the status index ``agentrun ls``
reads: ``logs.py``, kept by ``summaries.py``), ``.worker/<run>.json`` (the workers' shared
failure counts: ``failures.py``), ``.workers/`` (one registration per worker: ``workers.py``)
and ``.notices/`` (each notice claimed, then marked sent: ``notices.py``). The change feed is
``feed.py``; every file is opened and moved through ``fs.py``. Safe for several processes at
once.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ...errors import (
    DurabilityError,
    LeaseLostError,
    RunConflictError,
    StoreError,
)
from ...fold import Summary
from ...ids import check_run_id, valid_run_id
from ...outcome import Outcome
from ...record import Record
from ...roster import NoticeRecord, WorkerInfo
from ..lines import parse_lines, split_journal
from ..protocol import Attempt, Check, Lease, default_owner
from . import logs
from . import workers as registry
from .failures import WORKER_DIR, FailureCounts
from .feed import change_feed
from .fs import (
    KINDS,
    O_READ,
    O_WRITE,
    StoreDir,
    fsync_dir,
    pread_all,
    truncate_quietly,
    write_all,
)
from .journals import JournalFiles, encode_all, last_seq, stored_all
from .leases import LEASES_DIR, FileLease, LeaseKeeper
from .logs import ATTEMPTS_DIR, OUTCOMES_DIR, SUMMARIES_DIR, AttemptLogs
from .notices import NOTICES_DIR, Notices
from .summaries import SummaryKeeper, Tip
from .workers import WORKERS_DIR

DEFAULT_TTL = 30.0


# The folders only a store holds (OUTCOMES_DIR: earlier versions'); any one of them, or a
# journal, makes a directory a store.
STORE_FOLDERS = (
    SUMMARIES_DIR,
    LEASES_DIR,
    ATTEMPTS_DIR,
    OUTCOMES_DIR,
    WORKER_DIR,
    WORKERS_DIR,
    NOTICES_DIR,
)


def is_store_dir(root: Path) -> bool:
    """Whether the directory ``root`` is a store: it holds a store's folder or a journal
    (``<run>.jsonl``). A directory that is not one is never written by a reader."""
    if any(os.path.lexists(root / name) for name in STORE_FOLDERS):
        return True
    try:
        with os.scandir(root) as entries:
            return any(
                e.name.endswith(".jsonl") and valid_run_id(e.name[: -len(".jsonl")])
                for e in entries
            )
    except OSError:
        return False


class FileStore:
    """The embedded store: runs in the directory ``root``. See the module docstring.

    Nothing it writes leaves the root (folders and the files in them are opened without
    following symlinks), and an entry that is not a regular file (a directory or a FIFO named
    like a journal) makes that one run corrupt, never the store. ``lease_ttl``: seconds a
    lease holder may go without renewing before another runner may break its lease."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        create: bool = True,
        lease_ttl: float = DEFAULT_TTL,
    ) -> None:
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
                fsync_dir(self.root.parent)
            except OSError as e:
                raise StoreError(f"cannot create the store {self.root}: {e.strerror}") from None
        if not is_store_dir(self.root):
            if not create:
                # A reader must not litter a directory that is not a store (--store /etc).
                raise StoreError(
                    f"no store at {self.root}: the directory holds no runs and no store "
                    "folders; pass --store DIR (or set AGENTRUN_STORE) naming a store"
                )
            # Made a store: a new store with no run yet is one to every later reader.
            try:
                os.mkdir(self.root / SUMMARIES_DIR, 0o755)
                fsync_dir(self.root)
            except FileExistsError:
                pass
            except OSError as e:
                raise StoreError(f"cannot create the store {self.root}: {e.strerror}") from None
        if lease_ttl <= 0:
            raise ValueError("lease_ttl must be > 0")
        self.lease_ttl = lease_ttl
        self.dir = StoreDir(self.root)
        self._prefix = self.dir.prefix  # str paths: pathlib costs µs per append
        self.journals = JournalFiles(self.dir)
        self.attempt_logs = AttemptLogs(self.dir)

        def end(lease: FileLease, ended: str) -> None:
            self._end_attempt(lease, ended, None)

        self.leases = LeaseKeeper(self.journals, self.attempt_logs, lease_ttl, end)
        self.keeper = SummaryKeeper(self.journals, self.attempt_logs, self.leases)
        self._notices = Notices(self.dir)
        self._failures = FailureCounts(self.dir)
        self._tails: dict[str, tuple[int, int, int]] = {}  # load_since: run -> (seq, offset, ino)

    leases_die_with_holder = True  # a flock: the kernel holds it exactly while its holder lives

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    @property
    def description(self) -> str:
        """Where the store is, for messages."""
        return str(self.root)

    @property
    def directory(self) -> Path | None:
        """The store's root."""
        return self.root

    def path(self, run_id: str) -> Path:
        """The journal file of ``run_id`` (the id is checked first)."""
        return Path(self.journals.path(run_id))

    def close(self) -> None:
        """Close the summary index's files (every other file is opened per call)."""
        self.keeper.index.close()

    # -- reading -----------------------------------------------------------------------------

    def load(self, run_id: str) -> list[Record]:
        """Every record of the run, [] for an unknown run. A torn tail is ignored."""
        return self.journals.load(run_id)

    def load_since(self, run_id: str, after_seq: int) -> list[Record]:
        """The records with seq > ``after_seq``. A reader that follows a run (the TUI, ``show
        --follow``) reads only the new bytes: the store remembers where each run's last read
        ended."""
        path = self.journals.path(run_id)
        try:
            fd = self.dir.open_regular(path, O_READ)
        except FileNotFoundError:
            return []
        try:
            st = os.fstat(fd)
            seq, offset, ino = self._tails.get(run_id, (0, 0, -1))
            if seq != after_seq or ino != st.st_ino or st.st_size < offset:
                seq, offset = 0, 0  # not where we left off: read the file from the start
            data = pread_all(fd, st.st_size - offset, offset)
        finally:
            os.close(fd)
        lines, good = split_journal(data, offset)
        if good and data[good - 1 : good] != b"\n":
            good -= len(lines.pop())  # a final record without its newline: read it again
        records = parse_lines(run_id, lines, seq + 1, seq + 1)
        last = records[-1].seq if records else seq
        self._tails[run_id] = (last, offset + good, st.st_ino)
        return [r for r in records if r.seq > after_seq]

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

    # -- appending ---------------------------------------------------------------------------

    def append(
        self,
        run_id: str,
        record: Record,
        *,
        check: Check | None = None,
        lease: Lease | None = None,
        since: int = 0,
        sync: bool = True,
    ) -> Record:
        """Append ``record`` with the next seq; durable when it returns (``sync=False``: once
        the next synced append of the run returns).

        ``check(records)`` gets the records with seq > ``since`` under the journal's exclusive
        lock and may raise to refuse the append; a refused append changes nothing. ``lease``
        fences the append: if it is no longer current, LeaseLostError and nothing written. A
        new journal appears only with its first complete record (written aside, fsynced,
        linked into place)."""
        return self._append(run_id, (record,), check, lease, since, sync)[0]

    def append_many(
        self,
        run_id: str,
        records: Sequence[Record],
        *,
        check: Check | None = None,
        lease: Lease | None = None,
        since: int = 0,
        sync: bool = True,
    ) -> list[Record]:
        """Append ``records`` with consecutive seqs in one write and one fsync (a read step's
        start travels with its result). A crash may keep a prefix of them, each line whole
        or cut off as a torn tail; otherwise as :meth:`append`."""
        if not records:
            raise ValueError("append_many needs at least one record")
        return self._append(run_id, tuple(records), check, lease, since, sync)

    def _append(
        self,
        run_id: str,
        records: tuple[Record, ...],
        check: Check | None,
        lease: Lease | None,
        since: int,
        sync: bool,
    ) -> list[Record]:
        path = self.journals.path(run_id)
        while True:
            try:
                fd = os.open(path, O_WRITE)
                break
            except FileNotFoundError:
                pass
            except OSError as e:
                raise self.dir.open_error(path, e) from None
            if check is not None:
                check([])
            _fence(lease)
            data = encode_all(records, 1)
            if self._create(path, data):
                stored = stored_all(records, 1)
                with suppress(OSError):
                    st = os.stat(path, follow_symlinks=False)
                    self.keeper.created(run_id, stored, data, st)
                return stored
            # Another process created the journal meanwhile: append to it as usual.
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # a FIFO or socket named like a journal
                what = KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
                raise StoreError(f"{path} is {what}, not a store file: move it out of the store")
            last, good, newline, tip = self._catch_up(run_id, fd, st, check, since)
            _fence(lease)
            data = encode_all(records, last + 1)
            if newline:
                data = b"\n" + data  # the kept final record lost its newline: restore it
            if good < st.st_size:
                os.ftruncate(fd, good)  # cut the torn tail; made durable by the fsync below
            self._write(path, fd, data, good)
            stored = stored_all(records, last + 1)
            row = self.keeper.appended(
                run_id, tip, stored, data, fd, st.st_ino, leased=lease is not None, row=sync
            )
            if sync:
                try:
                    os.fsync(fd)
                except OSError as e:
                    self.keeper.tip(run_id)  # forget it: the disk may not hold what it says
                    raise DurabilityError(
                        f"fsync of {path} failed ({e.strerror}); the record may be lost: "
                        "reload the run from disk, do not retry the append"
                    ) from None
                # The summary row only once the journal durably holds what it says: a row
                # written before the fsync could outlive records a crash then lost. (An
                # unsynced append leaves it to the next synced one.)
                if row is not None:
                    self.keeper.write_row(row)
        finally:
            os.close(fd)
        return stored

    def _catch_up(
        self, run_id: str, fd: int, st: os.stat_result, check: Check | None, since: int
    ) -> tuple[int, int, bool, Tip | None]:
        """Under the journal's lock: ``(last seq, length to keep, whether the kept final
        record lacks its newline, what this process knows of the run)``, reading as little
        as it can: nothing when the journal is as this process's last append left it; only
        the bytes others appended since; the tail alone when there is no check to feed.
        ``check`` gets the records with seq > ``since`` (and may raise)."""
        tip = self.keeper.tip(run_id)
        size = st.st_size
        if tip is not None and not tip.follows(fd, st):
            tip = None
        if tip is not None and (check is None or tip.seq <= since):
            start, seq0 = tip.offset, tip.seq
        elif check is not None:
            # The check needs records the tip has folded already: read the whole journal and
            # fold it afresh (extending the tip would fold those records in twice).
            start, seq0, tip = 0, 0, None
        else:
            good, last, newline = last_seq(run_id, fd, size)
            return last, good, newline, None
        if size == start:  # as this process left it: nothing to read
            if check is not None:
                check([])
            return seq0, size, False, tip
        data = pread_all(fd, size - start, start)
        lines, rel = split_journal(data, start)
        new = parse_lines(run_id, lines, seq0 + 1, seq0 + 1)
        if check is not None:
            check([r for r in new if r.seq > since] if since else new)
        if tip is None:  # read from the start: the whole journal, folded afresh
            tip = self.keeper.fresh_tip(new)
        else:
            tip.extend(new)
        last = new[-1].seq if new else seq0
        newline = rel > 0 and data[rel - 1 : rel] != b"\n"
        return last, start + rel, newline, tip

    def _create(self, path: str, line: bytes) -> bool:
        """Make a new journal holding ``line`` (one or more lines): write it to a temp file,
        fsync, link it into place, fsync the folder. False when the journal already exists
        (nothing written)."""
        tmp = f"{self._prefix}.{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}.new"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o644)
        except OSError as e:
            raise self.dir.open_error(tmp, e) from None
        try:
            try:
                write_all(fd, line)
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
            fsync_dir(self.root)
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
            truncate_quietly(fd, at)
            raise StoreError(f"write to {path} failed: {e.strerror}") from None
        if n != len(line):
            truncate_quietly(fd, at)
            raise StoreError(f"short write to {path} ({n} of {len(line)} bytes); cut back")

    # -- summaries (stores/file_summaries.py) ---------------------------------------------------

    def summaries(self) -> list[Summary]:
        """Every run's status line. Reads the index, one directory listing (none when the
        root did not change) and the held leases; rebuilds (and re-indexes) only the runs
        whose row is missing or behind."""
        return self.keeper.summaries()

    def summary(self, run_id: str) -> Summary | None:
        """One run's status line (from its journal: a single run is cheap to fold)."""
        return self.keeper.summary(run_id)

    # -- leases (stores/file_leases.py) --------------------------------------------------------

    @contextmanager
    def lease(self, run_id: str, *, owner: str | None = None) -> Iterator[FileLease]:
        """Hold the run's lease while executing it; each acquisition begins an attempt.
        Raises RunBusyError at once when anyone (another process, or another lease() in this
        one) holds it. Not re-entrant."""
        lease = self.leases.acquire(check_run_id(run_id), owner or default_owner())
        try:
            yield lease
        finally:
            if not lease.kept:
                lease.release()

    def is_leased(self, run_id: str) -> bool:
        """True while anyone holds the run's lease."""
        return self.leases.probe(check_run_id(run_id)) is not None

    def lease_holder(self, run_id: str) -> dict[str, Any] | None:
        """Who holds the lease (owner, epoch, pid, host, since), or None when it is free."""
        return self.leases.probe(check_run_id(run_id))

    # -- attempts and outcomes ---------------------------------------------------------------

    def save_outcome(self, run_id: str, outcome: Outcome, *, lease: Lease | None = None) -> None:
        """End the current attempt with ``outcome`` (fsynced), and update the run's summary.
        With ``lease``, a lease that is no longer current raises LeaseLostError."""
        check_run_id(run_id)
        if isinstance(lease, FileLease):
            lease.check()
            self._end_attempt(lease, str(outcome.status), outcome)
        else:
            epoch = lease.epoch if lease is not None else self._last_epoch(run_id)
            line = logs.end_line(epoch, time.time(), str(outcome.status), outcome)
            self._write_end(run_id, line, outcome)

    def _end_attempt(self, lease: FileLease, ended: str, outcome: Outcome | None) -> None:
        lease.ended = True
        line = logs.end_line(lease.epoch, time.time(), ended, outcome)
        self._write_end(lease.run_id, line, outcome)

    def _write_end(self, run_id: str, line: bytes, outcome: Outcome | None) -> None:
        with self.journals.locked(run_id) as locked:  # a row must not race a signal's
            self.attempt_logs.append(run_id, line, sync=True)
            if locked:
                self.keeper.ended(run_id, outcome)

    def _last_epoch(self, run_id: str) -> int:
        return self.attempt_logs.next_epoch(run_id) - 1

    def last_outcome(self, run_id: str) -> Outcome | None:
        """The last attempt's outcome; None when there is none or it does not parse (it is
        informational: replay never reads it)."""
        return self.attempt_logs.last_outcome(check_run_id(run_id))

    def attempts(self, run_id: str) -> list[Attempt]:
        """Every attempt of the run, oldest first."""
        check_run_id(run_id)
        try:
            data = self.attempt_logs.read(run_id)
        except StoreError:
            return []
        holder = self.leases.probe(run_id)
        epoch = holder.get("epoch") if holder else None
        return logs.read_attempts(data, epoch if isinstance(epoch, int) else None)

    # -- the workers' failure counts -----------------------------------------------------------

    def read_failures(self, run_id: str) -> dict[str, Any] | None:
        """The worker's failure bookkeeping of the run (shared by every worker on the store),
        or None when there is none or it does not parse (it is advisory)."""
        return self._failures.read(check_run_id(run_id))

    def write_failures(self, run_id: str, failures: dict[str, Any]) -> None:
        """Replace the run's failure bookkeeping atomically."""
        self._failures.write(check_run_id(run_id), failures)

    def clear_failures(self, run_id: str) -> bool:
        """Forget the run's failures; True when there were some."""
        return self._failures.clear(check_run_id(run_id))

    # -- the workers' registry (see workers.py) ---------------------------------------------

    def beat(self, info: WorkerInfo) -> None:
        """Register or refresh a worker (``.workers/<owner>.json``, replaced atomically)."""
        registry.beat(self.dir, info)

    def workers(self) -> list[WorkerInfo]:
        """Every registered worker, live or gone; an unreadable one with its ``problem``."""
        return registry.workers(self.dir)

    def forget_worker(self, owner: str) -> bool:
        """Remove a worker's registration; False when there was none."""
        return registry.forget(self.dir, owner)

    def claim_notice(
        self,
        run_id: str,
        seq: int,
        kind: str,
        target: str,
        *,
        by: str,
        stale_after: float = 60.0,
    ) -> bool:
        """Claim a notice before sending it (see notices.py); False when it is another's."""
        return self._notices.claim(run_id, seq, kind, target, by=by, stale_after=stale_after)

    def mark_notice(self, run_id: str, seq: int, kind: str, target: str) -> None:
        """Record that a claimed notice was sent."""
        self._notices.mark(run_id, seq, kind, target)

    def notices(self, run_id: str) -> list[NoticeRecord]:
        """The notices claimed or sent for the run."""
        return self._notices.of(run_id)

    # -- moving runs between stores ----------------------------------------------------------

    def export_run(self, run_id: str) -> list[bytes]:
        """The run's journal lines exactly as written (without newlines; a torn tail left
        out), every crc and seq checked; [] for an unknown run."""
        data = self.journals.read(run_id)
        if data is None:
            return []
        lines, _ = split_journal(data)
        parse_lines(run_id, lines)
        return lines

    def import_run(self, run_id: str, lines: list[bytes], attempts: list[Attempt]) -> bool:
        """Add a whole run: its attempts log (replaced atomically), then its journal (written
        aside, fsynced, linked into place: it appears whole or not at all). False when the
        journal already holds exactly these lines; RunConflictError when it holds others."""
        path = self.journals.path(run_id)
        if not parse_lines(run_id, lines):
            return False
        for _ in range(2):
            there = self.export_run(run_id)
            if there:
                if there == lines:
                    return False
                raise RunConflictError(run_id, str(self.root), len(there), len(lines))
            self.attempt_logs.replace(run_id, attempts)
            if self._create(path, b"".join(line + b"\n" for line in lines)):
                return True
        raise RunConflictError(run_id, str(self.root), len(self.export_run(run_id)), len(lines))

    # -- changes -----------------------------------------------------------------------------

    def changes(self, *, rescan: float = 30.0) -> AsyncIterator[set[str]]:
        """Sets of run ids whose journal, lease, attempts or failure count changed (a file
        watch), and every run at least every ``rescan`` seconds and once the watch is up
        (see feed.py)."""
        return change_feed(self.root, self.run_ids, rescan=rescan)


def _fence(lease: Lease | None) -> None:
    if isinstance(lease, FileLease):
        lease.check()
    elif lease is not None and lease.lost:
        raise LeaseLostError(lease.run_id, lease.epoch)


_IRREGULAR = logs.stamp_of(-1, 0)
