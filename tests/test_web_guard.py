"""``agentrun web``'s locks, without a browser: the token, Host and Origin on the page and on
the websocket, quoting, and app processes that are always reaped."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from websupport import (
    Terminal,
    WebServer,
    agentrun_env,
    agentrun_web,
    app_processes,
    deadline_poll,
    kill_processes_with,
)

from durableagent_tui import web
from durableagent_tui.sample import build_sample_store


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> WebServer:  # type: ignore[misc]
    root = tmp_path_factory.mktemp("guard") / "runs"
    build_sample_store(root, corrupt=False, markup=False)
    with agentrun_web(root, "--allow-host", "proxy.example") as server:
        yield server


def get(url: str, **headers: str) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


async def handshake(server: WebServer | web.WebServer, token: str, **headers: str) -> int:
    """Open the session websocket; its HTTP status (101 when accepted), closed at once."""
    url = f"ws://127.0.0.1:{server.port}/ws/{token}?width=80&height=24"
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers=headers) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as e:
            return e.status


def test_the_page_needs_the_token(served: WebServer) -> None:
    assert get(served.base + "/")[0] == 403
    assert get(served.base + "/?token=")[0] == 403
    assert get(served.base + "/?token=" + served.token[:-1])[0] == 403
    status, _, body = get(served.base + "/?token=" + served.token + "x")
    assert status == 403 and "a valid token is required" in body
    status, _, body = get(served.url)
    assert status == 200 and f"/ws/{served.token}" in body


def test_the_page_is_kept_out_of_referrers_caches_and_frames(served: WebServer) -> None:
    _, headers, _ = get(served.url)
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cache-Control"] == "no-store"
    assert headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]


def test_every_path_needs_the_token_static_files_too(served: WebServer) -> None:
    """The page's script and styles carry the token in their path, as the websocket does."""
    token = served.token
    assert get(served.base + "/static/js/textual.js")[0] == 403
    assert get(f"{served.base}/static/js/textual.js?token={token}")[0] == 403  # not there
    assert get(f"{served.base}/static/{token[:-1]}/js/textual.js")[0] == 403
    status, headers, body = get(f"{served.base}/static/{token}/js/textual.js")
    assert status == 200 and "javascript" in headers["Content-Type"] and len(body) > 1000
    assert headers["Cache-Control"] == "no-store"  # its URL holds the token
    assert get(f"{served.base}/static/{token}/css/xterm.css")[0] == 200
    _, _, page = get(served.url)
    assert f'src="/static/{token}/js/textual.js"' in page
    assert f'href="/static/{token}/css/xterm.css"' in page
    assert get(served.base + "/download/anything")[0] == 403
    assert get(served.base + "/nothing/here")[0] == 403


def test_static_files_are_served_without_a_listing_and_nothing_else_is(
    served: WebServer,
) -> None:
    static = f"{served.base}/static/{served.token}"
    assert get(static + "/")[0] == 404
    assert get(static + "/js/")[0] == 404
    assert get(static + "/js/nothing.js")[0] == 404
    for escape in ("/..%2Fserver.py", "/js/..%2F..%2Fserver.py", "/%2E%2E/server.py"):
        assert get(static + escape)[0] == 404, escape  # textual_serve/server.py, beside static/
    assert get(f"{served.base}/download/anything?token={served.token}")[0] == 404


def test_a_host_header_other_than_the_served_address_is_refused(served: WebServer) -> None:
    """DNS rebinding: the page would be same-origin with the server, under the attacker's
    name."""
    status, _, body = get(served.url, Host=f"rebind.example:{served.port}")
    assert status == 403 and "Host header" in body
    assert get(served.url, Host=f"127.0.0.1:{served.port + 1}")[0] == 403
    assert get(served.url, Host=f"localhost:{served.port}")[0] == 200
    assert get(served.url, Host=f"proxy.example:{served.port}")[0] == 200  # --allow-host
    static = f"{served.base}/static/{served.token}/js/textual.js"
    assert get(static, Host=f"rebind.example:{served.port}")[0] == 403


