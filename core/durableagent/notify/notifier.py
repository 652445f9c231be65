"""The notifier: follows a store's change feed and tells humans when a run needs one.

Delivery is at least once and deduplicated in the store: each (run, transition seq, kind,
target) is claimed (``Store.claim_notice``) before it is sent and marked after
(``Store.mark_notice``). Two notifiers, or one restarted after a crash, never send a notice
twice, except one that died between sending and marking: its claim goes stale after
``claim_ttl`` seconds and the notice is sent once more. Each target has its own queue and
task: one that fails is retried with backoff and logged, and never holds up the others.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import DurableAgentError
from ..fold import NEEDS_HUMAN, RunStatus, Summary
from ..record import SIGNAL, signal_fields
from ..roster import NoticeRecord
from ..stores import Store
from .notices import DEADLINE, Notice, deadline_denials, notices_for, stalled
from .targets import DeliveryError, Target

log = logging.getLogger("durableagent.notify")

CLAIM_TTL = 60.0  # a claim never marked sent is another notifier's to take after this
TICK = 2.0  # the time-bound notices (deadline, stalled, escalation) are looked at this often
MAX_BACKOFF = 30.0
_WATCHED = NEEDS_HUMAN | {RunStatus.READY}


def _where(store: Store) -> str:
    return store.description


# A run as read: its id, its summary (None: gone), the approvals denied by their deadline.
_Read = tuple[str, Summary | None, list[tuple[int, str, float]]]


@dataclass
class _Item:
    notice: Notice
    title: str
    body: str


class _Lane:
    """One target's queue and its sending task."""

    def __init__(self, notifier: Notifier, target: Target) -> None:
        self.notifier = notifier
        self.target = target
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        while True:
            item = await self.queue.get()
            await self._deliver(item)

    async def _deliver(self, item: _Item) -> None:
        n, store, t = item.notice, self.notifier.store, self.target
        delay = 1.0
        while True:
            try:
                await asyncio.wait_for(
                    asyncio.to_thread(t.send, item.title, item.body), self.notifier.send_timeout
                )
                break
            except (DeliveryError, TimeoutError) as e:
                why = str(e) or f"{t.name} did not answer within {self.notifier.send_timeout:g}s"
                log.warning(
                    "notice %s of run %s to %s failed (%s); again in %gs",
                    n.kind,
                    n.run_id,
                    t.name,
                    why,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF)
                # Still ours? (a claim left too long is another notifier's to send)
                if not await self.notifier.claim(n, t):
                    return
        try:
            await asyncio.to_thread(store.mark_notice, n.run_id, n.seq, n.claimed_as, t.key)
        except DurableAgentError as e:  # sent: at worst it is sent once more later
            log.warning(
                "notice %s of run %s sent to %s, not marked (%s)", n.kind, n.run_id, t.name, e
            )
        self.notifier.sent += 1
        log.info("notice %s of run %s sent to %s", n.kind, n.run_id, t.name)


