"""``agentrun web``: the supervisor in a browser, through textual-serve, with the locks it lacks.

textual-serve 1.1.3 runs one app process per websocket and relays its terminal stream. As it
ships it has no authentication and checks neither Origin nor Host, so any web page the user
visits can open a websocket to it and drive the app (cross-site websocket hijacking; DNS
rebinding too), even on 127.0.0.1; it starts the app through a shell; and it never kills an app
process, so a client that vanishes can leave one spinning. This module keeps its page, its
static files, its message relay and its app protocol, and adds:

- a random token on every address and every path, loopback included: in the page's query
  string, in the websocket's and the static files' paths (:meth:`WebServer.handle_static`),
  compared in constant time;
- the Host header must name the served address (DNS rebinding) and a browser's Origin must be
  that same address (a websocket without an Origin is refused too);
- no directory listing of the static files and no download route (the supervisor delivers no
  files); no response cached (every URL holds the token);
- the app started without a shell (``exec``, its own session), its command line still
  shell-quoted wherever it is shown;
- each app process asked to quit, then terminated, then killed, when its client leaves and when
  the server stops;
- no token in its log (:mod:`durableagent_tui.web_log`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import os
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from durableagent.errors import DurableAgentError

from .web_log import RedactToken, redact

log = logging.getLogger("durableagent.web")

TOKEN_PARAM = "token"
GRACE_S = 2.0  # for each of: quit when asked, exit after SIGTERM
SHUTDOWN_S = 5.0  # aiohttp's wait for handlers after the sessions are reaped

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ServeError(DurableAgentError):
    """``agentrun web`` cannot serve (the address is taken, the host is unknown, ...): said
    in one line by ``agentrun``, as every durableagent error."""


def app_argv(store: str, *, read_only: bool = False, poll: bool = False) -> list[str]:
    """The command one browser session runs: ``agentrun tui`` on the store (a directory or
    a database URL, as ``--store`` takes it), in this Python."""
    argv = [sys.executable, "-m", "durableagent.cli", "tui", "--store", store]
    if read_only:
        argv.append("--read-only")
    if poll:
        argv.append("--poll")
    return argv


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    """``0.0.0.0``, ``::`` or empty: every address of the machine."""
    if host in ("", "*"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_for_url(host: str) -> str:
    """``host`` as it is written in a URL and a Host header (IPv6 in brackets)."""
    bare = host.strip("[]")
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(bare).version == 6:
            return f"[{bare}]"
    return host.lower()


def served_names(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The names a browser may use for the served address, the one to print first."""
    names: list[str] = []
    if is_wildcard(host):
        # Not getfqdn(): a reverse lookup can hang for seconds without a resolver.
        names.append(socket.gethostname())
        with contextlib.suppress(OSError):
            for info in socket.getaddrinfo(socket.gethostname(), None):
                names.append(str(info[4][0]))
        names += ["localhost", "127.0.0.1", "::1"]
    elif is_loopback(host):
        names += [host, "localhost", "127.0.0.1", "::1"]
    else:
        names.append(host)
    names += list(extra)
    seen: dict[str, None] = {}
    for n in names:
        if n:
            seen.setdefault(host_for_url(n), None)
    return list(seen)


def allowed_hosts(names: Iterable[str], port: int) -> frozenset[str]:
    """Every Host header value that names the served address (lower case)."""
    hosts = {f"{n}:{port}" for n in names}
    if port == 80:  # browsers leave the default port out
        hosts |= set(names)
    return frozenset(h.lower() for h in hosts)


def same_token(given: str, token: str) -> bool:
    """Constant-time comparison: the time taken says nothing about how much matched."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def page_policy(host: str) -> str:
    """The page's Content-Security-Policy: its own scripts, styles, fonts and websocket only.
    textual-serve's template asks Google for a font; the browser is not let to, so a page
    whose URL holds the token makes no third-party request (and works offline)."""
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self' 'unsafe-inline'",  # the template's inline script and onclick
            "style-src 'self' 'unsafe-inline'",  # xterm.js sets styles at run time
            "img-src 'self' data:",
            "font-src 'self' data:",
            f"connect-src 'self' ws://{host} wss://{host}",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )


def _signal_group(pid: int, sig: int) -> None:
    # The app runs in its own session (start_new_session): its group id is its pid, and
    # while it is not reaped (a zombie at worst) that id cannot be anyone else's.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def reap(process: asyncio.subprocess.Process, grace: float) -> None:
    """Wait ``grace`` seconds for ``process`` to exit (it was asked to quit), then SIGTERM its
    group, wait ``grace`` more, then SIGKILL it. Returns when it is gone."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if process.returncode is not None:
            return
        if sig is not None:
            _signal_group(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), None if sig == signal.SIGKILL else grace)
        except TimeoutError:
            continue
        return


