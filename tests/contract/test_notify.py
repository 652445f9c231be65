"""Notices to humans (SPEC §11) on both stores, over real protocols: Apprise's json://
webhooks to a local HTTP server and its mailto:// mail to a local SMTP server (aiosmtpd)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from notify_sinks import Webhook, smtp, webhook
from procs import WorkerProcess

from durableagent import Status, Store, ToolCall
from durableagent.cli.main import main
from durableagent.notify import check_targets, parse_kinds
from durableagent.notify.notifier import Notifier
from durableagent.testing import JournalWriter


def awaiting(store: Store, run_id: str, summary: str = "VPN access") -> str:
    """A run waiting for approval of create_ticket; its marker."""
    # Its records 1 s apart from 4.5 min ago: a notice says "waiting 4m" for about 25 s more.
    j = JournalWriter(store, run_id, time.time() - 270)
    j.start("please file it")
    with j.attempt("host-a:1"):
        (p,) = j.asks(1, ToolCall("c1", "create_ticket", {"summary": summary}))
        j.outcome(Status.AWAITING_APPROVAL, pending=(p,))
    return p.marker


@contextmanager
def notifying(store: Store, *urls: str, **kw: object) -> Iterator[Notifier]:
    """A notifier serving in a thread of its own until the block ends."""
    kw.setdefault("kinds", parse_kinds(None))
    notifier = Notifier(store, check_targets(urls), **kw)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def main_() -> None:
        loop.run_until_complete(notifier.serve(stop))

    thread = threading.Thread(target=main_, daemon=True)
    thread.start()
    try:
        yield notifier
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)  # a loaded machine: its look in flight ends first
        assert not thread.is_alive(), "the notifier did not stop"
        loop.close()


def notices_of(sink: Webhook, run_id: str) -> list[dict[str, object]]:
    return [m for m in sink.messages() if f"run {run_id} " in str(m.get("message"))]


def test_an_approval_is_sent_with_the_call_the_wait_the_command_and_the_link(
    any_store: Store, store_spec: str
) -> None:
    marker = awaiting(any_store, "a1")
    with webhook() as sink, notifying(any_store, sink.url, link="http://127.0.0.1:8000/"):
        sink.wait(lambda ms: len(ms) >= 1)
        time.sleep(0.5)
    (m,) = sink.messages()
    assert m["title"] == "agentrun: a1 awaits approval: create_ticket"
    body = str(m["message"])
    assert 'run a1 waits for approval of create_ticket {"summary": "VPN access"}' in body
    # Since the run last moved (4m56s before the notifier started; a loaded machine may
    # take seconds more to send it).
    assert "waiting 4m" in body or "waiting 5m" in body, body
    assert f"act: agentrun approve a1 '{marker}' --store " in body
    assert store_spec.split("?")[0].split("@")[-1] in body or store_spec in body
    assert "see: http://127.0.0.1:8000/" in body


def test_a_notice_arrives_by_mail(any_store: Store) -> None:
    awaiting(any_store, "a1")
    with smtp() as (box, port):
        url = (
            f"mailto://127.0.0.1:{port}?from=agentrun@example.com&to=oncall@example.com"
            "&smtp=127.0.0.1&mode=insecure"
        )
        with notifying(any_store, url):
            deadline = time.monotonic() + 15
            while not box.mails and time.monotonic() < deadline:
                time.sleep(0.05)
    ((sender, to, text),) = box.mails
    assert sender == "agentrun@example.com" and to == ["oncall@example.com"]
    assert "a1 awaits approval: create_ticket" in text and "agentrun approve a1" in text


def test_two_notifiers_on_one_store_send_each_notice_once(any_store: Store) -> None:
    with webhook() as sink:
        with notifying(any_store, sink.url), notifying(any_store, sink.url):
            for i in range(5):
                awaiting(any_store, f"r{i}")
            sink.wait(lambda ms: len(ms) >= 5)
            time.sleep(1.5)
        titles = sorted(str(m["title"]) for m in sink.messages())
    assert titles == sorted(f"agentrun: r{i} awaits approval: create_ticket" for i in range(5))


def test_a_restarted_notifier_sends_nothing_twice_and_what_came_meanwhile(
    any_store: Store,
) -> None:
    with webhook() as sink:
        awaiting(any_store, "before")
        with notifying(any_store, sink.url):
            sink.wait(lambda ms: len(ms) == 1)
        awaiting(any_store, "meanwhile")  # while no notifier ran
        with notifying(any_store, sink.url):
            sink.wait(lambda ms: len(ms) >= 2)
            time.sleep(1.0)
        assert [str(m["title"]).split()[1] for m in sink.messages()] == ["before", "meanwhile"]


def test_a_target_that_is_down_delays_nothing_else(any_store: Store) -> None:
    with webhook() as down, webhook() as up:
        down.down = True
        awaiting(any_store, "a1")
        started = time.monotonic()
        with notifying(any_store, down.url, up.url):
            up.wait(lambda ms: len(ms) == 1, timeout=5)
            took = time.monotonic() - started
            down.down = False  # back up: its retry (with backoff) delivers it
            down.wait(lambda ms: len(ms) == 1, timeout=10)
        assert took < 3.0
        assert len(up.messages()) == 1 and len(down.messages()) == 1


def test_a_target_that_times_out_delays_nothing_else(any_store: Store) -> None:
    with webhook() as slow, webhook() as up:
        slow.delay = 3.0
        awaiting(any_store, "a1")
        started = time.monotonic()
        with notifying(any_store, slow.url, up.url, send_timeout=0.5):
            up.wait(lambda ms: len(ms) == 1, timeout=5)
            took = time.monotonic() - started
            slow.delay = 0.0
            slow.wait(lambda ms: len(ms) >= 1, timeout=15)  # at least once
        assert took < 3.0 and len(up.messages()) == 1


def test_a_notice_nobody_acts_on_is_escalated_once(any_store: Store) -> None:
    with webhook() as first, webhook() as boss:
        awaiting(any_store, "a1")
        (target,) = check_targets([boss.url])
        with notifying(any_store, first.url, escalate_after=0.5, escalate_to=[target]):
            boss.wait(lambda ms: len(ms) == 1, timeout=10)
            time.sleep(2.5)
        assert len(first.messages()) == 1
        (m,) = boss.messages()
        assert str(m["title"]).startswith("agentrun: ESCALATED: a1 awaits approval")


def test_a_run_that_stopped_needing_a_human_before_escalate_after_is_not_escalated(
    any_store: Store,
) -> None:
    """a1 is cancelled after its notice, well before --escalate-after; b1, told at the same
    look, is escalated when its time comes, and a1 never is."""
    from durableagent import signal

    with webhook() as first, webhook() as boss:
        awaiting(any_store, "a1")
        awaiting(any_store, "b1")
        (target,) = check_targets([boss.url])
        with notifying(any_store, first.url, escalate_after=12.0, escalate_to=[target]):
            first.wait(lambda ms: len(ms) >= 2, timeout=30)
            signal(any_store, "a1", "cancel", {}, by="ana", reason="not needed after all")
            boss.wait(lambda ms: any("b1" in str(m["title"]) for m in ms), timeout=60)
            time.sleep(3.0)  # a1's escalation, had it been due, was sent with b1's
        titles = [str(m["title"]) for m in boss.messages()]
    assert titles == ["agentrun: ESCALATED: b1 awaits approval: create_ticket"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--to", "nonsense://x"], "--to 'nonsense://x' is not a notify URL"),
        (["--to", "json://127.0.0.1/h", "--on", "approval,bogus"], "unknown kind 'bogus'"),
        (
            [
                "--to",
                "json://127.0.0.1/h",
                "--escalate-after",
                "soon",
                "--escalate-to",
                "json://127.0.0.1/b",
            ],
            "is not a duration",
        ),
        (["--to", "json://127.0.0.1/h", "--escalate-after", "30m"], "go together"),
    ],
)
def test_bad_notify_arguments_are_refused_at_start_naming_them(
    any_store: Store,
    store_spec: str,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    says: str,
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["notify", *args, "--store", store_spec])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_worker_with_notify_tells_when_it_gives_up_on_a_failed_run(
    any_store: Store, store_spec: str, tmp_path: Path
) -> None:
    from durableagent import Message, submit

    submit(any_store, "flaky", [Message("user", "ticket for flaky")])
    with webhook() as sink:
        w = WorkerProcess(
            store_spec,
            "broken",
            tmp_path / "worker.log",
            "--max-attempts",
            "2",
            "--backoff",
            "0.1",
            "--notify",
            sink.url,
            "--heartbeat",
            "0.5",
        )
        try:
            sink.wait(lambda ms: any("gave up" in str(m["title"]) for m in ms), timeout=30)
        finally:
            assert w.stop() == 0, (tmp_path / "worker.log").read_text()
        (m,) = [m for m in sink.messages() if "flaky" in str(m["title"])]
    assert m["title"] == "agentrun: flaky failed; the workers gave up"
    assert "act: agentrun retry flaky --store" in str(m["message"])


def test_ready_runs_with_no_live_worker_are_told_once_as_stalled(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from durableagent import Message, submit
    from durableagent.notify import notices
    from durableagent.roster import this_process

    monkeypatch.setattr(notices, "STALLED_AFTER", 0.5)
    gone = this_process("w1")
    any_store.beat(replace(gone, beat_at=gone.beat_at - 600, pid=2**22 + 7))
    for rid in ("s1", "s2"):
        submit(any_store, rid, [Message("user", "hi")])
    with webhook() as sink, notifying(any_store, sink.url):
        sink.wait(lambda ms: len(ms) >= 1, timeout=10)
        time.sleep(2.5)  # more looks: still one notice
    (m,) = sink.messages()
    assert m["title"] == "agentrun: s1 and 1 more ready and no worker is live"
    assert "act: agentrun worker --agent MODULE:ATTR --store" in str(m["message"])
