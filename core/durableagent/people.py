"""Who decides: every human action in the journal names someone (``--by``, by default the
login name), never nobody."""

from __future__ import annotations

import getpass


def login_name() -> str | None:
    """The login name of whoever runs this process; None when the system cannot say."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        return None
    return name.strip() or None
