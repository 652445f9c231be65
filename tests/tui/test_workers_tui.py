"""Who is working, on screen (SPEC §11): the header's ``2 workers`` / ``no live worker``, a
waiting ready run's ``no live worker for 14m``, and the workers screen ``w`` opens. The live
source is off (make_app); the workers are injected as the app reads them."""

from __future__ import annotations

import time
from pathlib import Path

from tuihelpers import loaded, make_app, screen_text, until

from durableagent import FileStore, Message, submit
from durableagent.roster import WorkerInfo
from durableagent_tui.workers import WorkersScreen, crew_of

SIZE = (160, 40)


def worker(owner: str, beat_at: float, *, runs: tuple[str, ...] = ()) -> WorkerInfo:
    return WorkerInfo(
        owner,
        "host-b",
        4242,
        "0.1.0",
        "helpdesk:agent",
        "runs",
        beat_at - 600,
        beat_at,
        4,
        runs,
        5.0,
    )


def store_with_a_ready_run(tmp_path: Path) -> tuple[Path, float]:
    root = tmp_path / "runs"
    store = FileStore(root)
    submit(store, "ready-1", [Message("user", "hello")])
    summary = store.summary("ready-1")
    assert summary is not None and summary.last_activity is not None
    return root, summary.last_activity


async def test_no_live_worker_is_said_in_the_header_and_on_the_waiting_ready_run(
    tmp_path: Path,
) -> None:
    root, at = store_with_a_ready_run(tmp_path)
    now = at + 14 * 60 + 5
    app = make_app(root, clock=lambda: now)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "no live worker" not in screen_text(app)  # nothing read yet: nothing said
        app.show_crew(crew_of([worker("w1", at - 3600)], now))
        await pilot.pause()
        text = screen_text(app)
        assert "no live worker" in text.splitlines()[1]
        assert "no live worker for 14m" in text
        assert app.header.workers_note is not None
        assert app.header.workers_note.style == "bold yellow"


async def test_live_workers_are_counted_and_the_ready_run_waits_as_before(
    tmp_path: Path,
) -> None:
    root, at = store_with_a_ready_run(tmp_path)
    now = at + 60
    app = make_app(root, clock=lambda: now)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        app.show_crew(crew_of([worker("w1", now - 1), worker("w2", now - 2)], now))
        await pilot.pause()
        text = screen_text(app)
        assert "2 workers" in text.splitlines()[1]
        assert "no live worker" not in text


async def test_w_opens_the_workers_screen(tmp_path: Path) -> None:
    root, at = store_with_a_ready_run(tmp_path)
    store = FileStore(root)
    store.beat(worker("w-live", at, runs=("ready-1",)))
    store.beat(worker("w-gone", at - 3600))
    app = make_app(root, clock=lambda: at + 2)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, WorkersScreen))
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "workers — 1 live" in text, text
        assert "w-live" in text and "host-b:4242" in text and "(ready-1)" in text
        assert "w-gone" in text and "gone" in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, WorkersScreen))


async def test_the_palette_offers_the_workers_screen(tmp_path: Path) -> None:
    root, _ = store_with_a_ready_run(tmp_path)
    app = make_app(root)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        assert "Workers" in [c.title for c in app.get_system_commands(app.screen)]


async def test_an_owner_filter_selects_the_runs_the_live_workers_hold(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    for rid in ("run-a", "run-b", "run-c"):
        submit(store, rid, [Message("user", "hello")])
    with store.lease("run-a", owner="host-a:1"), store.lease("run-b", owner="host-b:1"):
        now = time.time()
        app = make_app(root, clock=lambda: now)
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot)
            app.set_filter("owner:host-a*")  # before any beat is read: no run has an owner
            await pilot.pause()
            assert app.rows.shown == []
            crew = [
                worker("host-a:1", now, runs=("run-a",)),
                worker("host-b:1", now, runs=("run-b",)),
            ]
            app.show_crew(crew_of(crew, now))
            await pilot.pause()
            assert app.rows.shown == ["run-a"]
            assert "run-a" in screen_text(app) and "run-b" not in screen_text(app)
            app.set_filter("-owner:host-a*")
            await pilot.pause()
            assert sorted(app.rows.shown) == ["run-b", "run-c"]
            # host-a's worker is gone (its last beat long ago): it holds nothing now.
            app.show_crew(crew_of([worker("host-a:1", now - 3600, runs=("run-a",))], now))
            await pilot.pause()
            assert sorted(app.rows.shown) == ["run-a", "run-b", "run-c"]
