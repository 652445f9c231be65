"""Real receivers for notices on this machine: an HTTP server taking Apprise's ``json://``
webhooks, and an SMTP server (aiosmtpd) taking its ``mailto://`` mail."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Webhook:
    """Every JSON body posted to it, with the time it arrived. ``down``: answer 503."""

    def __init__(self) -> None:
        self.received: list[tuple[float, dict[str, Any]]] = []
        self.down = False
        self.delay = 0.0  # seconds each answer waits: a target that times out
        self.lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                time.sleep(sink.delay)
                if sink.down:
                    self.send_response(503)
                    self.end_headers()
                    return
                with sink.lock:
                    sink.received.append((time.time(), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"json://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def messages(self) -> list[dict[str, Any]]:
        with self.lock:
            return [m for _, m in self.received]

    def wait(self, cond: Callable[[list[dict[str, Any]]], bool], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond(self.messages()):
                return
            time.sleep(0.02)
        raise AssertionError(f"not received in {timeout}s: {self.messages()}")


@contextmanager
def webhook() -> Iterator[Webhook]:
    sink = Webhook()
    sink.thread.start()
    try:
        yield sink
    finally:
        sink.server.shutdown()
        sink.server.server_close()


class Mailbox:
    """The mail an aiosmtpd server received."""

    def __init__(self) -> None:
        self.mails: list[tuple[str, list[str], str]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.mails.append(
            (
                envelope.mail_from,
                list(envelope.rcpt_tos),
                envelope.content.decode("utf8", "replace"),
            )
        )
        return "250 OK"


@contextmanager
def smtp() -> Iterator[tuple[Mailbox, int]]:
    import socket

    from aiosmtpd.controller import Controller

    with socket.socket() as probe:  # a free port (the controller cannot be given 0)
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()