async def test_behind_a_tls_proxy_the_page_uses_wss_and_its_https_origin_is_accepted(
    served: WebServer,
) -> None:
    name = f"proxy.example:{served.port}"
    _, _, body = get(served.url, Host=name, **{"X-Forwarded-Proto": "https"})
    assert f'data-session-websocket-url="wss://{name}/ws/{served.token}"' in body
    origin = {"Origin": f"https://{name}", "Host": name}
    assert await handshake(served, served.token, **origin) == 101
    deadline_poll(lambda: not app_processes(served.store), 20, "the accepted session to end")


def test_a_foreign_origin_on_the_page_is_refused(served: WebServer) -> None:
    assert get(served.url, Origin="http://evil.example")[0] == 403
    assert get(served.url, Origin=served.base)[0] == 200


@pytest.mark.parametrize(
    "origin",
    [
        "http://evilproxy.example:{port}",  # ours as its suffix: another site
        "http://proxy.example.evil.com:{port}",
        "http://proxy.example:{port}.evil.com",  # ours as its prefix
        "http://proxy.example:{other}",  # another port is another origin
        "http://proxy.example",
        "ftp://proxy.example:{port}",  # and another scheme
    ],
)
async def test_an_origin_must_be_the_served_one_exactly(served: WebServer, origin: str) -> None:
    """With ``--allow-host proxy.example``: scheme, host and port, not a look-alike."""
    name = f"proxy.example:{served.port}"
    origin = origin.format(port=served.port, other=served.port + 1)
    assert get(served.url, Host=name, Origin=f"http://{name}")[0] == 200
    status, _, body = get(served.url, Host=name, Origin=origin)
    assert status == 403 and "Origin header" in body
    assert await handshake(served, served.token, Host=name, Origin=origin) == 403


async def test_the_websocket_needs_the_token_its_own_origin_and_host(
    served: WebServer,
) -> None:
    own = {"Origin": served.base}
    assert await handshake(served, served.token, **own) == 101
    assert await handshake(served, "nope", **own) == 403
    assert await handshake(served, served.token[:-1], **own) == 403
    assert await handshake(served, served.token, Origin="http://evil.example") == 403
    assert await handshake(served, served.token, Origin="null") == 403
    assert await handshake(served, served.token) == 403  # no Origin: not a browser we trust
    assert (
        await handshake(served, served.token, Origin="http://rebind.example", Host="rebind.example")
        == 403
    )
    deadline_poll(lambda: not app_processes(served.store), 20, "the accepted session to end")


def test_tokens_are_random_and_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = web.WebServer(["true"]), web.WebServer(["true"])
    assert a.token != b.token and len(a.token) >= 43  # 32 random bytes
    compared: list[tuple[bytes, bytes]] = []
    real = web.hmac.compare_digest

    def spy(x: bytes, y: bytes) -> bool:
        compared.append((x, y))
        return real(x, y)

    monkeypatch.setattr(web.hmac, "compare_digest", spy)
    assert web.same_token(a.token, a.token) and not web.same_token("x", a.token)
    assert compared == [(a.token.encode(), a.token.encode()), (b"x", a.token.encode())]


async def test_the_app_command_is_quoted_and_never_run_by_a_shell(tmp_path: Path) -> None:
    """A store path full of shell syntax opens that very store; nothing in it is run."""
    root = tmp_path / 'it\'s $(touch PWNED) ; touch PWNED2 `touch PWNED3` "q" runs'
    build_sample_store(root, corrupt=False, markup=False)
    with agentrun_web(root, cwd=tmp_path) as server:
        term = Terminal(width=100, height=30)
        url = f"ws://127.0.0.1:{server.port}/ws/{server.token}?width=100&height=30"
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, headers={"Origin": server.base}) as ws,
        ):
            async with asyncio.timeout(30):
                while "billing-1042" not in term.runs_pane():
                    msg = await ws.receive()
                    assert msg.type == aiohttp.WSMsgType.BINARY, msg
                    term.chunks.append(msg.data)
            (pid,) = app_processes(root)
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            assert argv[-2:] == [b"--store", os.fsencode(root)]
    assert not list(tmp_path.rglob("PWNED*"))
    assert web.app_argv(str(root))[-2:] == ["--store", str(root)]


