"""Notices on this machine, for ``agentrun demo``: a local webhook that writes each notice it
receives to a file, and a notifier serving in a thread of its own (the demo's main thread
runs the TUI). A newcomer sees a notice arrive when the demo's run asks for approval."""

from __future__ import annotations

import asyncio
import json
import threading
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..stores import Store
from .notices import parse_kinds
from .notifier import Notifier
from .targets import check_targets


class FileSink:
    """An HTTP server on 127.0.0.1 taking Apprise's ``json://`` posts; each notice becomes
    a few lines of ``path`` (its title, then its text)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                try:
                    notice = json.loads(self.rfile.read(n))
                    text = f"{notice.get('title', '')}\n{notice.get('message', '')}\n\n"
                except ValueError:
                    self.send_response(400)
                    self.end_headers()
                    return
                with lock:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with open(path, "a", encoding="utf-8") as f:
                        f.write(text)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass  # the TUI owns the terminal

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"json://127.0.0.1:{self.server.server_address[1]}/notices"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class NotifierThread:
    """A Notifier serving ``store`` to ``urls`` on its own event loop, until ``stop()``."""

    def __init__(self, store: Store, urls: list[str]) -> None:
        self.notifier = Notifier(store, check_targets(urls), kinds=parse_kinds(None))
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._main, name="agentrun-notify", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        try:
            self._loop.run_until_complete(self.notifier.serve(self._stop))
        finally:
            self._loop.close()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop serving; True when it has."""
        if self._thread.is_alive():
            with suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        return not self._thread.is_alive()


def demo_notices(store: Store, path: Path) -> tuple[FileSink, NotifierThread]:
    """Notices of ``store`` written to ``path`` through a local webhook; BadTargetError when
    the notify extra is not installed."""
    sink = FileSink(path)
    try:
        return sink, NotifierThread(store, [sink.url])
    except BaseException:
        sink.close()
        raise