class Notifier:
    """Tells ``targets`` about the runs of ``store`` that need a human (``kinds``); a notice
    not followed by a human decision within ``escalate_after`` seconds goes to ``escalate_to``
    too, once. ``link`` is added to every notice."""

    def __init__(
        self,
        store: Store,
        targets: Sequence[Target],
        *,
        kinds: frozenset[str],
        escalate_after: float | None = None,
        escalate_to: Sequence[Target] = (),
        link: str | None = None,
        name: str | None = None,
        rescan: float = 30.0,
        claim_ttl: float = CLAIM_TTL,
        send_timeout: float = 20.0,
    ) -> None:
        self.store = store
        self.targets = list(targets)
        self.kinds = kinds
        self.escalate_after = escalate_after
        self.escalate_to = list(escalate_to)
        self.link = link
        self.name = name or f"notifier-{uuid.uuid4().hex[:8]}"
        self.rescan = rescan
        self.claim_ttl = claim_ttl
        self.send_timeout = send_timeout
        self.sent = 0
        self._where = _where(store)
        self._seen: dict[str, Summary] = {}  # runs that need a human, or are ready
        self._done: set[tuple[str, int, str, str]] = set()  # (run, seq, kind, target) handled
        self._first: dict[tuple[str, int, str], float] = {}  # when a notice was first claimed
        self._later: dict[tuple[str, int, str, str], float] = {}  # another's claim: look again
        self._lanes: dict[str, _Lane] = {}
        self._no_worker_since: float | None = None
        self._exhausted: dict[str, bool] = {}  # failed runs: the workers gave up

    async def claim(self, n: Notice, t: Target) -> bool:
        try:
            return await asyncio.to_thread(
                self.store.claim_notice,
                n.run_id,
                n.seq,
                n.claimed_as,
                t.key,
                by=self.name,
                stale_after=self.claim_ttl,
            )
        except DurableAgentError as e:
            log.warning("cannot claim notice %s of run %s (%s)", n.kind, n.run_id, e)
            return False

    async def serve(self, stop: asyncio.Event) -> None:
        """Send what is due now (nothing is missed while no notifier ran), then follow the
        change feed until ``stop`` is set."""
        for t in [*self.targets, *self.escalate_to]:
            lane = self._lanes.setdefault(t.key, _Lane(self, t))
            lane.task = asyncio.create_task(lane.run())
        dirty: set[str] = set()
        woken = asyncio.Event()

        async def watch() -> None:
            try:
                async for ids in self.store.changes(rescan=self.rescan):
                    dirty.update(ids)
                    woken.set()
            except Exception as e:  # the periodic look keeps it correct without the feed
                log.warning("watching %s failed (%s); looking every %gs", self._where, e, TICK)

        watcher = asyncio.create_task(watch())
        try:
            await self._look(None)
            while not stop.is_set():
                with_timeout = asyncio.create_task(woken.wait())
                stopped = asyncio.create_task(stop.wait())
                await asyncio.wait(
                    [with_timeout, stopped], timeout=TICK, return_when=asyncio.FIRST_COMPLETED
                )
                with_timeout.cancel()
                stopped.cancel()
                if stop.is_set():
                    break
                woken.clear()
                ids, dirty_now = set(dirty), len(dirty)
                dirty.clear()
                try:
                    await self._look(None if dirty_now > 256 else ids)
                except DurableAgentError as e:
                    log.warning("looking at %s failed (%s); again soon", self._where, e)
        finally:
            tasks = [watcher, *(lane.task for lane in self._lanes.values() if lane.task)]
            for task in tasks:
                task.cancel()
            # A send in flight or the file watch's thread may take a while to notice: the
            # notifier stops anyway (what was not marked sent is sent again by the next).
            await asyncio.wait(tasks, timeout=5.0)

    async def _look(self, ids: set[str] | None) -> None:
        """Read the changed runs (None: every run), and the workers; dispatch what is due."""
        now = time.time()
        got = await asyncio.to_thread(self._read, ids)
        workers = await asyncio.to_thread(self.store.workers)
        live = [w for w in workers if w.live(now)]
        if live:
            self._no_worker_since = None
        elif self._no_worker_since is None:
            beats = [w.beat_at for w in workers if w.problem is None]
            self._no_worker_since = max(beats) if beats else now
        for rid, summary, denials in got:
            self._seen.pop(rid, None)
            if summary is not None and summary.status in _WATCHED:
                self._seen[rid] = summary
            if denials:
                for n in deadline_denials(rid, denials, self._where):
                    await self._dispatch(n, now)
        for summary in list(self._seen.values()):
            await self._consider(summary, now)
        ready = [s for s in self._seen.values() if s.status == RunStatus.READY]
        stall = stalled(ready, now=now, store=self._where, no_worker_since=self._no_worker_since)
        if stall is not None:
            await self._dispatch(stall, now)

    def _read(self, ids: set[str] | None) -> list[_Read]:
        store = self.store
        got: list[_Read]
        if ids is None:
            every = store.summaries()
            gone = set(self._seen) - {s.run_id for s in every}
            got = [(s.run_id, s, self._denials(s)) for s in every] + [
                (rid, None, []) for rid in gone
            ]
        else:
            got = [(rid, (s := store.summary(rid)), self._denials(s)) for rid in sorted(ids)]
        # The failure count of the failed runs read: a count's change is in the change feed
        # too, so it is read again only when the run (or its count) changed.
        for rid, summary, _ in got:
            self._exhausted.pop(rid, None)
            if summary is not None and summary.status == RunStatus.FAILED:
                failures = store.read_failures(rid)
                self._exhausted[rid] = bool(
                    failures
                    and failures.get("exhausted")
                    and failures.get("signals") == summary.signals
                )
        return got

    def _denials(self, s: Summary | None) -> list[tuple[int, str, float]]:
        """Approvals denied by their deadline since the run was last seen awaiting one."""
        if s is None or DEADLINE not in self.kinds:
            return []
        before = self._seen.get(s.run_id)
        if before is None or before.last_seq >= s.last_seq:
            return []
        if not any(p.deadline_at is not None for p in before.pending):
            return []
        out = []
        for r in self.store.load_since(s.run_id, before.last_seq):
            if r.type == SIGNAL:
                name, payload, by, _ = signal_fields(r)
                if name == "deny" and by == "deadline":
                    out.append((r.seq, str(payload.get("marker")), r.at))
        return out

    async def _consider(self, s: Summary, now: float) -> None:
        exhausted = self._exhausted.get(s.run_id, False)
        for n in notices_for(
            s,
            now=now,
            store=self._where,
            exhausted=exhausted,
        ):
            await self._dispatch(n, now)
            if self.escalate_after is not None and self.escalate_to:
                first = self._first.get(n.key)
                if first is not None and now - first >= self.escalate_after:
                    await self._dispatch(n.as_escalation(), now, self.escalate_to)

    async def _dispatch(self, n: Notice, now: float, targets: list[Target] | None = None) -> None:
        if n.kind.removeprefix("escalated_") not in self.kinds:
            return
        for t in self.targets if targets is None else targets:
            key = (n.run_id, n.seq, n.claimed_as, t.key)
            if key in self._done or self._later.get(key, 0.0) > now:
                continue
            if not await self.claim(n, t):
                # Another notifier's: sent (done), or it may die before sending; then its
                # claim goes stale and this one claims it again.
                claims = await self._claims(n, t)
                first = min((c.claimed_at for c in claims), default=now)
                self._first.setdefault(n.key, first)
                if any(c.sent_at is not None for c in claims):
                    self._done.add(key)
                else:
                    self._later[key] = first + self.claim_ttl
                continue
            self._done.add(key)
            self._later.pop(key, None)
            self._first.setdefault(n.key, now)
            self._lanes[t.key].queue.put_nowait(
                _Item(n, f"agentrun: {n.title}", n.body(now, self.link))
            )

    async def _claims(self, n: Notice, t: Target) -> list[NoticeRecord]:
        """The store's record of the notice to ``t``: who claimed it, when, whether sent."""
        try:
            found = await asyncio.to_thread(self.store.notices, n.run_id)
        except DurableAgentError:
            return []
        return [r for r in found if (r.seq, r.kind, r.target) == (n.seq, n.claimed_as, t.key)]
