"""``agentrun web`` in a real browser: Debian's headless Chromium, started by the test, against
``agentrun web`` in a subprocess on a small real store.

These never skip: without Chromium they fail saying how to install it (.ci/run does).
"""

from __future__ import annotations

import getpass
import http.server
import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from websupport import (
    Chromium,
    Terminal,
    agentrun_web,
    app_processes,
    chromium,
    deadline_poll,
    require_chromium,
)

from durableagent import FileStore
from durableagent_tui.sample import build_sample_store

pytestmark = pytest.mark.browser

RUNS = ["laptop-1039", "billing-1042", "vpn-1043", "refund-1041", "wifi-1046", "onboard-1047"]


@pytest.fixture(scope="module")
def pw() -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    build_sample_store(root, corrupt=False, markup=False)
    return root


def new_page(pw: Any, browser: Chromium) -> Any:
    b = pw.chromium.connect_over_cdp(browser.endpoint)
    context = b.contexts[0] if b.contexts else b.new_context()
    return context.new_page()


def open_supervisor(pw: Any, browser: Chromium, url: str) -> tuple[Any, Terminal]:
    """Load the page, wait for the app's first frames and its runs table, focus the
    terminal's input."""
    page = new_page(pw, browser)
    term = Terminal()
    term.attach(page)
    response = page.goto(url)
    assert response is not None and response.status == 200
    page.wait_for_selector("body.-first-byte", timeout=30_000)
    term.wait_for(page, lambda t: all(r in t.runs_pane() for r in RUNS), "the runs table")
    page.focus(".xterm-helper-textarea")
    return page, term


def filter_runs(page: Any, term: Terminal, text: str) -> None:
    """``/``, wait for the filter box (as a person would), then type."""
    page.keyboard.press("/")
    term.wait_for(page, lambda t: "filter: words of a run id" in t.runs_pane(), "the filter box")
    page.keyboard.type(text)


def signals(root: Path, run_id: str) -> list[dict[str, Any]]:
    return [r.data for r in FileStore(root).load(run_id) if r.type == "signal"]


def test_the_page_shows_the_runs_table_and_keys_reach_the_app(
    pw: Any, store: Path, tmp_path: Path
) -> None:
    with agentrun_web(store) as server, chromium(tmp_path) as browser:
        page, term = open_supervisor(pw, browser, server.url)
        assert "awaiting" in term.runs_pane() and "indeterminate" in term.runs_pane()
        (ws,) = term.urls
        assert ws.startswith(f"ws://127.0.0.1:{server.port}/ws/{server.token}?")
        assert len(app_processes(store)) == 1

        filter_runs(page, term, "billing")
        term.wait_for(
            page,
            lambda t: "billing-1042" in t.runs_pane() and "laptop-1039" not in t.runs_pane(),
            "the filter to leave only billing-1042",
        )
        page.keyboard.press("Escape")
        term.wait_for(page, lambda t: "laptop-1039" in t.runs_pane(), "the filter cleared")

        page.close()
        deadline_poll(lambda: not app_processes(store), 20, "the closed tab's app to end")
        assert server.process.poll() is None


def test_an_approval_made_in_the_browser_is_recorded_in_the_journal(
    pw: Any, store: Path, tmp_path: Path
) -> None:
    with agentrun_web(store) as server, chromium(tmp_path) as browser:
        page, term = open_supervisor(pw, browser, server.url)
        filter_runs(page, term, "billing")
        term.wait_for(page, lambda t: "laptop-1039" not in t.runs_pane(), "the filter")
        page.keyboard.press("Enter")
        page.keyboard.press("a")
        term.wait_for(page, lambda t: "Approve or deny  billing-1042" in t.text(), "the dialog")
        page.keyboard.press("y")
        (sig,) = deadline_poll(lambda: signals(store, "billing-1042"), 20, "the approval")
        assert sig["name"] == "approve" and sig["by"] == getpass.getuser()


def test_read_only_reaches_the_app_of_every_session(pw: Any, store: Path, tmp_path: Path) -> None:
    with agentrun_web(store, "--read-only") as server, chromium(tmp_path) as browser:
        _, term = open_supervisor(pw, browser, server.url)
        (app,) = app_processes(store)
        argv = Path(f"/proc/{app}/cmdline").read_bytes().split(b"\0")
        assert b"--read-only" in argv
        footer = term.lines()[-1]
        assert "Quit" in footer and "Approve" not in footer and "Reconcile" not in footer


