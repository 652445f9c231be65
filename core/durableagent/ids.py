"""Run ids: they become file names and SQL keys, so they are checked before any I/O."""

from __future__ import annotations

import re

from .errors import InvalidRunIdError

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def valid_run_id(run_id: object) -> bool:
    """True for 1-128 ASCII letters, digits, ``_``, ``.``, ``-`` starting with a letter or digit."""
    return isinstance(run_id, str) and run_id.isascii() and _RUN_ID.fullmatch(run_id) is not None


def check_run_id(run_id: object) -> str:
    """Return ``run_id`` or raise InvalidRunIdError, before anything touches the disk."""
    if not valid_run_id(run_id):
        raise InvalidRunIdError(run_id)
    assert isinstance(run_id, str)
    return run_id
