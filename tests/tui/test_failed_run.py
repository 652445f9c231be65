"""A failed run: its whole error in the record pane, and R retries it as ``agentrun retry``
does, after a confirmation that names the run and shows what the workers recorded."""

from __future__ import annotations

from pathlib import Path

from tuihelpers import loaded, make_app, record_pane, screen_text, select, until, unwrapped

from durableagent import FileStore, Status
from durableagent.testing import JournalWriter
from durableagent_tui.actions import Failures
from durableagent_tui.dialogs import RetryDialog
from durableagent_tui.dialogs.retry import next_try_text
from durableagent_tui.sample import T0

SIZE = (120, 36)
ERROR = (
    "ConnectionError: policy service unreachable at https://policy.internal/v2/lookup after "
    "3 tries (last: connection reset by peer); check the VPN to the policy network"
)


def counted(root: Path, run_id: str) -> Path:
    return root / ".worker" / f"{run_id}.json"


async def test_a_failed_run_shows_its_whole_error_in_the_record_pane(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    j = JournalWriter(store, "policy-9", T0)
    j.start("what is the policy?")
    j.add("step.started", "llm/1", "model")
    j.outcome(Status.FAILED, error=ERROR)
    app = make_app(root)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        await select(pilot, "policy-9")
        # The timeline ends in the failure (cut to its width); the pane beside shows it whole.
        assert app.timeline.get_row("failed")[-1].plain.startswith("failed  ConnectionError")
        assert unwrapped(ERROR) in record_pane(app)
        assert unwrapped("R retries it now") in record_pane(app)


async def test_R_asks_naming_the_run_and_shows_the_workers_count(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "refund-1041")
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RetryDialog))
        await pilot.pause()  # pushed from a thread: let it draw
        text = screen_text(app)
        assert "Retry failed run  refund-1041" in text
        assert "error    model call failed: 503 Service Unavailable" in text
        assert "workers  failed 2 times, the last at 09:20:02 (39m ago)" in text
        assert "next try due now, when the next worker looks" in text
        assert "last     ServerError: model call failed: 503 Service Unavailable" in text
        assert "Retry refund-1041" in text and "y retry refund-1041" in text


async def test_y_in_the_retry_dialog_records_a_retry_and_clears_the_count_as_agentrun_retry_does(
    sample: Path,
) -> None:
    journal = (sample / "refund-1041.jsonl").read_bytes()
    assert counted(sample, "refund-1041").exists()
    app = make_app(sample)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        await select(pilot, "refund-1041")
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RetryDialog))
        await pilot.pause()  # pushed from a thread: let it draw
        await pilot.press("y")
        await until(pilot, lambda: not counted(sample, "refund-1041").exists())
        await until(pilot, lambda: "will be retried by the next worker" in screen_text(app))
    # As agentrun retry: one retry signal appended (who asked), the rest of the journal kept.
    after = (sample / "refund-1041.jsonl").read_bytes()
    assert after.startswith(journal)
    (added,) = FileStore(sample).load("refund-1041")[-1:]
    assert added.type == "signal" and added.data["name"] == "retry" and added.data["by"]
    assert after.count(b"\n") == journal.count(b"\n") + 1


async def test_enter_and_esc_in_the_retry_dialog_change_nothing(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "refund-1041")
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RetryDialog))
        await pilot.pause()  # pushed from a thread: let it draw
        await pilot.press("enter", "space")
        await app.workers.wait_for_complete()
        assert isinstance(app.screen, RetryDialog)
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.screen_stack) == 1
    assert counted(sample, "refund-1041").exists()


async def test_retry_of_a_run_that_moved_on_changes_nothing(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "refund-1041")
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RetryDialog))
        await pilot.pause()  # pushed from a thread: let it draw
        # A worker retries it meanwhile and gets further.
        JournalWriter(FileStore(sample), "refund-1041", T0 + 3000).add(
            "step.completed", "llm/1", "model", {"role": "assistant", "content": "ok"}
        )
        await pilot.press("y")
        await until(pilot, lambda: app.screen.query_one("#error").display)
        assert "changed underneath" in screen_text(app)
    assert counted(sample, "refund-1041").exists()


async def test_R_without_a_recorded_count_says_so(sample: Path) -> None:
    counted(sample, "refund-1041").unlink()
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, "refund-1041")
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RetryDialog))
        await pilot.pause()  # pushed from a thread: let it draw
        assert "no failure count recorded" in screen_text(app)


def test_the_next_try_follows_a_workers_default_backoff_and_budget() -> None:
    now = 1_000_000.0
    # One failure half a second ago that asked for 30 s (Retry-After): due in 30 s from it.
    soon = next_try_text(Failures(1, now - 0.5, "429", retry_after=30.0), now).plain
    assert soon.startswith("at ") and "(in 30 s)" in soon and "3 attempts" in soon
    # Two failures a second ago: 2 s after the last, one second from now.
    assert "(in 1 s)" in next_try_text(Failures(2, now - 1.0, "boom"), now).plain
    assert next_try_text(Failures(3, now, "boom"), now).plain.startswith("never: workers have")
    stale = Failures(3, now, "boom", stale=True)  # a human signalled since: counted afresh
    assert next_try_text(stale, now).plain == "when the next worker looks (within seconds)"
    assert next_try_text(None, now).plain == "when the next worker looks (within seconds)"