def test_no_app_process_is_left_after_the_browser_dies_abruptly(
    pw: Any, store: Path, tmp_path: Path
) -> None:
    with agentrun_web(store) as server, chromium(tmp_path) as browser:
        open_supervisor(pw, browser, server.url)
        assert len(app_processes(store)) == 1
        browser.kill()
        deadline_poll(lambda: not app_processes(store), 20, "the orphaned app to be reaped")
        assert server.process.poll() is None  # the server serves on


def test_no_app_process_is_left_after_the_server_gets_sigterm(
    pw: Any, store: Path, tmp_path: Path
) -> None:
    with agentrun_web(store) as server, chromium(tmp_path) as browser:
        for _ in range(2):
            open_supervisor(pw, browser, server.url)
        assert len(app_processes(store)) == 2
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(20) == 0
        assert app_processes(store) == []


def test_a_page_request_without_the_right_token_is_refused(
    pw: Any, store: Path, tmp_path: Path
) -> None:
    with agentrun_web(store) as server, chromium(tmp_path) as browser:
        page = new_page(pw, browser)
        for url in (server.base + "/", server.base + "/?token=", server.url[:-1] + "x"):
            response = page.goto(url)
            assert response is not None and response.status == 403, url
            assert "token" in page.content()
        assert app_processes(store) == []


ATTACKER_PAGE = """<!doctype html><script>
window.result = new Promise(done => {
  const ws = new WebSocket(%s);
  ws.onopen = () => done("open");
  ws.onerror = () => done("refused");
});
</script>"""


@contextmanager
def another_local_site(page: str) -> Iterator[str]:
    """Another web server on this machine (a dev server, a local app showing untrusted
    content) serving ``page``; its URL. A public site is stopped by Chromium's own local
    network checks, which other browsers lack: this one reaches the server."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_page_on_another_site_cannot_open_the_websocket_even_with_the_token(
    pw: Any, store: Path, tmp_path: Path
) -> None:
    """Cross-site websocket hijacking: another page the user visits knows the URL (the worst
    case) and tries to drive the app. Its Origin gives it away."""
    with agentrun_web(store) as server, chromium(tmp_path) as browser:
        target = f"ws://127.0.0.1:{server.port}/ws/{server.token}?width=80&height=24"
        with another_local_site(ATTACKER_PAGE % json.dumps(target)) as attacker:
            page = new_page(pw, browser)
            page.goto(attacker)
            assert page.evaluate("window.result") == "refused"
        assert "cross-site requests are refused (Origin header)" in server.stderr()
        assert app_processes(store) == []


def test_a_rebound_dns_name_is_refused(pw: Any, store: Path, tmp_path: Path) -> None:
    """DNS rebinding: a name the attacker controls now resolves to 127.0.0.1, so the page is
    same-origin with the server; the Host header still names the attacker's domain."""
    with agentrun_web(store) as server:
        with chromium(tmp_path, resolve="MAP rebind.test 127.0.0.1") as browser:
            page = new_page(pw, browser)
            response = page.goto(f"http://rebind.test:{server.port}/?token={server.token}")
            assert response is not None and response.status == 403
            assert "Host header" in page.content()
        assert app_processes(store) == []


def test_the_page_makes_no_third_party_request(pw: Any, store: Path, tmp_path: Path) -> None:
    """textual-serve's template asks Google for a font; the page's policy blocks it in the
    browser, so a page whose URL holds the token sends nothing elsewhere (and works offline)."""
    with agentrun_web(store) as server, chromium(tmp_path) as browser:
        page = new_page(pw, browser)
        answered: list[tuple[str, int]] = []
        failed: dict[str, str | None] = {}
        page.on("response", lambda r: answered.append((urlsplit(r.url).netloc, r.status)))
        page.on("requestfailed", lambda r: failed.update({urlsplit(r.url).netloc: r.failure}))
        term = Terminal()
        term.attach(page)
        page.goto(server.url)
        term.wait_for(page, lambda t: "billing-1042" in t.runs_pane(), "the runs table")
        assert set(answered) == {(f"127.0.0.1:{server.port}", 200)}  # its assets: the token
        assert len(answered) >= 3  # the page, its script and its styles
        assert failed == {"fonts.googleapis.com": "csp"}  # blocked before it left
