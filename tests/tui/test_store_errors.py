"""A store that fails under a running app is said, never swallowed: the header names the
failure until a read works again, and a toast says it once."""

from __future__ import annotations

from pathlib import Path

from tuihelpers import loaded, make_app, screen_lines, until

from durableagent import FileStore, Message, submit

SIZE = (120, 36)


async def test_a_refresh_that_fails_is_in_the_header_and_a_toast_until_the_store_reads_again(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "runs")
    submit(store, "r1", [Message("user", "hello")])
    app = make_app(tmp_path / "runs", live=True, poll=True, label="runs/")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        index = tmp_path / "runs" / ".summaries" / "index.jsonl"
        index.unlink()
        index.mkdir()  # the summary index is a directory now: every listing fails
        await until(pilot, lambda: "reading the store failed" in screen_lines(app)[0], 20)
        assert "StoreError" in screen_lines(app)[1]  # why, on the line below
        toasts = [n.message for n in app._notifications]
        assert [t for t in toasts if "reading runs/ failed" in t and "is a directory" in t]
        assert app.table.get_row("r1")[0].plain.endswith("ready")  # as last seen
        index.rmdir()
        await until(pilot, lambda: "reading the store failed" not in screen_lines(app)[0], 20)
        assert len([t for t in app._notifications if "failed" in t.message]) == 1  # said once
