"""The runs table at scale: rows come from the store's summaries, kept sorted by keyed diff
(a change moves one row, never a re-sort), filtered in memory as you type, drawn only where
they are on screen; the header says how many runs are loading."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tuihelpers import line_with, loaded, make_app, screen_lines, until

from durableagent import FileStore, RunStatus, Summary, signal
from durableagent_tui.runs_model import RunRows, sort_key
from durableagent_tui.sample import NOW
from durableagent_tui.tracker import Changes


def in_order(rows: RunRows) -> bool:
    keys = [sort_key(rows.summaries[rid]) for rid in rows.shown]
    return keys == sorted(keys)


def summary(rid: str, status: RunStatus, at: float, **kw: Any) -> Summary:
    return Summary(rid, status, last_activity=at, **kw)


def many(n: int) -> list[Summary]:
    """n runs: one in 50 awaiting, the rest completed, newest last."""
    return [
        summary(
            f"run-{i:05d}",
            RunStatus.AWAITING_APPROVAL if i % 50 == 0 else RunStatus.COMPLETED,
            1000.0 + i,
        )
        for i in range(n)
    ]


# -- the model ----------------------------------------------------------------------------------


def test_a_change_moves_one_row_without_sorting_the_rest() -> None:
    rows = RunRows()
    rows.update(many(5000))
    assert rows.sorts == 1 and in_order(rows)
    assert rows.shown[0] == "run-04950"  # awaiting first, newest first
    moved = summary("run-00100", RunStatus.READY, 9999.0)
    assert rows.update([moved]) == {"run-00100"}
    assert rows.sorts == 1  # moved by bisect, not by a sort
    assert in_order(rows)
    assert rows.counts[RunStatus.READY] == 1 and rows.counts[RunStatus.AWAITING_APPROVAL] == 99
    assert rows.update([moved]) == set()  # the same summary again changes nothing


def test_a_removed_run_leaves_the_order_and_the_counts() -> None:
    rows = RunRows()
    rows.update(many(300))
    rows.update([], ["run-00000", "run-00007"])
    assert "run-00000" not in rows.shown and "run-00007" not in rows.order
    assert len(rows) == 298 and sum(rows.counts.values()) == 298 and in_order(rows)


def test_a_large_batch_sorts_once() -> None:
    rows = RunRows()
    rows.update(many(1000))
    rows.update([summary(f"run-{i:05d}", RunStatus.READY, 5000.0 + i) for i in range(500)])
    assert rows.sorts == 2 and in_order(rows)


def test_the_filter_matches_id_or_status_and_narrows_as_you_type() -> None:
    rows = RunRows()
    rows.update(many(10_000))
    rows.set_filter("await")  # the short word the table shows
    assert len(rows.shown) == 200 and in_order(rows)
    rows.set_filter("AWAITING_APPROVAL")
    assert len(rows.shown) == 200
    seen: list[int] = []
    for text in ("r", "ru", "run-", "run-0", "run-00", "run-009", "run-0099"):
        rows.set_filter(text)
        seen.append(len(rows.shown))
    assert seen == [10_000, 10_000, 10_000, 10_000, 1000, 100, 10]
    # A change while filtered lands in the filtered rows only if it matches.
    rows.update(
        [summary("run-00995", RunStatus.FAILED, 1.0), summary("run-00001", RunStatus.FAILED, 1.0)]
    )
    assert rows.shown[0] == "run-00995" and "run-00001" not in rows.shown and in_order(rows)
    rows.set_filter("")
    assert rows.shown is rows.order and len(rows.shown) == 10_000


def test_needing_human_reads_only_the_top_of_the_order() -> None:
    rows = RunRows()
    rows.update(many(1000))
    assert rows.needing_human() == [f"run-{i:05d}" for i in range(950, -1, -50)]


# -- the app ------------------------------------------------------------------------------------


async def test_rows_are_attention_first_then_newest_first(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        assert app.table.shown() == [
            "broken-1040", "vpn-1043", "markup-1048", "billing-1042", "refund-1041",
            "onboard-1047", "audit-1049", "wifi-1046", "laptop-1039",
        ]  # fmt: skip


async def test_a_change_updates_its_row_in_place_and_keeps_the_order(sample: Path) -> None:
    app = make_app(sample)
    store = FileStore(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        sorts = app.rows.sorts
        marker = app.summaries["billing-1042"].pending[0].marker
        signal(store, "billing-1042", "approve", {"marker": marker}, by="x")
        fresh = store.summary("billing-1042")
        assert fresh is not None
        app.apply(Changes({"billing-1042": fresh}))
        await pilot.pause()
        assert app.rows.sorts == sorts  # moved by a keyed diff, no re-sort
        assert "○ ready" in line_with(app, "billing-1042")
        assert app.table.row_count == 9
        assert in_order(app.rows)


async def test_removed_journal_drops_its_row(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        (sample / "onboard-1047.jsonl").unlink()
        app.apply(app.tracker.scan())
        await pilot.pause()
        assert "onboard-1047" not in app.table.shown()
        assert app.table.row_count == 8


class SlowStore:
    """A store whose summaries wait for a go: the app's first load, held open."""

    def __init__(self, store: FileStore) -> None:
        self.store = store
        self.go = threading.Event()

    def summaries(self) -> list[Summary]:
        self.go.wait(10)
        return self.store.summaries()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_the_header_says_how_many_runs_are_loading(sample: Path) -> None:
    slow = SlowStore(FileStore(sample))
    app = make_app(slow)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: any("loading 9 runs…" in line for line in screen_lines(app)))
        assert not any("0 runs" in line for line in screen_lines(app))
        slow.go.set()
        await loaded(pilot)
        assert screen_lines(app)[1].startswith(" 9 runs  ⊘ 1 corrupt")


