"""Who is working, and who was told: a worker's registration in its store, and the notices
a notifier claims and marks (SPEC §11).

Each worker process beats every ``heartbeat`` seconds (``Store.beat``); a worker is live while
its last beat is less than three heartbeats old. Nothing here reads a store: the stores keep
``WorkerInfo`` rows, and these functions judge them.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote

from .errors import DurableAgentError

DEFAULT_HEARTBEAT = 5.0
LIVE_BEATS = 3  # a worker is live while its last beat is younger than this many heartbeats
GONE_KEPT = 24 * 3600.0  # a gone worker is listed this long, then a starting worker forgets it


class OwnerInUseError(DurableAgentError):
    """A worker was asked to start under an owner name a live worker already uses."""

    def __init__(self, owner: str, holder: WorkerInfo) -> None:
        self.owner = owner
        self.holder = holder
        super().__init__(
            f"owner {owner!r} is in use by a live worker ({holder.host}:{holder.pid}, last "
            f"beat {max(0.0, time.time() - holder.beat_at):.0f}s ago): pick another --owner, "
            "or stop that worker first"
        )


@dataclass(frozen=True)
class WorkerInfo:
    """One worker as it last told the store. ``runs``: the run ids it holds now;
    ``heartbeat``: the seconds between its beats. ``problem`` is set (and the rest is what
    could be told) for a registration that could not be read."""

    owner: str
    host: str
    pid: int
    version: str
    agent: str
    store: str
    started_at: float
    beat_at: float
    concurrency: int = 1
    runs: tuple[str, ...] = field(default_factory=tuple)
    heartbeat: float = DEFAULT_HEARTBEAT
    problem: str | None = None
    # The agent's code (deploys.py): its version label, whether the worker is pinned to it
    # (``--pin``: it resumes only the runs that version started), and the runs a pinned
    # worker leaves to another version (run id -> the version it waits for).
    code: str = ""
    pinned: bool = False
    waiting: tuple[tuple[str, str], ...] = ()

    def live(self, now: float | None = None) -> bool:
        """True while the last beat is younger than three heartbeats (and readable)."""
        if self.problem is not None:
            return False
        now = time.time() if now is None else now
        return now - self.beat_at < LIVE_BEATS * max(self.heartbeat, 0.1)

    def state(self, now: float | None = None) -> str:
        """``live`` or ``gone`` (``unreadable`` for a registration that does not parse)."""
        if self.problem is not None:
            return "unreadable"
        return "live" if self.live(now) else "gone"

    def up(self, now: float | None = None) -> float:
        """How long the worker has been up: until now while it is live (it beats every
        ``heartbeat`` seconds, so its last beat is up to a heartbeat old), until its last
        beat once it is gone."""
        now = time.time() if now is None else now
        until = now if self.live(now) else self.beat_at
        return max(0.0, until - self.started_at)

    def beaten(
        self,
        *,
        runs: tuple[str, ...],
        at: float | None = None,
        waiting: tuple[tuple[str, str], ...] | None = None,
    ) -> WorkerInfo:
        """This registration at a new beat, holding ``runs`` (and leaving ``waiting``)."""
        when = time.time() if at is None else at
        if waiting is None:
            return replace(self, runs=runs, beat_at=when)
        return replace(self, runs=runs, beat_at=when, waiting=waiting)

    def to_dict(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "host": self.host,
            "pid": self.pid,
            "version": self.version,
            "agent": self.agent,
            "store": self.store,
            "started_at": self.started_at,
            "beat_at": self.beat_at,
            "concurrency": self.concurrency,
            "runs": list(self.runs),
            "heartbeat": self.heartbeat,
            "code": self.code,
            "pinned": self.pinned,
            "waiting": dict(self.waiting),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkerInfo:
        """Raises ValueError (or KeyError, TypeError) for a dict that is no registration."""
        runs = d.get("runs") or []
        if not isinstance(runs, list):
            raise ValueError("runs is not a list")
        return cls(
            owner=str(d["owner"]),
            host=str(d.get("host") or ""),
            pid=int(d.get("pid") or 0),
            version=str(d.get("version") or ""),
            agent=str(d.get("agent") or ""),
            store=str(d.get("store") or ""),
            started_at=float(d["started_at"]),
            beat_at=float(d["beat_at"]),
            concurrency=int(d.get("concurrency") or 1),
            runs=tuple(str(r) for r in runs),
            heartbeat=float(d.get("heartbeat") or DEFAULT_HEARTBEAT),
            code=str(d.get("code") or ""),
            pinned=d.get("pinned") is True,
            waiting=tuple(
                sorted((str(k), str(v)) for k, v in dict(d.get("waiting") or {}).items())
            ),
        )

    @classmethod
    def unreadable(cls, owner: str, problem: str) -> WorkerInfo:
        """A registration that could not be read: shown with why, never live."""
        return cls(owner, "", 0, "", "", "", 0.0, 0.0, problem=problem)


def this_process(
    owner: str,
    *,
    agent: str = "",
    store: str = "",
    concurrency: int = 1,
    heartbeat: float = DEFAULT_HEARTBEAT,
    version: str = "",
    code: str = "",
    pinned: bool = False,
) -> WorkerInfo:
    """The registration of the calling process, first beat now."""
    now = time.time()
    return WorkerInfo(
        owner=owner,
        host=socket.gethostname(),
        pid=os.getpid(),
        version=version,
        agent=agent,
        store=store,
        started_at=now,
        beat_at=now,
        concurrency=concurrency,
        heartbeat=heartbeat,
        code=code,
        pinned=pinned,
    )


def same_process(a: WorkerInfo, b: WorkerInfo) -> bool:
    """Whether two registrations come from one process (same host and pid): workers in one
    process share its default owner name, as they share its leases' owner."""
    return (a.host, a.pid) == (b.host, b.pid)


