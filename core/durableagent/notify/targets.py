"""Where notices go: Apprise URLs (Slack, email, ntfy, PagerDuty, Matrix, ``json://``
webhooks, ...). The one module that imports apprise, and only when a target is made: the
core loads without the ``notify`` extra."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from ..errors import DurableAgentError


class BadTargetError(DurableAgentError):
    """A notify target that Apprise cannot use (``url`` names it), or no Apprise at all."""

    def __init__(self, url: str, why: str) -> None:
        self.url = url
        super().__init__(why)


class DeliveryError(DurableAgentError):
    """A notice the target did not take (it is tried again)."""


def _apprise() -> Any:
    try:
        import apprise
    except ImportError:
        raise BadTargetError(
            "", "notices need the notify extra: pip install 'durableagent[notify]'"
        ) from None
    return apprise


def shown(url: str) -> str:
    """A target URL for messages and logs: the scheme and host, never a token or password
    (those sit in the user part or the path of most Apprise URLs)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url[:40]
    host = rest.split("/", 1)[0].rpartition("@")[2].split("?", 1)[0]
    return f"{scheme}://{host}/…" if host else f"{scheme}://…"


class Target:
    """One Apprise URL. ``key``: a digest of the URL, what the store records (a URL may hold
    a secret); ``name``: the URL without its secrets."""

    def __init__(self, url: str) -> None:
        apprise = _apprise()
        self.url = url
        self.key = hashlib.sha256(url.encode()).hexdigest()[:16]
        self.name = shown(url)
        self._apprise = apprise.Apprise()
        if not self._apprise.add(url):
            raise BadTargetError(
                url,
                f"--to {url!r} is not a notify URL Apprise knows (see "
                "https://github.com/caronc/apprise/wiki for the forms: slack://, mailto://, "
                "ntfy://, json://, ...)",
            )

    def send(self, title: str, body: str) -> None:
        """Deliver one notice; DeliveryError when the target did not take it."""
        try:
            ok = self._apprise.notify(title=title, body=body)
        except Exception as e:  # a plugin's own failure: the target is down, not us
            raise DeliveryError(f"{self.name}: {e}") from None
        if not ok:
            raise DeliveryError(f"{self.name} did not take the notice (see the log above)")


def check_targets(urls: Iterable[str]) -> list[Target]:
    """Every URL as a Target; BadTargetError naming the first that does not parse (nothing
    is sent before every one is known good)."""
    return [Target(u) for u in urls]
