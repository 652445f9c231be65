"""The runs table's keyed diff: attention order, in-place updates, no rebuild."""

from __future__ import annotations

from pathlib import Path

from tuihelpers import loaded, make_app

from durableagent import FileStore, signal, view_store
from durableagent_tui.runs_table import sort_key
from durableagent_tui.tracker import Changes


def in_order(app: object) -> bool:
    views = app.views  # type: ignore[attr-defined]
    shown = app.table.shown()  # type: ignore[attr-defined]
    return shown == sorted(shown, key=lambda rid: sort_key(views[rid]))


async def test_rows_are_attention_first_then_newest_first(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        assert app.table.shown() == [
            "broken-1040", "vpn-1043", "markup-1048", "billing-1042", "refund-1041",
            "onboard-1047", "wifi-1046", "laptop-1039",
        ]  # fmt: skip


async def test_a_change_updates_its_row_in_place_and_keeps_the_order(sample: Path) -> None:
    app = make_app(sample)
    store = FileStore(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        added: list[object] = []
        original = app.table.add_row
        app.table.add_row = lambda *a, **k: added.append(k) or original(*a, **k)  # type: ignore[method-assign]
        marker = app.views["billing-1042"].pending[0].marker
        signal(store, "billing-1042", "approve", {"marker": marker}, by="x")
        app.apply(Changes({"billing-1042": view_store(store, "billing-1042")}))
        await pilot.pause()
        assert added == []  # updated in place, not re-added
        assert app.table.get_row("billing-1042")[0].plain == "○ ready"
        assert app.table.row_count == 8
        assert in_order(app)


async def test_removed_journal_drops_its_row(sample: Path) -> None:
    app = make_app(sample)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(pilot)
        (sample / "onboard-1047.jsonl").unlink()
        app.apply(app.tracker.scan())
        await pilot.pause()
        assert "onboard-1047" not in app.table.shown()
        assert app.table.row_count == 7