class ReapedAppService(AppService):
    """textual-serve's AppService that runs the app without a shell, in its own session, and
    whose ``stop`` always ends with the process gone."""

    def __init__(self, argv: Sequence[str], *, grace: float = GRACE_S, **kwargs: Any) -> None:
        super().__init__(shlex.join(argv), **kwargs)
        self.argv = list(argv)
        self.grace = grace
        self._stopping: asyncio.Future[None] | None = None

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        """The app process, once started."""
        return self._process

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    async def stop(self) -> None:
        """Ask the app to quit, then terminate, then kill it; every caller waits for the same
        end (the session's handler and the server's shutdown may both ask)."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        await asyncio.shield(self._stopping)

    async def _stop(self) -> None:
        task, self._task = self._task, None
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        process = self._process
        if process is None:
            return
        if process.returncode is None and self._stdin is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.send_meta({"type": "quit"}), self.grace)
        await reap(process, self.grace)
        if task is not None:
            try:
                await asyncio.wait_for(task, self.grace)
            except TimeoutError:
                log.warning("the relay of pid %s did not end; cancelled", process.pid)


@dataclass(eq=False)  # one per websocket, kept in a set by identity
class _Session:
    websocket: web.WebSocketResponse
    service: ReapedAppService


class WebServer(Server):
    """textual-serve's Server with a token, Host and Origin checks and reaped sessions.

    ``argv`` is the app's command line. ``token`` defaults to a fresh random one.
    ``allow_hosts`` adds names a browser may use (e.g. behind a reverse proxy)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        token: str | None = None,
        allow_hosts: Iterable[str] = (),
        grace: float = GRACE_S,
        title: str = "agentrun",
    ) -> None:
        super().__init__(shlex.join(argv), host=host, port=port, title=title)
        self.argv = list(argv)
        self.token = token or secrets.token_urlsafe(32)
        self.names = served_names(host, allow_hosts)
        self.grace = grace
        self.hosts: frozenset[str] = frozenset()  # filled in once the port is known
        self.sessions: set[_Session] = set()
        self._runner: web.AppRunner | None = None

    # -- the guard ---------------------------------------------------------------------------

    def check(self, request: web.Request) -> str | None:
        """Why ``request`` is refused, or None."""
        host = request.headers.get("Host", "").lower()
        if host not in self.hosts:
            return "this server answers only to its own address (Host header)"
        origin = request.headers.get("Origin")
        route = request.match_info.route.name
        if route == "websocket" and origin is None:
            return "a websocket needs an Origin header"
        # https: the same name behind a TLS-terminating proxy (--allow-host).
        if origin is not None and origin.lower() not in (f"http://{host}", f"https://{host}"):
            return "cross-site requests are refused (Origin header)"
        if route in ("websocket", "static"):
            given = request.match_info.get(TOKEN_PARAM, "")
        else:  # the page, and any path that is not ours: no answer says what exists
            given = request.query.get(TOKEN_PARAM, "")
        if not same_token(given, self.token):
            return "a valid token is required: use the URL agentrun web printed"
        return None

    @web.middleware
    async def guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Refuse what :meth:`check` refuses (403); add headers that keep every URL (and its
        token) out of referrers, caches and frames."""
        why = self.check(request)
        if why is not None:
            # Decoded first, so a token spelled with %-escapes is redacted as well.
            path = redact(unquote(request.raw_path), self.token)
            log.warning("refused %s %r: %s", request.method, path[:200], why)
            raise web.HTTPForbidden(text=f"403 forbidden: {why}\n")
        response = await handler(request)
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Cache-Control"] = "no-store"
        if request.match_info.route.name == "index":
            response.headers["Content-Security-Policy"] = page_policy(request.headers["Host"])
        return response

    # -- textual-serve's seams ---------------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard])
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get(f"/ws/{{{TOKEN_PARAM}}}", self.handle_websocket, name="websocket"),
                web.get(
                    f"/static/{{{TOKEN_PARAM}}}/{{path:.*}}", self.handle_static, name="static"
                ),
            ]
        )
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        """The page, pointing its websocket at the address the browser used (already checked
        against the served ones), with the token in the websocket's path and in its assets'."""
        host = request.headers["Host"]
        # Behind a TLS-terminating proxy the page is https and its websocket must be wss.
        secure = request.headers.get("X-Forwarded-Proto", "").lower() == "https"
        context = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{'wss' if secure else 'ws'}://{host}/ws/{self.token}",
            "config": {"static": {"url": f"/static/{self.token}/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def handle_static(self, request: web.Request) -> web.StreamResponse:
        """A file of textual-serve's page (its script, styles, image), the token checked.

        The browser fetches these itself, so the token is in their path, as in the websocket's:
        the template's own ``config.static.url`` puts it there, with no HTML rewritten, and a
        relative URL in a stylesheet or one built by the script keeps it (a query string
        would not). Not a cookie: browsers send a cookie to every port of the host, so a
        token cookie would reach any other local server the user visits, and two servers on
        one host would overwrite each other's; nor does a cookie work where cookies are off.
        """
        root = Path(self.statics_path).resolve()
        try:
            path = (root / request.match_info["path"]).resolve()
        except (OSError, ValueError):  # a NUL byte, a symlink loop
            raise web.HTTPNotFound() from None
        if not path.is_relative_to(root) or not path.is_file():  # no escape, no listing
            raise web.HTTPNotFound()
        return web.FileResponse(path)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One browser session: one app process, reaped when the session ends."""
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        service = ReapedAppService(
            self.argv,
            grace=self.grace,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self.download_manager,
        )
        session = _Session(websocket, service)
        self.sessions.add(session)
        try:
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("session failed")
        finally:
            await service.stop()
            self.sessions.discard(session)
            with contextlib.suppress(Exception):
                await websocket.close()
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        """End every session: its app process reaped, its websocket closed."""
        sessions = list(self.sessions)
        await asyncio.gather(*(s.service.stop() for s in sessions), return_exceptions=True)
        for s in sessions:
            with contextlib.suppress(Exception):
                await s.websocket.close(code=WSCloseCode.GOING_AWAY, message=b"server stopped")

    # -- running -----------------------------------------------------------------------------

    def urls(self) -> list[str]:
        """The page's URL (with the token) under each served name, the first to print."""
        return [f"http://{n}:{self.port}/?{TOKEN_PARAM}={self.token}" for n in self.names]

    async def start(self) -> None:
        """Listen; ``self.port`` is the real port afterwards (``port=0`` picks a free one)."""
        app = await self._make_app()
        self._runner = web.AppRunner(
            app, handle_signals=False, shutdown_timeout=SHUTDOWN_S, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, None if is_wildcard(self.host) else self.host, self.port)
        try:
            await site.start()
        except OSError as e:
            await self._runner.cleanup()
            raise ServeError(f"cannot listen on {self.host}:{self.port}: {e.strerror or e}") from e
        self.port = int(self._runner.addresses[0][1])
        self.hosts = allowed_hosts(self.names, self.port)

    async def stop(self) -> None:
        """Stop listening, end every session (each app process reaped), close."""
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        # A last sweep, should a session have slipped past the shutdown hook.
        for s in list(self.sessions):
            process = s.service.process
            if process is not None and process.returncode is None:
                _signal_group(process.pid, signal.SIGKILL)

    async def serve_until_signalled(self, out: TextIO = sys.stdout) -> None:
        """Start, print where, serve until SIGINT or SIGTERM, stop."""
        await self.start()
        stopped = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopped.set)
        try:
            print(self.banner(), file=out, flush=True)
            await stopped.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            await self.stop()

    def banner(self) -> str:
        """What ``agentrun web`` prints at start: the URL with its token first."""
        first, *others = self.urls()
        lines = [first]
        lines += [f"  also: {u}" for u in others[:2]] if is_wildcard(self.host) else []
        lines.append("open the URL (it holds the access token); Ctrl+C stops every session")
        return "\n".join(lines)

    def serve(self, debug: bool = False) -> None:
        """Serve until SIGINT or SIGTERM (textual-serve's entry point, kept for its callers)."""
        asyncio.run(self.serve_until_signalled())


def exposure_warning(host: str, read_only: bool) -> str | None:
    """The warning for an address other machines can reach, None for loopback."""
    if is_loopback(host):
        return None
    can = (
        "watch every run"
        if read_only
        else "approve and deny tool calls and reconcile writes, as you"
    )
    return (
        f"WARNING: listening on {host or '*'}, reachable from other machines: anyone who can "
        f"reach it and has the URL with its token can {can}. The connection is plain HTTP."
    )


def serve(
    store: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    read_only: bool = False,
    poll: bool = False,
    allow_hosts: Sequence[str] = (),
) -> int:
    """``agentrun web``: serve the supervisor of ``store`` until SIGINT or SIGTERM."""
    logging.basicConfig(level=logging.WARNING, format="agentrun web: %(message)s")
    server = WebServer(
        app_argv(store, read_only=read_only, poll=poll),
        host=host,
        port=port,
        allow_hosts=allow_hosts,
    )
    for handler in logging.getLogger().handlers:  # every logger's lines, not only ours
        handler.addFilter(RedactToken(server.token))
    warning = exposure_warning(host, read_only)
    if warning is not None:
        print(f"agentrun web: {warning}", file=sys.stderr, flush=True)
    asyncio.run(server.serve_until_signalled())
    return 0
