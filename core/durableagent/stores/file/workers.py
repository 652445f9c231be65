"""The FileStore's worker registry: ``.workers/<owner>.json``, one file per worker, each
written aside and renamed over the last (a reader sees one whole registration or the one
before it)."""

from __future__ import annotations

import json

from ...errors import StoreError
from ...roster import WorkerInfo, file_name, owner_of_file
from .fs import StoreDir

WORKERS_DIR = ".workers"


def beat(store_dir: StoreDir, info: WorkerInfo) -> None:
    """Replace the owner's registration with ``info``."""
    data = json.dumps(info.to_dict(), separators=(",", ":")).encode()
    store_dir.write_file(WORKERS_DIR, file_name(info.owner), data)


def workers(store_dir: StoreDir) -> list[WorkerInfo]:
    """Every registration, by owner; one that cannot be read says why in ``problem``."""
    found = []
    for stem in store_dir.listing(WORKERS_DIR, ".json"):
        owner = owner_of_file(stem)
        where = f"{store_dir.root}/{WORKERS_DIR}/{stem}.json"
        try:
            data = store_dir.read_file(WORKERS_DIR, f"{stem}.json")
        except StoreError as e:
            found.append(WorkerInfo.unreadable(owner, str(e)))
            continue
        if data is None:
            continue  # forgotten since the listing
        try:
            value = json.loads(data)
            if not isinstance(value, dict):
                raise ValueError("not an object")
            found.append(WorkerInfo.from_dict(value))
        except (ValueError, KeyError, TypeError) as e:
            found.append(
                WorkerInfo.unreadable(
                    owner, f"{where} is not a worker registration (not JSON: {e}); remove it"
                )
            )
    return sorted(found, key=lambda w: w.owner)


def forget(store_dir: StoreDir, owner: str) -> bool:
    """Remove the owner's registration; False when there was none."""
    return store_dir.remove(WORKERS_DIR, file_name(owner))
