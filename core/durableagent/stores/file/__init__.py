"""FileStore: the embedded store, one fsynced JSONL journal per run in one directory (see
``store.py``), with its leases (``leases.py``), its side logs and summary index (``logs.py``,
``summaries.py``) and the filesystem moves it is made of (``fs.py``)."""

from __future__ import annotations

from .failures import WORKER_DIR
from .feed import run_of_path
from .store import FileStore

__all__ = ["WORKER_DIR", "FileStore", "run_of_path"]
