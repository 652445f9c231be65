"""Helpers for the ``agentrun web`` tests: the server and Debian's Chromium as real processes,
and the terminal a browser draws, read back as text.

The page draws the terminal on a canvas, so its text is not in the DOM. What the browser draws
is exactly the byte stream the server sends over the websocket; the tests capture those frames
(Playwright's websocket events) and replay them into ``pyte``, a terminal emulator, to read the
screen a user sees.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# No name resolves but localhost: a test browser never looks anything up outside.
NO_DNS = "MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1"
INSTALL_CHROMIUM = (
    f"the browser tests need Debian's Chromium at {CHROMIUM}: apt-get install -y chromium "
    "(.ci/run installs it when it is missing)"
)
TESTS = Path(__file__).parent


def deadline_poll(cond: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """Poll ``cond()`` until it returns something truthy; fail naming ``what`` after
    ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > end:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


def require_chromium() -> str:
    """The Chromium binary, or a failure (never a skip) saying how to install it."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(INSTALL_CHROMIUM, pytrace=False)
    try:
        import playwright  # noqa: F401
        import pyte  # noqa: F401
    except ImportError as e:
        pytest.fail(f"{e}: pip install -e '.[test]'", pytrace=False)
    return CHROMIUM


# -- processes ------------------------------------------------------------------------------


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None
    if state in ("Z", "X"):  # exited, not yet reaped: gone for our purposes
        return None
    return raw.rstrip(b"\0").decode(errors="replace").split("\0")


def processes_with(*args: str) -> list[int]:
    """Live processes whose command line holds every one of ``args`` (found in /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        argv = _cmdline(int(entry))
        if argv and all(a in argv for a in args):
            found.append(int(entry))
    return found


def app_processes(store: Path) -> list[int]:
    """Live ``agentrun tui`` processes serving ``store``."""
    return processes_with("tui", str(store.resolve()))


def kill_processes_with(*args: str) -> None:
    """A failed test leaves nothing running behind it."""
    for pid in processes_with(*args):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def kill_leftovers(store: Path) -> None:
    kill_processes_with("tui", str(store.resolve()))


def agentrun_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("AGENTRUN_STORE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


@dataclass
class WebServer:
    """``agentrun web`` running in a subprocess; ``url`` is the page's URL with the token."""

    process: subprocess.Popen[bytes]
    store: Path
    url: str
    log: Path

    @property
    def base(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def token(self) -> str:
        return parse_qs(urlsplit(self.url).query)["token"][0]

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 80)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def agentrun_web(store: Path, *args: str, cwd: Path | None = None) -> Iterator[WebServer]:
    """Start ``agentrun web --port 0`` on ``store``; stop it (and anything it left) after."""
    out = store.parent / f"web-{time.monotonic_ns()}.out"
    err = out.with_suffix(".err")
    with out.open("wb") as o, err.open("wb") as e:
        process = subprocess.Popen(
            [sys.executable, "-m", "durableagent.cli", "web", "--store", str(store), *args]
            + ([] if "--port" in args else ["--port", "0"]),
            stdout=o,
            stderr=e,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=agentrun_env(),
        )

    def url() -> str | None:
        if process.poll() is not None:
            pytest.fail(f"agentrun web exited {process.returncode}: {err.read_text()}")
        m = re.search(r"^(http://\S+)$", out.read_text(), re.M)
        return m.group(1) if m else None

    try:
        yield WebServer(process, store, deadline_poll(url, 30, "agentrun web's URL"), err)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        kill_leftovers(store)


@dataclass
class Chromium:
    """Debian's Chromium in its own process group, driven over CDP by Playwright."""

    process: subprocess.Popen[bytes]
    endpoint: str

    def kill(self) -> None:
        """Die abruptly, as a crashed or force-quit browser does."""
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@contextmanager
def chromium(tmp: Path, *, resolve: str = "") -> Iterator[Chromium]:
    """Start headless Chromium with a DevTools port (never a downloaded browser).
    ``resolve`` adds host-resolver rules (e.g. ``MAP rebind.test 127.0.0.1``)."""
    binary = require_chromium()
    profile = tmp / f"chromium-{time.monotonic_ns()}"
    profile.mkdir()
    # Its singleton socket dirs go here, not straight in /tmp (they outlive a killed browser);
    # short, as a unix socket path must be.
    scratch = tempfile.mkdtemp(prefix="chromium-")
    process = subprocess.Popen(
        [
            binary,
            *CHROMIUM_FLAGS,
            "--host-resolver-rules=" + ", ".join(filter(None, [resolve, NO_DNS])),
            f"--user-data-dir={profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "TMPDIR": scratch},
    )
    active = profile / "DevToolsActivePort"

    def endpoint() -> str | None:
        if process.poll() is not None:
            pytest.fail(f"chromium exited {process.returncode}")
        lines = active.read_text().split() if active.exists() else []
        return f"ws://127.0.0.1:{lines[0]}{lines[1]}" if len(lines) >= 2 else None

    try:
        yield Chromium(process, deadline_poll(endpoint, 30, "chromium's DevTools port"))
    finally:
        if process.poll() is None:
            process.terminate()
            with suppress(subprocess.TimeoutExpired):
                process.wait(10)
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            process.wait(10)
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


# -- what the browser shows ------------------------------------------------------------------


@dataclass
class Terminal:
    """The terminal the page draws, rebuilt from the websocket's frames with pyte."""

    width: int = 80
    height: int = 24
    chunks: list[bytes] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)

    def attach(self, page: Any) -> None:
        """Record every websocket the page opens and every frame the server sends it."""

        def on_websocket(ws: Any) -> None:
            self.urls.append(ws.url)
            query = parse_qs(urlsplit(ws.url).query)
            self.width = int(query.get("width", ["80"])[0])
            self.height = int(query.get("height", ["24"])[0])
            ws.on("framereceived", self._frame)

        page.on("websocket", on_websocket)

    def _frame(self, payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            self.chunks.append(payload)

    def lines(self) -> list[str]:
        import pyte

        screen = pyte.Screen(self.width, self.height)
        pyte.ByteStream(screen).feed(b"".join(self.chunks))
        return [line.rstrip() for line in screen.display]

    def text(self) -> str:
        return "\n".join(self.lines())

    def runs_pane(self) -> str:
        """The lines of the runs table's box."""
        lines = self.lines()
        start = next((i for i, line in enumerate(lines) if "─ runs ─" in line), None)
        if start is None:
            return ""
        end = next((i for i in range(start + 1, len(lines)) if "╰" in lines[i]), len(lines))
        return "\n".join(lines[start:end])

    def wait_for(self, page: Any, cond: Callable[[Terminal], bool], what: str) -> None:
        """Let the page run until ``cond(self)`` holds (Playwright delivers events while the
        page waits); fail with the screen after 30 s."""
        end = time.monotonic() + 30
        while not cond(self):
            if time.monotonic() > end:
                pytest.fail(f"timed out waiting for {what}; the screen:\n{self.text()}")
            page.wait_for_timeout(50)
