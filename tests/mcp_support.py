"""Real MCP servers for the tests (``_mcp_server.py`` in a subprocess, over stdio or streamable
HTTP on 127.0.0.1), and reading what they counted on disk."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mcp

SERVER = Path(__file__).resolve().parent / "_mcp_server.py"


def stdio(folder: Path, variant: str = "v1") -> mcp.StdioServerParameters:
    """How to start the test server over stdio, counting into ``folder``."""
    return mcp.StdioServerParameters(
        command=sys.executable, args=[str(SERVER), str(folder), "--variant", variant]
    )


def lines(folder: Path, what: str) -> list[str]:
    """What the server counted: ``calls`` (``tool key``), ``effects``, ``tickets``."""
    p = folder / f"{what}.log"
    return p.read_text().splitlines() if p.exists() else []


def keys(folder: Path, tool: str) -> list[str]:
    """The idempotency keys the server received with calls of ``tool``, in order."""
    return [line.split(" ", 1)[1] for line in lines(folder, "calls") if line.startswith(tool + " ")]


def kill_servers(folder: Path) -> None:
    """Kill every server process that counted into ``folder`` and may still run."""
    for pid in lines(folder, "pids"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


class HttpServer:
    """The test server over streamable HTTP on 127.0.0.1, in a subprocess. ``stop()`` kills
    it; ``start()`` brings it back on the same port."""

    def __init__(self, folder: Path, variant: str = "v1") -> None:
        self.folder = folder
        self.variant = variant
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> HttpServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "port").unlink(missing_ok=True)
        args = [str(SERVER), str(self.folder), "--http", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [sys.executable, *args, "--variant", self.variant],
            stdout=subprocess.DEVNULL,
            stderr=open(self.folder / "http.log", "ab"),  # noqa: SIM115 - the child holds it
        )
        deadline = time.monotonic() + 30
        while not (self.folder / "port").exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError((self.folder / "http.log").read_text())
            time.sleep(0.02)
        self.port = int((self.folder / "port").read_text())
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
