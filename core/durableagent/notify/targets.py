"""Where notices go: Apprise URLs (Slack, email, ntfy, PagerDuty, Matrix, ``json://``
webhooks, ...). The one module that imports apprise, and only when a target is made: the
core loads without the ``notify`` extra."""

from __future__ import annotations

import hashlib
import logging
import re
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


def shown(url: str, private: str | None = None) -> str:
    """A target URL for messages and logs: its scheme, host and port, never a password or
    a token. ``private`` is Apprise's own form of the URL with its secrets masked (it knows
    which part of each service's URL is one: a Slack URL's "host" is a token): from it, the
    user and host part only, each masked part as ``…``; its path and query are left out
    (a webhook's path may be a secret too). Without it, the host and port alone."""
    scheme, sep, rest = (private or url).partition("://")
    if not sep:
        return "…"
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if private is None:
        netloc = netloc.rpartition("@")[2]
    netloc = _MASKED.sub("…", netloc)
    return f"{scheme}://{netloc}/…" if netloc else f"{scheme}://…"


# How Apprise masks a secret in its private URL: ``****``, or ``T...2`` (its first and last
# characters: one of them is too many for us).
_MASKED = re.compile(r"\*{2,}|[^/:@.]*\.\.\.[^/:@.]*")


class Target:
    """One Apprise URL. ``key``: a digest of the URL, what the store records (a URL may hold
    a secret); ``name``: the URL without its secrets."""

    def __init__(self, url: str) -> None:
        apprise = _apprise()
        self.url = url
        self.key = hashlib.sha256(url.encode()).hexdigest()[:16]
        self._apprise = apprise.Apprise()
        self._apprise_module = apprise
        # Apprise logs its own "Unparseable URL" as an ERROR: the refusal below says it,
        # naming the flag, and is the one line a human should read.
        said = logging.getLogger("apprise")
        level = said.level
        said.setLevel(logging.CRITICAL)
        try:
            added = self._apprise.add(url)
        finally:
            said.setLevel(level)
        if not added:
            raise BadTargetError(
                url,
                f"{url!r} is not a notify URL Apprise knows (see "
                "https://github.com/caronc/apprise/wiki for the forms: slack://, mailto://, "
                "ntfy://, json://, ...)",
            )
        self.name = shown(url, self._apprise[0].url(privacy=True))

    def send(self, title: str, body: str) -> None:
        """Deliver one notice; DeliveryError when the target did not take it."""
        try:
            # The body is plain text: said so, a mail is sent as text/plain with its lines
            # (unsaid, Apprise takes it for HTML: the mail's plain part, made from that
            # "HTML", loses every line break, and its HTML part has no <br>).
            ok = self._apprise.notify(
                title=title, body=body, body_format=self._apprise_module.NotifyFormat.TEXT
            )
        except Exception as e:  # a plugin's own failure: the target is down, not us
            raise DeliveryError(f"{self.name}: {e}") from None
        if not ok:
            raise DeliveryError(f"{self.name} did not take the notice (see the log above)")


def check_targets(urls: Iterable[str]) -> list[Target]:
    """Every URL as a Target; BadTargetError naming the first that does not parse (nothing
    is sent before every one is known good)."""
    return [Target(u) for u in urls]
