"""What a provider's HTTP failure means for a durable run: wait and retry, or tell a human."""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping

from ..errors import ModelError, ModelRetryError

# Statuses that pass with time: timeout, conflict, too early, rate limited, any server error
# (including Anthropic's 529 "overloaded").
TRANSIENT = frozenset({408, 409, 425, 429})

_ADVICE = {
    400: "the provider refused the request as malformed",
    401: "the API key was refused: check it (OPENAI_API_KEY / ANTHROPIC_API_KEY or api_key=)",
    403: "the API key may not use this model or endpoint",
    404: "no such endpoint or model: check the model name and base_url",
    413: "the conversation is too large for the provider",
    422: "the provider could not process the request",
}


def is_transient(status: int) -> bool:
    """Whether a call that failed with ``status`` is worth repeating unchanged later."""
    return status in TRANSIENT or status >= 500


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the provider asked us to wait: ``retry-after-ms``, else ``Retry-After`` as
    seconds or as an HTTP date. None when absent or unreadable (never negative, never inf)."""
    ms = _number(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT even when it fails to say so
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def status_error(provider: str, status: int, headers: Mapping[str, str], detail: str) -> ModelError:
    """The error for an HTTP failure: ModelRetryError (with the provider's Retry-After) when
    it passes with time, ModelError with what to check otherwise."""
    detail = _short(detail)
    if is_transient(status):
        wait = retry_after(headers)
        when = f"; it asked to wait {wait:g}s" if wait is not None else ""
        return ModelRetryError(
            f"{provider} answered HTTP {status} ({detail}){when}; the model step will be "
            "tried again",
            status=status,
            retry_after=wait,
        )
    advice = _ADVICE.get(status, "the provider refused the request")
    return ModelError(f"{provider} answered HTTP {status}: {advice} ({detail})", status=status)


def connection_error(provider: str, where: str, detail: str) -> ModelRetryError:
    """No answer at all (refused, reset, timed out): transient, tried again later."""
    return ModelRetryError(
        f"could not get an answer from {provider} at {where} ({_short(detail)}); the model "
        "step will be tried again"
    )


def _short(text: str, width: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"
