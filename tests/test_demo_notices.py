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