# -- the log never holds a token ----------------------------------------------------------


def pieces(token: str, size: int = 8) -> list[str]:
    """Every run of ``size`` characters of ``token``: a log holding any of them leaks part."""
    return [token[i : i + size] for i in range(len(token) - size + 1)]


async def test_refused_requests_are_logged_without_their_tokens(served: WebServer) -> None:
    """A log is read by more people than the URL is meant for: a refused request is logged,
    its token (the real one, a near miss, a wrong one, however spelled) is not."""
    token, wrong = served.token, f"wrong{uuid.uuid4().hex}"
    rebound = {"Host": f"rebind.example:{served.port}"}
    spelled = "%" + format(ord(token[0]), "02X") + token[1:]  # its first letter %-encoded
    logged = served.stderr

    def refusals() -> int:
        return sum(line.startswith("agentrun web: refused ") for line in logged().splitlines())

    before = refusals()
    refused = [
        get(served.url, **rebound),
        get(f"{served.base}/?token={wrong}"),
        get(f"{served.base}/?token={token[:-1]}"),
        get(f"{served.base}/?tok%65n={spelled}", **rebound),
        get(f"{served.base}/static/{token}/js/textual.js", **rebound),
        get(f"{served.base}/download/x?token={token}", **rebound),
        await handshake(served, token, Origin="http://evil.example"),
        await handshake(served, wrong, Origin=served.base),
    ]
    assert [r if isinstance(r, int) else r[0] for r in refused] == [403] * len(refused)
    deadline_poll(lambda: refusals() == before + len(refused), 10, "a line for each refusal")
    assert wrong not in logged()
    assert [p for p in pieces(token) if p in logged()] == []
    assert "refused GET '/?token=<redacted>'" in logged()
    assert "refused GET '/ws/<redacted>?width=80&height=24'" in logged()


async def test_the_servers_own_log_lines_hold_no_token_wherever_they_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """In a program of one's own (no ``agentrun web`` process, no filter on its stderr)."""
    server = web.WebServer(["true"], port=0)
    await server.start()
    try:
        with caplog.at_level(logging.WARNING, logger="durableagent.web"):
            assert await handshake(server, server.token, Origin="http://evil.example") == 403
    finally:
        await server.stop()
    assert "refused GET '/ws/<redacted>" in caplog.text
    assert [p for p in pieces(server.token) if p in caplog.text] == []


def test_every_line_of_agentrun_webs_log_is_redacted_tracebacks_too() -> None:
    """aiohttp's and textual-serve's lines pass the same filter as ours on the way out."""
    token = "6cv7" + uuid.uuid4().hex
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(web.RedactToken(token))
    logger = logging.getLogger(f"test.redact.{uuid.uuid4().hex}")
    logger.addHandler(handler)
    logger.propagate = False
    logger.warning("connection to %s", f"/ws/{token}")
    logger.warning("GET /?token=a-wrong-one&x=1")
    try:
        raise ValueError(f"bad request line: GET /x?y={token}")
    except ValueError:
        logger.exception("failed")
    text = out.getvalue()
    assert token not in text and "a-wrong-one" not in text
    assert "connection to /ws/<redacted>" in text and "token=<redacted>&x=1" in text
    assert "ValueError: bad request line: GET /x?y=<redacted>" in text


# -- app processes are always reaped --------------------------------------------------------

STUBBORN = """
import pathlib, signal, sys, time
if sys.argv[1] == "ignore-sigterm":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path(sys.argv[3]).touch()  # ready: its handler is in place
sys.stdout.write("__GANGLION__\\n")
sys.stdout.flush()
while True:  # never reads the quit packet on stdin
    time.sleep(0.05)
"""


