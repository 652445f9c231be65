"""The PostgresStore's worker registry (the ``workers`` table) and the notices a notifier
claims and marks (the ``notices`` table). PostgresStore delegates to a ``Registry``."""

from __future__ import annotations

import time
from typing import Any

from psycopg.types.json import Jsonb

from ...roster import NoticeRecord, WorkerInfo
from .connector import Connection, Connector
from .sql import bound as _q


class Registry:
    """Workers and notices for one store (its connector)."""

    def __init__(self, db: Connector) -> None:
        self._db = db

    def beat(self, info: WorkerInfo) -> None:
        args = {"owner": info.owner, "info": Jsonb(info.to_dict()), "beat_at": info.beat_at}
        self._db.read("registering a worker", lambda c: c.execute(*_q("beat", args)))

    def workers(self) -> list[WorkerInfo]:
        def read(conn: Connection) -> list[tuple[Any, ...]]:
            return conn.execute(*_q("workers")).fetchall()

        found = []
        for owner, info in self._db.read("listing workers", read):
            try:
                if not isinstance(info, dict):
                    raise ValueError("not an object")
                found.append(WorkerInfo.from_dict(info))
            except (ValueError, KeyError, TypeError) as e:
                found.append(
                    WorkerInfo.unreadable(
                        owner, f"worker {owner!r}: its row is not a registration ({e})"
                    )
                )
        return found

    def forget_worker(self, owner: str) -> bool:
        args = {"owner": owner}
        got = self._db.read(
            "forgetting a worker", lambda c: c.execute(*_q("forget_worker", args)).rowcount
        )
        return bool(got)

    def claim_notice(
        self, run_id: str, seq: int, kind: str, target: str, *, by: str, stale_after: float
    ) -> bool:
        now = time.time()
        args = {
            "run_id": run_id,
            "seq": seq,
            "kind": kind,
            "target": target,
            "by": by,
            "at": now,
            "stale": now - stale_after,
        }
        got = self._db.read(
            "claiming a notice", lambda c: c.execute(*_q("claim_notice", args)).fetchone()
        )
        return got is not None

    def mark_notice(self, run_id: str, seq: int, kind: str, target: str) -> None:
        args = {"run_id": run_id, "seq": seq, "kind": kind, "target": target, "at": time.time()}
        self._db.read("marking a notice sent", lambda c: c.execute(*_q("mark_notice", args)))

    def notices(self, run_id: str) -> list[NoticeRecord]:
        def read(conn: Connection) -> list[tuple[Any, ...]]:
            return conn.execute(*_q("notices_of", {"run_id": run_id})).fetchall()

        return [
            NoticeRecord(run_id, int(seq), kind, target, by, float(at), sent)
            for seq, kind, target, by, at, sent in self._db.read("reading notices", read)
        ]
