"""The worker's log lines carry the run, attempt, step and owner they are about (SPEC §12).

The fields live in a context variable that the worker sets for each run's task and the journal
wrapper (``observe.py``) updates per step, so that a line logged anywhere below (a tool, a
model adapter's retry, the worker's own verdict on the attempt) says which run it concerns
without every ``log.info`` passing them. :class:`FieldsFilter` copies them onto each record
(``record.run`` and so on, None when unknown); :class:`JsonFormatter` prints one JSON object a
line. Standard library only.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from typing import Any

FIELDS = ("run", "attempt", "step", "owner")

# (run, attempt, step, owner) of whatever the current task is doing; None when unknown.
_current: contextvars.ContextVar[tuple[str | None, int | None, str | None, str | None]] = (
    contextvars.ContextVar("durableagent_log_fields", default=(None, None, None, None))
)


def set_run(run_id: str, owner: str | None) -> None:
    """The current task works on ``run_id`` (a worker's task per run)."""
    _current.set((run_id, None, None, owner))


def set_attempt(attempt: int) -> None:
    """The current run's attempt (its lease epoch) began."""
    run, _, _, owner = _current.get()
    _current.set((run, attempt, None, owner))


def set_step(step: str | None) -> contextvars.Token[Any]:
    """The current attempt is in ``step``; reset with the token it returns."""
    run, attempt, _, owner = _current.get()
    return _current.set((run, attempt, step, owner))


def reset(token: contextvars.Token[Any]) -> None:
    _current.reset(token)


def current() -> dict[str, Any]:
    """The fields of the current task, as a log record carries them."""
    return dict(zip(FIELDS, _current.get(), strict=True))


class FieldsFilter(logging.Filter):
    """Puts ``run``, ``attempt``, ``step`` and ``owner`` on every record (keeping any a caller
    gave through ``extra=``). Add it to a handler: it then sees every logger's records."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in zip(FIELDS, _current.get(), strict=True):
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class TextFormatter(logging.Formatter):
    """The worker's plain lines, with the run's fields appended as ``key=value`` when known."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = [f"{k}={v}" for k in FIELDS if (v := getattr(record, k, None)) is not None]
        return f"{line} [{' '.join(fields)}]" if fields else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message, the run's
    fields (null when unknown) and the exception's text when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, Any] = {
            "time": f"{at}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for k in FIELDS:
            out[k] = getattr(record, k, None)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure(*, verbose: bool, fmt: str, stream: Any) -> None:
    """The worker's logging: every logger's records to ``stream`` with the run's fields, as
    text or JSON (``fmt``: "text" or "json")."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(FieldsFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
