"""Snapshot tests: fixed sample data, a fixed clock, no watcher, no blinking cursor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tuihelpers import following, loaded, make_app, select, until

from durableagent import FileStore
from durableagent_tui.sample import HINTS, build_sample_store

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def at(run_id: str | None = None, *keys: str) -> Any:
    """A run_before that waits for the load, selects ``run_id`` and presses ``keys``."""

    async def before(pilot: Pilot[object]) -> None:
        await loaded(pilot)
        if run_id is not None:
            await select(pilot, run_id)
        if keys:
            await pilot.press(*keys)
        await pilot.app.workers.wait_for_complete()  # R reads the failure count in a thread
        await until(pilot, lambda: following(pilot.app))  # a filter moves the cursor: read its run
        # Tables size their columns when idle: under load one pause may come too early.
        for _ in range(3):
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()

    return before


def store(tmp_path: Path, **kw: bool) -> Path:
    root = tmp_path / "runs"
    build_sample_store(root, **kw)
    return root


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path, corrupt=False))
    assert snap_compare(app, terminal_size=size, run_before=at())


@pytest.mark.parametrize("size", SIZES)
def test_corrupt_run(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("broken-1040"))


@pytest.mark.parametrize("size", SIZES)
def test_approve_dialog(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("markup-1048", "a"))


@pytest.mark.parametrize("size", SIZES)
def test_deny_question(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    keys = ("a", "d", *"wrong queue")
    assert snap_compare(app, terminal_size=size, run_before=at("markup-1048", *keys))


@pytest.mark.parametrize("size", SIZES)
def test_reconcile_dialog(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path), hints=HINTS)
    assert snap_compare(app, terminal_size=size, run_before=at("vpn-1043", "r", *"TICKET-9"))


@pytest.mark.parametrize("size", SIZES)
def test_retry_write_confirmation(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    keys = ("r", "shift+tab", "down", "enter")
    assert snap_compare(app, terminal_size=size, run_before=at("vpn-1043", *keys))


@pytest.mark.parametrize("size", SIZES)
def test_failed_run(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("refund-1041"))


@pytest.mark.parametrize("size", SIZES)
def test_attempts(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """audit-1049: two workers killed; each attempt's divider, the cut-off call and its re-run."""
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("audit-1049"))


@pytest.mark.parametrize("size", SIZES)
def test_plan(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("vpn-1043", "p"))


@pytest.mark.parametrize("size", SIZES)
def test_plan_of_a_killed_run(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("audit-1049", "p"))


@pytest.mark.parametrize("size", SIZES)
def test_retry_failed_run_dialog(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("refund-1041", "R"))


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at(None, "question_mark"))


@pytest.mark.parametrize("size", SIZES)
def test_filtered_view(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at(None, "slash", *"await"))


@pytest.mark.parametrize("size", SIZES)
def test_empty_store(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    root = tmp_path / "runs"
    FileStore(root).close()  # a new store, no run yet (a plain empty directory is no store)
    assert snap_compare(make_app(root), terminal_size=size, run_before=at())


@pytest.mark.parametrize("size", SIZES)
def test_fork_dialog(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    # tab to the timeline, up from the run's end to llm/3's result, f
    app = make_app(store(tmp_path))
    assert snap_compare(app, terminal_size=size, run_before=at("laptop-1039", "tab", "up", "f"))
