"""The workers' shared failure counts of a FileStore: ``.worker/<run>.json`` each, replaced
atomically. Advisory: a count that does not parse reads as none."""

from __future__ import annotations

import json
from typing import Any

from ...errors import StoreError
from .fs import StoreDir

WORKER_DIR = ".worker"


class FailureCounts:
    """The failure bookkeeping of each run of one store directory (run ids checked by the
    caller)."""

    def __init__(self, store_dir: StoreDir) -> None:
        self.dir = store_dir

    def read(self, run_id: str) -> dict[str, Any] | None:
        try:
            data = self.dir.read_file(WORKER_DIR, f"{run_id}.json")
            value = None if data is None else json.loads(data)
        except (StoreError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def write(self, run_id: str, failures: dict[str, Any]) -> None:
        self.dir.write_file(WORKER_DIR, f"{run_id}.json", json.dumps(failures).encode())

    def clear(self, run_id: str) -> bool:
        return self.dir.remove(WORKER_DIR, f"{run_id}.json")