@asynccontextmanager
async def stubborn_server(mode: str, ready: Path) -> AsyncIterator[web.WebServer]:
    """A server whose app ignores the quit packet (and SIGTERM, in ``ignore-sigterm`` mode);
    the app touches ``ready`` once it ignores what it should."""
    tag = f"stubborn-{uuid.uuid4().hex}"  # to find its apps, should the reaping under test fail
    server = web.WebServer(
        [sys.executable, "-c", STUBBORN, mode, tag, str(ready)],
        host="127.0.0.1",
        port=0,
        grace=0.3,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        kill_processes_with(tag)


async def open_session(
    server: web.WebServer, session: aiohttp.ClientSession, ready: Path
) -> tuple[aiohttp.ClientWebSocketResponse, asyncio.subprocess.Process]:
    url = f"ws://127.0.0.1:{server.port}/ws/{server.token}?width=80&height=24"
    ws = await session.ws_connect(url, headers={"Origin": f"http://127.0.0.1:{server.port}"})
    async with asyncio.timeout(30):  # a slow interpreter start must not look like a fast kill
        while not (server.sessions and next(iter(server.sessions)).service.process):
            await asyncio.sleep(0.02)
        while not ready.exists():
            await asyncio.sleep(0.02)
    process = next(iter(server.sessions)).service.process
    assert process is not None
    return ws, process


@pytest.mark.parametrize(
    ("mode", "ended_by"),
    [("ignore-quit", signal.SIGTERM), ("ignore-sigterm", signal.SIGKILL)],
)
async def test_an_app_that_will_not_quit_is_terminated_then_killed_when_its_client_leaves(
    mode: str, ended_by: int, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    async with stubborn_server(mode, ready) as server, aiohttp.ClientSession() as session:
        ws, process = await open_session(server, session, ready)
        await ws.close()
        async with asyncio.timeout(10):
            assert await process.wait() == -ended_by
        async with asyncio.timeout(10):
            while server.sessions:
                await asyncio.sleep(0.02)


async def test_stopping_the_server_kills_an_app_that_ignores_sigterm(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    async with (
        stubborn_server("ignore-sigterm", ready) as server,
        aiohttp.ClientSession() as session,
    ):
        _, process = await open_session(server, session, ready)
        async with asyncio.timeout(10):
            await server.stop()
        assert process.returncode == -signal.SIGKILL
        assert not server.sessions


# -- the command ----------------------------------------------------------------------------


def agentrun(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", "durableagent.cli"]
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, timeout=60, env=agentrun_env()
    )


def test_another_address_warns_that_anyone_with_the_url_can_approve_writes(
    tmp_path: Path,
) -> None:
    """192.0.2.1 (TEST-NET-1) is no address of this machine: the warning comes first, then
    the address is refused, so nothing is ever exposed by the test."""
    root = tmp_path / "runs"
    build_sample_store(root, corrupt=False, markup=False)
    r = agentrun("web", "--store", str(root), "--host", "192.0.2.1", "--port", "0")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    warning, refusal = r.stderr.strip().splitlines()
    assert "WARNING" in warning and "has the URL with its token can approve" in warning
    assert refusal.startswith("agentrun web: cannot listen on 192.0.2.1:0")
    assert web.exposure_warning("127.0.0.1", False) is None
    assert web.exposure_warning("localhost", False) is None
    assert web.exposure_warning("::1", False) is None
    assert "watch every run" in (web.exposure_warning("0.0.0.0", True) or "")


def test_a_port_in_use_is_refused_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root, corrupt=False, markup=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = agentrun("web", "--store", str(root), "--port", str(port))
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr


def test_web_refuses_a_missing_store(tmp_path: Path) -> None:
    r = agentrun("web", "--store", str(tmp_path / "nowhere"))
    assert r.returncode == 1 and "no store at" in r.stderr and "Traceback" not in r.stderr


def test_web_without_the_extra_says_how_to_install_it(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    build_sample_store(root, corrupt=False, markup=False)
    code = (
        "import sys; sys.modules['textual_serve'] = None\n"
        "from durableagent.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    r = agentrun("web", "--store", str(root), code=code)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "pip install 'durableagent[web]'" in r.stderr
