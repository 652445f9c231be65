"""What both adapters do with their SDK's client: refuse settings the adapter sets itself,
build a client with the SDK's retries off, and rebuild it for each new event loop."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

C = TypeVar("C")


class SDKClient(ABC, Generic[C]):
    """Holds an adapter's SDK client (``C``). One given by the user is used as it is; one the
    adapter builds (``_new_client``) is built at once, so that missing credentials are said
    then rather than at the first call, and again for each new event loop (its pooled
    connections belong to the loop that opened them)."""

    _client: C

    def _hold(self, client: C | None, reserved: Iterable[str], settings: Mapping[str, Any]) -> None:
        clash = sorted(set(reserved) & set(settings))
        if clash:
            raise TypeError(f"{type(self).__name__} sets {', '.join(clash)} itself; leave them out")
        self._own = client is None
        self._client = client if client is not None else self._new_client()
        self._loop: asyncio.AbstractEventLoop | None = None

    @abstractmethod
    def _new_client(self) -> C:
        """A new SDK client with its retries off, from the adapter's settings."""

    @property
    def client(self) -> C:
        """The SDK client; one built here is rebuilt for each new event loop."""
        if self._own:
            loop = asyncio.get_running_loop()
            if self._loop is not None and self._loop is not loop:
                self._client = self._new_client()
            self._loop = loop
        return self._client
