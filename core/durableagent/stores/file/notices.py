"""The FileStore's notices: ``.notices/<run>/<seq>.<kind>.<target>.json`` each, claimed and
marked under one flock (``.notices/.lock``) so that two notifiers on one host never both
claim one notice. A notice file is replaced atomically: a crash leaves the claim before or
after, never a part."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ...errors import StoreError
from ...ids import check_run_id
from ...roster import NoticeRecord
from .fs import StoreDir

NOTICES_DIR = ".notices"


class Notices:
    """Claims and marks for one store directory."""

    def __init__(self, store_dir: StoreDir) -> None:
        self.dir = store_dir

    @contextmanager
    def _locked(self) -> Iterator[None]:
        path = self.dir.root / NOTICES_DIR
        try:
            path.mkdir(exist_ok=True)
            fd = os.open(path / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StoreError(f"cannot open {path}/.lock: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _name(seq: int, kind: str, target: str) -> str:
        return f"{seq}.{kind}.{target}.json"

    def _read(self, folder: str, name: str) -> NoticeRecord | None:
        data = self.dir.read_file(folder, name)
        if data is None:
            return None
        try:
            return NoticeRecord.from_dict(json.loads(data))
        except (ValueError, KeyError, TypeError):
            return None  # a torn or edited claim: claimed again, at worst sent once more

    def claim(
        self, run_id: str, seq: int, kind: str, target: str, *, by: str, stale_after: float
    ) -> bool:
        folder = f"{NOTICES_DIR}/{check_run_id(run_id)}"
        name = self._name(seq, kind, target)
        now = time.time()
        with self._locked():
            was = self._read(folder, name)
            if was is not None and (
                was.sent_at is not None
                or (was.claimed_by != by and was.claimed_at >= now - stale_after)
            ):
                return False
            claim = NoticeRecord(run_id, seq, kind, target, by, now)
            self.dir.write_file(folder, name, json.dumps(claim.to_dict()).encode())
        return True

    def mark(self, run_id: str, seq: int, kind: str, target: str) -> None:
        folder = f"{NOTICES_DIR}/{check_run_id(run_id)}"
        name = self._name(seq, kind, target)
        with self._locked():
            was = self._read(folder, name)
            by, at = (was.claimed_by, was.claimed_at) if was else ("", time.time())
            sent = NoticeRecord(run_id, seq, kind, target, by, at, time.time())
            self.dir.write_file(folder, name, json.dumps(sent.to_dict()).encode())

    def of(self, run_id: str) -> list[NoticeRecord]:
        folder = f"{NOTICES_DIR}/{check_run_id(run_id)}"
        found = []
        for stem in self.dir.listing(folder, ".json"):
            n = self._read(folder, f"{stem}.json")
            if n is not None:
                found.append(n)
        return sorted(found, key=lambda n: n.claimed_at)
