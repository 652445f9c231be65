"""Where runs live: the ``Store`` protocol (``protocol.py``), its two stores and
``open_store``.

``FileStore`` keeps runs in one directory on one disk (``file/``); ``PostgresStore`` lets
several hosts share them in PostgreSQL (``postgres/``, extra ``postgres``). Both pass one
contract suite. The worker, the command line and the TUI reach a store only through the
protocol: above it, nothing knows whether runs live in files or in a database.
"""

from __future__ import annotations

import importlib
import os

from ..errors import StoreError
from ..fold import Summary
from ..ids import check_run_id, valid_run_id
from .file import FileStore
from .protocol import LOST, STOPPED, Attempt, Check, Lease, Store, default_owner


def is_url(spec: str) -> bool:
    """True for a ``postgresql://`` or ``postgres://`` store URL."""
    return spec.startswith(("postgresql://", "postgres://"))


def open_store(
    spec: str | os.PathLike[str], *, create: bool = True, lease_ttl: float | None = None
) -> Store:
    """The store ``spec`` names: a ``postgresql://`` URL (``?schema=NAME`` picks the schema)
    or a directory. ``create=False`` refuses a store that does not exist yet."""
    text = os.fspath(spec)
    ttl = {} if lease_ttl is None else {"lease_ttl": lease_ttl}
    if is_url(text):
        try:
            # Imported by name so that psycopg loads only for a PostgreSQL store.
            postgres = importlib.import_module(".postgres", __package__)
        except ImportError as e:
            raise StoreError(
                f"a PostgreSQL store needs the postgres extra ({e}): "
                "pip install 'durableagent[postgres]'"
            ) from None
        store: Store = postgres.PostgresStore.from_url(text, create=create, **ttl)
        return store
    return FileStore(text, create=create, **ttl)


__all__ = [
    "LOST",
    "STOPPED",
    "Attempt",
    "Check",
    "FileStore",
    "Lease",
    "Store",
    "Summary",
    "check_run_id",
    "default_owner",
    "is_url",
    "open_store",
    "valid_run_id",
]