def big_store(root: Path, n: int) -> FileStore:
    """n runs submitted through the store (so its summary index is kept), one in 50 awaiting."""
    from durableagent import Outcome, Pending, Status

    store = FileStore(root)
    from durableagent.testing import JournalWriter

    for i in range(n):
        j = JournalWriter(store, f"run-{i:04d}", NOW - 3600 + i)
        j.start("help")
        if i % 50 == 0:
            p = Pending(f"tool/1/0/x#{i:012d}", "tool/1/0/x", "x", {})
            store.save_outcome(j.run_id, Outcome(Status.AWAITING_APPROVAL, pending=(p,), seq=1))
    return store


async def test_only_the_rows_on_screen_are_drawn_and_the_filter_answers_each_key(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    big_store(root, 600)
    app = make_app(root)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        assert app.table.row_count == 600
        drawn: list[int] = []
        real = app.table.render_line
        app.table.render_line = lambda y: drawn.append(y) or real(y)  # type: ignore[method-assign]
        app.table.refresh()
        await pilot.pause()
        assert 0 < len(set(drawn)) <= app.table.size.height  # a screenful, not 600 rows
        await pilot.press("/")
        for key, want in (("r", 600), ("u", 600), ("n", 600), ("-", 600), ("0", 600),
                          ("5", 100), ("5", 10)):  # fmt: skip
            await pilot.press(key)
            assert app.table.row_count == want  # matches shown as you type
        assert app.table.shown()[0] == "run-0550"  # awaiting first
        assert "run-0550" in line_with(app, "▲ awaiting")


async def test_a_click_selects_a_run_and_a_second_click_opens_its_timeline(sample: Path) -> None:
    before = {p.name: p.read_bytes() for p in sample.glob("*.jsonl")}
    app = make_app(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        table = app.table
        row = table.get_row_index("billing-1042")
        await pilot.click(table, offset=(20, row + 1))  # + the header line
        await until(pilot, lambda: app.timeline.run_id == "billing-1042")
        assert table.selected_run == "billing-1042" and table.has_focus
        await pilot.click(table, offset=(20, row + 1))
        await until(pilot, lambda: app.timeline.has_focus)
    assert {p.name: p.read_bytes() for p in sample.glob("*.jsonl")} == before  # nothing written


async def test_a_filter_that_hides_the_selected_run_selects_the_first_match(
    tmp_path: Path,
) -> None:
    root = tmp_path / "runs"
    big_store(root, 300)
    app = make_app(root)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        await pilot.press("G")  # the last row: an old, ready run
        assert app.table.cursor_row == 299
        await pilot.press("/", *"await")
        assert app.table.cursor_row == 0
        assert app.table.selected_run == app.table.shown()[0] == "run-0250"
        assert app.table.scroll_y == 0  # the matches from the top, not the end of the list
        await pilot.press("enter", "escape")
        assert app.table.selected_run == "run-0250"  # kept when the filter clears
