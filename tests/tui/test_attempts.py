"""What happened across attempts: each attempt's divider from the store's attempt log (its
number, owner and how it ended), which steps it replayed, ran and re-ran, a cut-off start
that never shows ✓, and a worker killed while the screen is open."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tuihelpers import loaded, make_app, screen_text, select, toast_text, until

from durableagent import Attempt, FileStore, Record
from durableagent.attempts import divider_text, spans, start_states
from durableagent_tui.sample import AUDIT

SIZE = (160, 48)


def last_cell(app: object, key: str) -> str:
    return app.timeline.get_row(key)[-1].plain  # type: ignore[attr-defined]


def mark(app: object, key: str) -> str:
    """The mark of the timeline row ``key`` ("" while there is no such row)."""
    try:
        return app.timeline.get_row(key)[0].plain  # type: ignore[attr-defined]
    except Exception:  # RowDoesNotExist
        return ""


async def test_each_attempt_has_a_divider_with_its_owner_and_ending(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, AUDIT)
        keys = [str(r.key.value) for r in app.timeline.ordered_rows]
        assert keys == [
            "attempt-1", "1", "2", "3", "4", "5", "6",
            "attempt-2", "7", "8", "9", "10", "11", "lost-2",
        ]  # fmt: skip
        assert last_cell(app, "attempt-1") == "worker-1 · lost · ran 3 · cut off llm/2"
        assert last_cell(app, "attempt-2").startswith("worker-2 · lost · replayed 2 · ran 2")
        assert mark(app, "attempt-2") == "↯"
        assert "its worker stopped without saying" in last_cell(app, "lost-2")


async def test_a_cut_off_call_and_its_re_run_do_not_both_show_done(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, AUDIT)
        assert mark(app, "6") == "↯"  # llm/2's first start: cut off by the kill
        assert "cut off: no result; started again at seq 7" in last_cell(app, "6")
        assert mark(app, "7") == "✓"  # its re-run got the result
        assert last_cell(app, "7").endswith("model call · re-run")
        assert mark(app, "11") == "…"  # llm/3: re-run by the next attempt
        assert "no result (re-run on resume)" in last_cell(app, "11")


async def test_the_record_pane_shows_an_attempt_whole(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await select(pilot, AUDIT)
        row = app.timeline.get_row_index("attempt-2")
        app.timeline.move_cursor(row=row, animate=False)
        await pilot.pause()
        text = " ".join(screen_text(app).split())
        assert "attempt 2 audit-1049" in text
        assert "owner worker-2" in text and "lease epoch 2" in text
        assert "replayed llm/1, tool/1/0/lookup_policy" in text
        assert "re-ran llm/2 (started before without a result)" in text


def test_attempts_map_to_the_records_they_wrote() -> None:
    def rec(seq: int, type: str, step: str = "") -> Record:
        return Record(seq, type, step, "model" if step.startswith("llm") else "", {}, float(seq))

    records = [
        rec(1, "run.started"),
        rec(2, "step.started", "llm/1"),
        rec(3, "step.completed", "llm/1"),
        rec(4, "step.started", "llm/2"),  # killed here
        rec(5, "signal", "x"),  # a human, between attempts
        rec(6, "step.started", "llm/2"),
        rec(7, "step.completed", "llm/2"),
    ]
    attempts = [
        Attempt(1, "a", 1, None, 1, ended="lost"),
        Attempt(2, "b", 2, None, 6, last_seq=7, ended="completed"),
    ]
    first, second = spans(records, attempts)
    assert (first.first, first.last, first.ran, first.cut) == (1, 4, ("llm/1", "llm/2"), ("llm/2",))
    assert (second.first, second.last, second.replayed, second.reran) == (
        6,
        7,
        ("llm/1",),
        ("llm/2",),
    )
    assert divider_text(second) == "b · completed · replayed 1 · re-ran llm/2"
    assert start_states(records) == {2: ("done", 3), 4: ("cut", 6), 6: ("done", 7)}


HOLDER = r"""
import sys, time
from durableagent import FileStore, Record, RunBusyError
store = FileStore(sys.argv[1])
for _ in range(500):  # a supervisor's lease probe can hold the lock file for a moment
    try:
        lease = store.lease(sys.argv[2], owner="doomed-worker")
        lease.__enter__()
        break
    except RunBusyError:
        time.sleep(0.01)
store.append(sys.argv[2], Record.make("step.started", "llm/1", "model"))
print("holding", flush=True)
time.sleep(120)
"""


async def test_a_worker_killed_while_watching_turns_running_into_ready_and_says_so(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    from durableagent import Message, submit

    submit(store, "k-1", [Message("user", "help")])
    app = make_app(root, live=True)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await loaded(pilot)
        child = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(root), "k-1"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None and child.stdout.readline() == "holding\n"
            await until(pilot, lambda: app.summaries["k-1"].status == "running", timeout=30)
            await until(pilot, lambda: mark(app, "attempt-1") == "●")  # the running attempt
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            await until(pilot, lambda: app.summaries["k-1"].status == "ready", timeout=30)
            await until(
                pilot, lambda: "lost-1" in [str(r.key.value) for r in app.timeline.ordered_rows]
            )
            assert mark(app, "attempt-1") == "↯"
            assert last_cell(app, "attempt-1") == "doomed-worker · lost · ran 1 · cut off llm/1"
            await until(pilot, lambda: "k-1: attempt 1 (doomed-worker) was lost" in toast_text(app))
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
