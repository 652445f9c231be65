"""The PostgresStore's lease: what a runner holds while it executes a run."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from ...errors import DurableAgentError, LeaseLostError
from ..protocol import Lease

log = logging.getLogger("durableagent.stores.postgres")


class LeaseKeeper(Protocol):
    """What renews and frees a lease (the store)."""

    def _renew(self, lease: PgLease) -> None: ...

    def _release(self, lease: PgLease) -> None: ...


class PgLease:
    """A held PostgresStore lease: the run row names this holder, its epoch and an expiry.
    ``renew`` pushes the expiry on (from any connection: a lease is never a session's); once
    another runner took the run over (after the expiry), appends and renewals carrying this
    epoch raise LeaseLostError."""

    def __init__(
        self, store: LeaseKeeper, run_id: str, owner: str, epoch: int, ttl: float, at: float
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.epoch = epoch
        self.ttl = ttl
        self._store = store
        self._renewed = at  # monotonic, taken before the request that took or renewed it
        self.lost_for_sure = False
        self.kept = False
        self.ended = False  # an outcome was saved for this attempt
        self._released = False

    def __repr__(self) -> str:
        return f"PgLease({self.run_id!r}, owner={self.owner!r}, epoch={self.epoch})"

    @property
    def lost(self) -> bool:
        """Known taken over, or not renewed within its ttl (another runner may take it)."""
        return self.lost_for_sure or time.monotonic() - self._renewed > self.ttl

    def renew(self) -> None:
        at = time.monotonic()
        self._store._renew(self)
        self._renewed = at

    def keep_until(self, step: asyncio.Future[Any]) -> None:
        self.kept = True
        step.add_done_callback(lambda _: self.release())

    def release(self) -> None:
        """Free the lease (idempotent), ending its attempt ``stopped`` unless it ended. A
        lease taken over is the new holder's: it is left alone."""
        if self._released:
            return
        self._released = True
        if self.lost_for_sure:
            return
        try:
            self._store._release(self)
        except DurableAgentError as e:  # it expires within its ttl
            log.warning("could not release the lease of run %s: %s", self.run_id, e)


def fence(lease: Lease | None) -> None:
    """Refuse at once a lease already known lost (the server refuses the others)."""
    if isinstance(lease, PgLease) and lease.lost_for_sure:
        raise LeaseLostError(lease.run_id, lease.epoch, "another runner holds it now")


def mark_lost(lease: Lease) -> LeaseLostError:
    """Remember that ``lease`` is lost; the error to raise."""
    if isinstance(lease, PgLease):
        lease.lost_for_sure = True
    return LeaseLostError(lease.run_id, lease.epoch, "another runner holds it now")
