"""Where notices go, as a human meets it (issue 23): a mail that keeps its lines, delivered
to a real SMTP server (aiosmtpd); a target named by its own host with no secret in sight;
and a bad URL blamed on the flag that gave it."""

from __future__ import annotations

import email
import time
from pathlib import Path

import pytest
from notify_sinks import smtp

from durableagent import FileStore, Status, ToolCall
from durableagent.cli.main import main
from durableagent.notify.local import NotifierThread
from durableagent.notify.targets import Target
from durableagent.testing import JournalWriter


def awaiting(store: FileStore, run_id: str) -> None:
    j = JournalWriter(store, run_id, time.time() - 300)
    j.start("please file it")
    with j.attempt("host-a:1"):
        (p,) = j.asks(1, ToolCall("c1", "create_ticket", {"summary": "VPN"}))
        j.outcome(Status.AWAITING_APPROVAL, pending=(p,))


def test_an_emailed_notice_keeps_its_line_breaks(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs", create=True)
    awaiting(store, "a1")
    with smtp() as (box, port):
        url = (
            f"mailto://127.0.0.1:{port}?from=agentrun@example.com&to=oncall@example.com"
            "&smtp=127.0.0.1&mode=insecure"
        )
        telling = NotifierThread(store, [url])
        try:
            deadline = time.monotonic() + 60
            while not box.mails:
                assert time.monotonic() < deadline, "no mail arrived"
                time.sleep(0.05)
        finally:
            assert telling.stop(60)
    ((_, _, raw),) = box.mails
    mail = email.message_from_string(raw)
    parts = {p.get_content_type(): p for p in mail.walk() if not p.is_multipart()}
    text = str(parts["text/plain"].get_payload(decode=True).decode())  # type: ignore[union-attr]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    assert lines[0].startswith("run a1 waits for approval of create_ticket"), lines
    assert lines[1].startswith("waiting "), lines
    assert lines[2].startswith("act: agentrun approve a1 "), lines
    assert lines[3].startswith("or: agentrun deny a1 "), lines
    # Plain text is sent as such: a text/plain mail. An HTML part, if any, must break lines.
    assert set(parts) <= {"text/plain", "text/html"}, parts
    if "text/html" in parts:
        html = str(parts["text/html"].get_payload(decode=True).decode())  # type: ignore[union-attr]
        assert html.count("<br") >= 3, html


@pytest.mark.parametrize(
    ("url", "shown", "secrets"),
    [
        (
            "mailto://127.0.0.1:8025?from=bot@example.com&to=oncall@example.com",
            "mailto://127.0.0.1:8025/…",
            [],
        ),
        (
            "mailtos://ana:s3cretpw@smtp.example.com:465?to=oncall@example.com",
            "mailtos://ana:…@smtp.example.com:465/…",
            ["s3cretpw"],
        ),
        (
            "json://hook:t0psecret@127.0.0.1:9000/hooks/abc123?token=zz9",
            "json://hook:…@127.0.0.1:9000/…",
            ["t0psecret", "abc123", "zz9"],
        ),
        (
            "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7F/#alerts",
            "slack://…/…",
            ["T1JJ3T3L2", "A1BRTD4JD", "TIiajkdnlazkcOXrIdevi7F"],
        ),
    ],
)
def test_a_target_is_named_by_its_own_host_with_every_secret_left_out(
    url: str, shown: str, secrets: list[str]
) -> None:
    name = Target(url).name
    assert name == shown
    assert not any(s in name for s in secrets)


def test_a_workers_bad_notify_url_is_blamed_on_notify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    FileStore(tmp_path / "runs", create=True)
    with pytest.raises(SystemExit) as e:
        main(
            [
                "worker",
                "--agent",
                "_child_agents:gated",
                "--notify",
                "slak://x",
                "--store",
                str(tmp_path / "runs"),
            ]
        )
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: agentrun worker "), err  # Apprise's own log line held back
    assert "--notify 'slak://x' is not a notify URL" in err and "--to" not in err, err
