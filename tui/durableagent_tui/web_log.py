"""What ``agentrun web`` writes to its log: never its token.

A log is kept longer and read by more people than the printed URL is meant for (a terminal's
scrollback, a journald unit, a CI artifact), and the token in it would open every session. So
each line loses the token itself, any ``token=`` query value and the path segment that carries
one (``/ws/<token>``, ``/static/<token>/``), valid or not: a near miss of the real token is
most of it, and a line must not tell a reader which of its values was the real one.
"""

from __future__ import annotations

import logging
import re

REDACTED = "<redacted>"

_QUERY_VALUE = re.compile(r"(token=)[^&#\s'\"]*", re.IGNORECASE)
_PATH_SEGMENT = re.compile(r"(/(?:ws|static)/)[^/?#\s'\"]*", re.IGNORECASE)


def redact(text: str, token: str) -> str:
    """``text`` without ``token`` anywhere, nor any value in a place a token goes."""
    if token:
        text = text.replace(token, REDACTED)
    text = _QUERY_VALUE.sub(rf"\g<1>{REDACTED}", text)
    return _PATH_SEGMENT.sub(rf"\g<1>{REDACTED}", text)


class RedactToken(logging.Filter):
    """A handler filter that redacts every record it passes, from any logger (aiohttp's and
    textual-serve's too), its traceback included: their messages may quote a request."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; never drop it."""
        record.msg, record.args = redact(record.getMessage(), self.token), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text, self.token)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.token)
        return True
