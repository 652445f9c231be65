"""What a message handled while the app shuts down meets: its widgets gone (NoMatches) or,
later still, no screen at all (ScreenStackError, from ``app.screen``). A late refresh,
highlight or read lands there and draws nothing."""

from __future__ import annotations

from textual.app import ScreenStackError
from textual.css.query import NoMatches

SHUTTING_DOWN: tuple[type[Exception], ...] = (NoMatches, ScreenStackError)
