"""The demo's notices (SPEC §11, issue 17 point 5): a notifier to a local webhook that writes
each notice to ``.demo/notices.log``, so a newcomer sees one arrive."""

from __future__ import annotations

import time
from pathlib import Path

from durableagent import FileStore, Status, ToolCall
from durableagent.notify.local import demo_notices
from durableagent.testing import JournalWriter


def awaiting(store: FileStore, run_id: str) -> None:
    j = JournalWriter(store, run_id, time.time() - 60)
    j.start("please file it")
    with j.attempt("demo:1"):
        (p,) = j.asks(1, ToolCall("c1", "create_ticket", {"summary": "shared drive"}))
        j.outcome(Status.AWAITING_APPROVAL, pending=(p,))


def test_a_run_asking_for_approval_lands_in_the_demos_notices_file(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "demo")
    path = tmp_path / "demo" / ".demo" / "notices.log"
    sink, notifier = demo_notices(store, path)
    try:
        awaiting(store, "shared-drive")
        deadline = time.monotonic() + 15
        while not (path.exists() and "agentrun approve" in path.read_text()):
            assert time.monotonic() < deadline, "no notice written"
            time.sleep(0.05)
    finally:
        assert notifier.stop()
        sink.close()
    text = path.read_text()
    assert text.startswith("agentrun: shared-drive awaits approval: create_ticket\n")
    assert "act: agentrun approve shared-drive 'tool/1/0/create_ticket#" in text


def notices_in(path: Path, *wanted: str) -> str:
    """The notices file once every ``wanted`` text is in it (a generous wait: a loaded
    machine)."""
    deadline = time.monotonic() + 60
    while True:
        text = path.read_text() if path.exists() else ""
        if all(w in text for w in wanted):
            return text
        assert time.monotonic() < deadline, f"not all of {wanted} in:\n{text}"
        time.sleep(0.1)


def test_the_demo_store_tells_of_its_failed_run_each_waiting_call_and_the_limit_hit(
    demo: Path,
) -> None:
    from durableagent.worker import DEFAULT_MAX_ATTEMPTS

    store = FileStore(demo)
    failures = store.read_failures("vpn-access")
    assert failures is not None and failures["failures"] == DEFAULT_MAX_ATTEMPTS
    assert failures.get("exhausted") is True  # the workers gave up: said in the record
    path = demo / ".demo" / "notices.log"
    sink, notifier = demo_notices(store, path)
    try:
        text = notices_in(
            path,
            "agentrun: vpn-access failed; the workers gave up\n",
            "act: agentrun retry vpn-access --store",
            "agentrun: report-export stopped at its budget\n",
            "(tool/2/1/send_email)",  # laptop-broken's second call, told on its own
        )
    finally:
        assert notifier.stop()
        sink.close()
    # laptop-broken asked for two calls in one turn: a notice for each, naming its call.
    laptop = [n for n in text.split("\n\n") if n.startswith("agentrun: laptop-broken awaits")]
    assert len(laptop) == 2, laptop
    markers = {p.marker for p in store.summary("laptop-broken").pending}  # type: ignore[union-attr]
    assert {m for m in markers for n in laptop if f"approve laptop-broken '{m}'" in n} == markers
    # report-export stopped at its model calls limit (its only one): the hint raises that.
    (over,) = [n for n in text.split("\n\n") if n.startswith("agentrun: report-export")]
    assert "act: agentrun budget report-export --add model_calls=" in over, over
    assert "tokens=" not in over


def test_a_worker_leaving_a_run_failed_on_a_count_that_does_not_say_so_marks_it_exhausted(
    tmp_path: Path,
) -> None:
    """A count made by a worker allowed more tries, or by a program that gave none: the
    worker that gives up on it says so in it, so a notifier tells of the failed run."""
    from _child_agents import broken

    from durableagent.worker import DEFAULT_MAX_ATTEMPTS, Worker, WorkerThread, note_failure

    store = FileStore(tmp_path / "runs", create=True)
    j = JournalWriter(store, "f1", time.time() - 60)
    j.start("please file it")
    with j.attempt("host-a:1"):
        j.outcome(Status.FAILED, error="ConnectionError: down")
    for _ in range(DEFAULT_MAX_ATTEMPTS):
        note_failure(store, "f1", ConnectionError("down"))
    assert not (store.read_failures("f1") or {}).get("exhausted")
    thread = WorkerThread(Worker(broken(tmp_path), store, rescan=0.5)).start()
    try:
        deadline = time.monotonic() + 60
        while not (store.read_failures("f1") or {}).get("exhausted"):
            assert time.monotonic() < deadline, store.read_failures("f1")
            time.sleep(0.1)
    finally:
        thread.stop()
    failures = store.read_failures("f1")
    assert failures is not None and failures["failures"] == DEFAULT_MAX_ATTEMPTS  # not retried
    assert not (tmp_path / ".side" / "attempts.log").exists()  # the model was never called
