"""Every human action is a journal record (SPEC §11): ``agentrun retry`` appends a ``retry``
signal (by, reason) besides clearing the workers' failure count, ``audit`` lists it, and a
signal by nobody (``--by ''``) is refused by every signal command. Both stores."""

from __future__ import annotations

import pytest

from durableagent import Message, Outcome, RunStatus, SignalError, Status, Store, signal, submit
from durableagent.audit import audit
from durableagent.cli.main import main
from durableagent.record import SIGNAL
from durableagent.view import view_store
from durableagent.worker import note_failure, read_attempts
from durableagent.worker.retry import _failures_now


def failed_run(store: Store, run_id: str = "f1") -> None:
    """A run whose one attempt failed with ``boom``, counted three times by the workers."""
    submit(store, run_id, [Message("user", "file it")])
    with store.lease(run_id, owner="host-a:11") as lease:
        seq = store.load(run_id)[-1].seq
        store.save_outcome(run_id, Outcome(Status.FAILED, error="boom", seq=seq), lease=lease)
    for _ in range(3):
        note_failure(store, run_id, RuntimeError("boom"))


def test_agentrun_retry_records_who_asked_and_why(
    any_store: Store, store_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    failed_run(any_store)
    assert view_store(any_store, "f1").status == RunStatus.FAILED
    code = main(["retry", "f1", "--by", "ana", "--reason", "quota raised", "--store", store_spec])
    assert code == 0, capsys.readouterr().err
    last = any_store.load("f1")[-1]
    assert last.type == SIGNAL
    assert last.data == {"name": "retry", "payload": {}, "by": "ana", "reason": "quota raised"}
    assert read_attempts(any_store, "f1") is None  # the count is cleared too


def test_a_retry_signal_alone_makes_a_failed_run_ready_and_its_count_stale(
    any_store: Store,
) -> None:
    failed_run(any_store)
    summary = any_store.summary("f1")
    assert summary is not None
    counted = read_attempts(any_store, "f1")
    assert _failures_now(counted, summary.signals) == 3
    signal(any_store, "f1", "retry", {}, by="ana")
    summary = any_store.summary("f1")
    assert summary is not None and summary.status == RunStatus.READY  # a worker takes it
    assert _failures_now(read_attempts(any_store, "f1"), summary.signals) == 0


def test_audit_lists_a_retry_pending_until_a_worker_tries_again(any_store: Store) -> None:
    failed_run(any_store)
    signal(any_store, "f1", "retry", {}, by="ana", reason="quota raised")
    (d,) = audit(any_store).decisions
    assert (d.decision, d.by, d.reason, d.effect) == ("retried", "ana", "quota raised", "pending")


def test_a_retry_takes_no_payload(any_store: Store) -> None:
    failed_run(any_store)
    with pytest.raises(SignalError, match="takes no payload"):
        signal(any_store, "f1", "retry", {"x": 1}, by="ana")


@pytest.mark.parametrize("by", ["", "   ", "\t"])
@pytest.mark.parametrize(
    "command",
    [
        ["retry", "f1"],
        ["approve", "f1", "tool/1/0/x#0"],
        ["deny", "f1", "tool/1/0/x#0"],
        ["cancel", "f1", "--reason", "r"],
        ["pause", "f1", "--reason", "r"],
        ["resume", "f1"],
        ["reconcile", "f1", "tool/1/0/x", "--retry"],
    ],
)
def test_a_signal_by_nobody_is_refused_by_every_command(
    any_store: Store,
    store_spec: str,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    by: str,
) -> None:
    failed_run(any_store)
    before = any_store.load("f1")
    with pytest.raises(SystemExit) as e:
        main([*command, "--by", by, "--store", store_spec])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--by must name someone" in err and "Traceback" not in err
    assert any_store.load("f1") == before
