"""The ``Store`` protocol every store implements, and the types it speaks in.

Names are the contract (SPEC §7); signatures may grow keyword arguments.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..fold import Summary
from ..outcome import Outcome
from ..record import Record
from ..roster import NoticeRecord, WorkerInfo

Check = Callable[[list[Record]], None]

# How an attempt ended: an Outcome's status, or one of these.
STOPPED = "stopped"  # released without an outcome (a worker shutting down between steps)
LOST = "lost"  # ended without saying: killed, or its lease taken over


def default_owner() -> str:
    """``host:pid``: who holds a lease when nobody says."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Lease(Protocol):
    """A held run lease. ``epoch`` grows by one at every acquisition of the run's lease for
    the life of the store: a fencing token. Appends that carry a lease whose epoch is no
    longer current raise LeaseLostError and write nothing."""

    run_id: str
    owner: str
    epoch: int
    ttl: float
    ended: bool  # the attempt's end is recorded (an outcome): releasing records no stop

    @property
    def lost(self) -> bool:
        """True once the store knows another runner took the run over."""
        ...

    def renew(self) -> None:
        """Extend the lease; raises LeaseLostError when it is no longer ours."""
        ...

    def keep_until(self, step: asyncio.Future[Any]) -> None:
        """Hold the lease past its ``with`` block, until ``step`` is done."""
        ...


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run: who ran it, from which seq, and how it ended (an Outcome's
    status, ``stopped``, ``lost``, or None while it runs). Replay never reads it."""

    number: int
    owner: str
    epoch: int
    started_at: float | None
    first_seq: int
    ended_at: float | None = None
    last_seq: int | None = None
    ended: str | None = None
    outcome: Outcome | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "owner": self.owner,
            "epoch": self.epoch,
            "started_at": self.started_at,
            "first_seq": self.first_seq,
            "ended_at": self.ended_at,
            "last_seq": self.last_seq,
            "ended": self.ended,
            "outcome": None if self.outcome is None else self.outcome.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Attempt:
        outcome = d.get("outcome")
        return cls(
            number=int(d["number"]),
            owner=str(d.get("owner") or ""),
            epoch=int(d.get("epoch") or 0),
            started_at=d.get("started_at"),
            first_seq=int(d.get("first_seq") or 0),
            ended_at=d.get("ended_at"),
            last_seq=d.get("last_seq"),
            ended=d.get("ended"),
            outcome=None if outcome is None else Outcome.from_dict(outcome),
        )


class Store(Protocol):
    """Where journals live. ``append`` is durable when it returns (``sync=False``: when the
    next synced append of the run returns).

    ``lease_ttl``: seconds a holder may go without renewing. ``leases_die_with_holder``: True
    when the kernel frees a lease exactly when its holder dies (a FileStore's flock): a lease
    found free then means its holder is dead; False when a lease ends by expiry (a holder
    paused past it may still be alive)."""

    lease_ttl: float
    leases_die_with_holder: bool

    @property
    def description(self) -> str:
        """Where the store is, for messages (a URL never shows its password)."""
        ...

    @property
    def directory(self) -> Path | None:
        """The directory the store lives in (a FileStore's root); None for a store that lives
        in no directory (PostgreSQL)."""
        ...

    def load(self, run_id: str) -> list[Record]:
        """Every record of the run; [] for an unknown run."""
        ...

    def load_since(self, run_id: str, after_seq: int) -> list[Record]:
        """The records with seq > ``after_seq``."""
        ...

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
        """Append with the next seq. ``check(records)`` (the records with seq > ``since``)
        runs under the run's lock and may raise to refuse; ``lease`` fences the append. A
        store that believes nothing was appended since ``since`` may call ``check([])``
        first: if it passes and that holds, the append lands on it; if not, the check runs
        again on the records read under the lock."""
        ...

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
        """Append records with consecutive seqs in one write (one fsync, one commit); a
        FileStore crash may keep a prefix of them, a PostgresStore keeps all or none."""
        ...

    def run_ids(self) -> list[str]:
        """Every run, sorted."""
        ...

    def lease(self, run_id: str, *, owner: str | None = None) -> AbstractContextManager[Lease]:
        """Hold the run's lease (RunBusyError at once if anyone holds it). Each acquisition
        begins an attempt."""
        ...

    def is_leased(self, run_id: str) -> bool: ...

    def lease_holder(self, run_id: str) -> dict[str, Any] | None:
        """Who holds the lease (owner, epoch, since), or None."""
        ...

    def save_outcome(self, run_id: str, outcome: Outcome, *, lease: Lease | None = None) -> None:
        """End the current attempt with ``outcome``."""
        ...

    def last_outcome(self, run_id: str) -> Outcome | None: ...

    def attempts(self, run_id: str) -> list[Attempt]: ...

    def summaries(self) -> list[Summary]:
        """Every run's status line, without reading every journal whole."""
        ...

    def summary(self, run_id: str) -> Summary | None:
        """One run's status line; None for an unknown run."""
        ...

    def changes(self, *, rescan: float = 30.0) -> AsyncIterator[set[str]]:
        """Sets of run ids whose journal, lease or attempts changed; every run at least every
        ``rescan`` seconds (a change notice can be lost; the store is the truth)."""
        ...

    def read_failures(self, run_id: str) -> dict[str, Any] | None:
        """The workers' shared failure bookkeeping of the run."""
        ...

    def write_failures(self, run_id: str, failures: dict[str, Any]) -> None: ...

    def clear_failures(self, run_id: str) -> bool: ...

    def export_run(self, run_id: str) -> list[bytes]:
        """The run's journal lines exactly as stored (without newlines), every crc and seq
        checked (CorruptJournalError names the first bad line); [] for an unknown run."""
        ...

    def import_run(self, run_id: str, lines: list[bytes], attempts: list[Attempt]) -> bool:
        """Add a whole run: its lines as ``export_run`` gives them, and its attempts. False
        when the store already holds exactly these lines (nothing changes); RunConflictError
        when it holds the run with other records (nothing written)."""
        ...

    def beat(self, info: WorkerInfo) -> None:
        """Register (or refresh) a worker: its registration replaces the owner's last one."""
        ...

    def workers(self) -> list[WorkerInfo]:
        """Every registered worker, live or gone, by owner; a registration that cannot be
        read comes back with its ``problem`` set, and the others are still listed."""
        ...

    def forget_worker(self, owner: str) -> bool:
        """Remove a worker's registration (its clean stop); False when there was none."""
        ...

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
        """Claim the notice (run, transition seq, kind, target) before sending it: True when
        it was unclaimed, claimed by ``by`` itself (a refresh), or claimed ``stale_after``
        seconds ago and never marked sent (its claimer died); False otherwise, and always
        once it is marked sent."""
        ...

    def mark_notice(self, run_id: str, seq: int, kind: str, target: str) -> None:
        """Record that the claimed notice was sent: nobody sends it again."""
        ...

    def notices(self, run_id: str) -> list[NoticeRecord]:
        """The notices claimed or sent for the run, oldest claim first."""
        ...

    def close(self) -> None: ...