def still_running(info: WorkerInfo, now: float | None = None) -> bool:
    """Live by its beats, and on this host its process still exists: a worker killed here a
    moment ago is not live, whatever its last beat says."""
    if not info.live(now):
        return False
    if info.host == socket.gethostname() and info.pid > 0:
        try:
            os.kill(info.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return True


def file_name(owner: str) -> str:
    """A registration's file name: the owner percent-encoded (never hidden, never a path)."""
    name = quote(owner, safe="")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return f"{name}.json"


def owner_of_file(stem: str) -> str:
    """The owner a registration's file name (without ``.json``) stands for."""
    return unquote(stem)


def long_gone(workers: list[WorkerInfo], now: float | None = None) -> list[WorkerInfo]:
    """The registrations whose last beat is older than GONE_KEPT (a worker killed, never
    stopped cleanly): kept that long for the on-call engineer, then forgotten. An
    unreadable one is kept (it is said until someone mends or removes it)."""
    now = time.time() if now is None else now
    return [w for w in workers if w.problem is None and now - w.beat_at > GONE_KEPT]


def live_workers(workers: list[WorkerInfo], now: float | None = None) -> list[WorkerInfo]:
    """The live ones among ``workers``."""
    return [w for w in workers if w.live(now)]


@dataclass(frozen=True)
class NoticeRecord:
    """A notice a notifier claimed (and, once ``sent_at`` is set, sent): to ``target`` (a
    digest of its URL: a URL may hold a secret), of ``kind``, for the transition at ``seq``
    of ``run_id``."""

    run_id: str
    seq: int
    kind: str
    target: str
    claimed_by: str
    claimed_at: float
    sent_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "kind": self.kind,
            "target": self.target,
            "claimed_by": self.claimed_by,
            "claimed_at": self.claimed_at,
            "sent_at": self.sent_at,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NoticeRecord:
        sent = d.get("sent_at")
        return cls(
            str(d["run_id"]),
            int(d["seq"]),
            str(d["kind"]),
            str(d["target"]),
            str(d["claimed_by"]),
            float(d["claimed_at"]),
            None if sent is None else float(sent),
        )
