"""FileStore leases: a flock'ed ``.leases/<run>.lock`` that exists only while held, renewed by
its mtime, and fenced: a holder whose file was replaced can never append again.

On one host the kernel knows who is alive: a flock is held exactly as long as its holder's
process lives, so it is never broken for a missed renewal (a live holder that stopped renewing,
paused or frozen, may wake inside a write). A holder past its ttl without renewing is shown as
``stuck`` (owner, pid, for how long) for a human to end that process; its death frees the lease.

Each acquisition takes the next epoch (one more than the run's attempt log has seen) and logs
the attempt's start; an attempt that never says how it ended is ``lost``.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from ...errors import DurableAgentError, LeaseLostError, RunBusyError, StoreError
from ...ids import valid_run_id
from ..protocol import STOPPED
from . import logs
from .fs import O_READ, O_WRITE, write_all
from .journals import JournalFiles
from .logs import AttemptLogs

LEASES_DIR = ".leases"

# What a lease that ends without an outcome calls: (lease, how it ended) -> None.
EndAttempt = Callable[["FileLease", str], None]


class FileLease:
    """A held FileStore lease: the flock on ``.leases/<run>.lock``, a file that exists only
    while held. Renewing touches its mtime; a holder that stops renewing for ``ttl`` seconds
    (paused, hung) is shown as stuck, and knows it (``lost``: it calls nothing more). Should
    its file be replaced anyway (removed by hand), its appends and renewals find another file
    there and raise LeaseLostError."""

    def __init__(
        self, end: EndAttempt, path: str, run_id: str, owner: str, epoch: int, fd: int, ttl: float
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.epoch = epoch
        self.ttl = ttl
        self.path = path
        self._end = end
        self._fd: int | None = fd
        st = os.fstat(fd)
        self._id = (st.st_dev, st.st_ino)
        self.kept = False
        self.ended = False  # an outcome (or a stop) was recorded for this attempt
        self._lost = False
        self._renewed = time.monotonic()

    def __repr__(self) -> str:
        return f"FileLease({self.run_id!r}, owner={self.owner!r}, epoch={self.epoch})"

    @property
    def lost(self) -> bool:
        """Its file replaced, or not renewed within its ttl by this process's clock (as in
        every store, a holder that may have lost its lease calls nothing)."""
        return self._lost or time.monotonic() - self._renewed > self.ttl

    def current(self) -> bool:
        """True while the lock file at the lease's path is still the one this lease holds."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._id and self._fd is not None

    def check(self) -> None:
        """Raise LeaseLostError unless the lease is still current."""
        if self._lost or not self.current():
            self._lost = True
            raise LeaseLostError(self.run_id, self.epoch, "its lock file was replaced")

    def renew(self) -> None:
        self.check()
        assert self._fd is not None
        with suppress(OSError):
            os.utime(self._fd)
        self._renewed = time.monotonic()

    def keep_until(self, step: asyncio.Future[Any]) -> None:
        self.kept = True
        step.add_done_callback(lambda _: self.release())

    def release(self) -> None:
        """Free the lease (idempotent). A lost lease is only closed: the file at its path is
        the new holder's."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if not self._lost and not self.ended:
                self._end(self, STOPPED)
            st = os.stat(self.path, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == self._id:
                os.unlink(self.path)  # while still locked: an acquirer re-checks the file
        except (OSError, DurableAgentError):
            pass
        finally:
            os.close(fd)


class LeaseKeeper:
    """Takes and probes a FileStore's leases: the journals (the next seq an attempt starts
    at), the attempt logs (each acquisition begins one) and the ttl are all it needs of the
    store; ``end`` ends an attempt that stops without an outcome."""

    def __init__(
        self, journals: JournalFiles, attempts: AttemptLogs, ttl: float, end: EndAttempt
    ) -> None:
        self.dir = journals.dir
        self.journals = journals
        self.attempts = attempts
        self.ttl = ttl
        self.end = end
        self._folder = f"{journals.prefix}{LEASES_DIR}/"

    def acquire(self, run_id: str, owner: str) -> FileLease:
        name = f"{run_id}.lock"
        with self.dir.folder(LEASES_DIR, create=True) as dfd:
            assert dfd is not None
            for attempt in range(8):
                try:
                    fd = self.dir.open_regular(name, O_WRITE | os.O_CREAT, dir_fd=dfd)
                except FileNotFoundError as e:
                    raise self.dir.open_error(f"{self._folder}{name}", e) from None
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _holder(fd)
                    stuck = self._stuck_for(fd, holder)
                    os.close(fd)
                    if attempt < 2:  # a supervisor's is_leased() probe holds it for µs
                        time.sleep(0.002)
                        continue
                    text = _holder_text(holder)
                    if stuck is not None:  # alive (it holds the flock), so never taken over
                        text += f", stuck: no renewal for {stuck:.0f}s"
                    raise RunBusyError(run_id, text) from None
                if not _same_file(fd, name, dfd):
                    os.close(fd)  # released and removed by its holder meanwhile: again
                    continue
                return self._begin(run_id, owner, fd)
        raise RunBusyError(run_id, "its lease keeps changing hands")

    def _begin(self, run_id: str, owner: str, fd: int) -> FileLease:
        """The lease is ours: give it the next epoch and log the attempt's start."""
        try:
            epoch = self.attempts.next_epoch(run_id)
            now = time.time()
            holder = {
                "owner": owner,
                "epoch": epoch,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "since": now,
                "ttl": self.ttl,
            }
            os.ftruncate(fd, 0)
            write_all(fd, json.dumps(holder).encode())
            first = self.journals.next_seq(run_id)
            self.attempts.append(run_id, logs.begin_line(epoch, owner, now, first), sync=False)
        except (OSError, DurableAgentError) as e:
            with suppress(OSError):
                os.unlink(f"{self._folder}{run_id}.lock")
            os.close(fd)
            why = e.strerror if isinstance(e, OSError) else str(e)
            raise StoreError(
                f"cannot take the lease of run {run_id!r} in {self.dir.root}: {why}"
            ) from None
        return FileLease(
            self.end, f"{self._folder}{run_id}.lock", run_id, owner, epoch, fd, self.ttl
        )

    def _stuck_for(self, fd: int, holder: dict[str, Any]) -> float | None:
        """Seconds past its ttl that the holder has gone without renewing (its file's mtime),
        or None while it renews in time."""
        try:
            ttl = float(holder.get("ttl") or self.ttl)
            late = time.time() - os.fstat(fd).st_mtime
        except (OSError, TypeError, ValueError):
            return None
        return late if late > ttl else None

    def probe(self, run_id: str) -> dict[str, Any] | None:
        """The holder of a held lease, else None. A lock file left by a holder that died is
        removed on the way (safely: acquirers re-check the file they locked). A holder that
        stopped renewing past its ttl (paused, hung) still holds it, with ``stuck`` set to
        how many seconds it has gone without renewing."""
        name = f"{run_id}.lock"
        try:
            with self.dir.folder(LEASES_DIR, create=False) as dfd:
                if dfd is None:
                    return None
                fd = self.dir.open_regular(name, O_READ, dir_fd=dfd)
                try:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        holder = _holder(fd) or {"owner": "?"}
                        stuck = self._stuck_for(fd, holder)
                        return holder if stuck is None else {**holder, "stuck": stuck}
                    if _same_file(fd, name, dfd):
                        os.unlink(name, dir_fd=dfd)
                    return None
                finally:
                    os.close(fd)
        except (OSError, StoreError):
            return None  # no lock file, or one no runner could have taken

    def held(self) -> dict[str, dict[str, Any]]:
        """Every held lease's holder, by run."""
        try:
            names = self.dir.listing(LEASES_DIR, ".lock")
        except (OSError, StoreError):
            return {}
        out = {}
        for n in names:
            if valid_run_id(n) and (holder := self.probe(n)) is not None:
                out[n] = holder
        return out


def _same_file(fd: int, name: str, dfd: int) -> bool:
    """True when ``name`` in the folder ``dfd`` is still the file ``fd`` has open."""
    try:
        a, b = os.fstat(fd), os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _holder(fd: int) -> dict[str, Any]:
    try:
        h = json.loads(os.pread(fd, 4096, 0))
    except (OSError, ValueError):
        return {}
    return h if isinstance(h, dict) else {}


def _holder_text(holder: dict[str, Any]) -> str:
    if "pid" in holder and "host" in holder:
        return f"{holder.get('owner') or 'pid'} (pid {holder['pid']} on {holder['host']})"
    return ""


def stuck_note(holder: dict[str, Any] | None) -> str:
    """What a run whose holder stopped renewing waits on, in words ("" for any other)."""
    if holder is None or not isinstance(holder.get("stuck"), int | float):
        return ""
    late = float(holder["stuck"])
    took = (
        f"{late:.0f}s"
        if late < 120
        else f"{late / 60:.0f}m"
        if late < 7200
        else f"{late / 3600:.0f}h"
    )
    who = _holder_text(holder) or str(holder.get("owner") or "its holder")
    return f"stuck: {who} has not renewed its lease for {took}; end that process to free the run"
