"""The demo's ticket system and outbox: JSON files in ``<store>/.demo/``, written under a lock.
The ticket system deduplicates on the step's idempotency key and refuses a stale fencing
token; the outbox does neither."""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..stores import is_url
from ..stores.file.fs import write_atomically

log = logging.getLogger("durableagent.demo")

DEMO_DIR = ".demo"
SERVICE_DOWN = "policy-service-down"


# -- the ticket system ----------------------------------------------------------------------


TICKETS_BESIDE = "agentrun-demo-tickets"  # where a store that is no directory keeps them


def tickets_root(store: str | os.PathLike[str]) -> Path:
    """The directory the demo's ticket system is kept under: the store's own, or, for a
    store that is no directory (a ``postgresql://`` URL), ``./agentrun-demo-tickets`` (never
    a directory named after the URL)."""
    text = os.fspath(store)
    return Path(TICKETS_BESIDE) if is_url(text) else Path(text)


def demo_dir(root: str | os.PathLike[str]) -> Path:
    """Where the demo's ticket system lives (``.demo`` under :func:`tickets_root`)."""
    return tickets_root(root) / DEMO_DIR


def read_list(root: Path, name: str) -> list[dict[str, Any]]:
    """The demo's ``tickets`` or ``outbox`` list."""
    try:
        data = json.loads((demo_dir(root) / f"{name}.json").read_text())
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


class StaleFenceError(Exception):
    """The demo's ticket system refused a write from a lease holder that was superseded."""


def add_item(
    root: Path,
    name: str,
    make: Callable[[int], dict[str, Any]],
    *,
    key: str | None = None,
    fence: Any = None,
) -> dict[str, Any]:
    """Append ``make(n)`` (n: the next number) to a list file, durably, under a lock: several
    runs and processes file tickets at once. With ``key``, an item already filed under that
    key is returned instead (how the ticket system deduplicates). With ``fence`` (a run's
    ``(run_id, epoch)``, see ToolContext.fence), a write whose epoch is lower than one seen
    for that run is refused (StaleFenceError): its holder was paused past its lease and
    another worker runs the run now."""
    folder = demo_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _check_fence(root, fence)
        items = read_list(root, name)
        if key is not None:
            for old in items:
                if isinstance(old, dict) and old.get("key") == key:
                    return old
        item = make(len(items) + 1)
        items.append(item)
        write_atomically(folder / f"{name}.json", (json.dumps(items, indent=2) + "\n").encode())
    finally:
        os.close(lock)
    return item


def _check_fence(root: Path, fence: Any) -> None:
    """Refuse a stale epoch; remember the highest one seen per run (under the list lock)."""
    if not (isinstance(fence, tuple | list) and len(fence) == 2):
        return
    run_id, epoch = str(fence[0]), fence[1]
    if not isinstance(epoch, int):
        return
    path = demo_dir(root) / "fences.json"
    try:
        seen = json.loads(path.read_text())
    except (OSError, ValueError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    highest = seen.get(run_id)
    if isinstance(highest, int) and epoch < highest:
        raise StaleFenceError(
            f"refused: run {run_id!r} is held at epoch {highest} now; this write carries "
            f"epoch {epoch} (its worker lost the lease)"
        )
    if highest != epoch:
        seen[run_id] = epoch
        write_atomically(path, (json.dumps(seen, indent=2) + "\n").encode())


def demo_hints(root: Path) -> dict[str, str]:
    """Where the on-call human checks whether each demo write happened (the reconcile
    dialog's hints)."""
    here = demo_dir(root)
    return {
        "create_ticket": f"look in {here / 'tickets.json'} for a ticket with this step's key",
        "send_email": f"look in {here / 'outbox.json'} for an email with this step's key",
    }
