"""The supervisor app: header, runs table, timeline and record detail over a live store."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from durableagent import RunStatus, RunView
from durableagent.stores import Store

from .actions import Decision, Failures, Pin, failure_state, retry_failed, write_decision
from .detail import RecordDetail
from .dialogs import ApproveDialog, HelpScreen, ReconcileDialog, RetryDialog
from .header import StoreHeader
from .runs_table import RunsTable
from .styles import LOOKS
from .timeline import Timeline
from .tracker import Changes, StoreTracker

LOOK_ONE_BY_ONE = 64  # more changed runs than this in one notice: read the summaries
RESCAN_S = 30.0  # safety net for missed watch events
POLL_S = 1.0  # --poll, or after a watch error
LEASE_S = 2.0  # a dead worker's lease makes no file event
RETIME_S = 10.0


def store_label(store: Store) -> str:
    """How the header names a store."""
    return str(getattr(store, "description", store))


class SupervisorApp(App[int]):
    """``agentrun tui``: watch a store's runs and unblock the ones that need a human."""

    CSS_PATH = "app.tcss"
    TITLE = "agentrun"
    # An action the selected run does not offer is greyed out in the footer; its key then
    # falls through to the hidden "unavailable" binding, which says why instead of nothing.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("n", "next_human", "Next", id="next_human"),
        Binding("a", "approve", "Approve", id="approve"),
        Binding("a", "unavailable('approve')", show=False, id="approve.unavailable"),
        Binding("r", "reconcile", "Reconcile", id="reconcile"),
        Binding("r", "unavailable('reconcile')", show=False, id="reconcile.unavailable"),
        Binding("R", "retry", "Retry", id="retry"),
        Binding("R", "unavailable('retry')", show=False, id="retry.unavailable"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="clear_filter"),
        Binding("q", "quit", "Quit", id="quit"),
        # Priority: a dialog (a modal screen) hides the app's other keys; this one still works.
        Binding("ctrl+c", "quit_now", "Quit", show=False, priority=True, id="quit_now"),
    ]

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        read_only: bool = False,
        poll: bool = False,
        live: bool = True,
        clock: Callable[[], float] = time.time,
        label: str | None = None,
        cursor_blink: bool = True,
        hints: Mapping[str, str] | None = None,
    ) -> None:
        """``store`` is a Store, or a directory that becomes a FileStore once it exists;
        ``live=False`` loads once and never watches (tests); ``clock`` gives "now" for
        relative times; ``label`` replaces the store's name in the header;
        ``cursor_blink=False`` keeps pictures stable; ``hints`` maps a tool name to where a
        human should check whether its write happened (shown when reconciling)."""
        super().__init__()
        self.cursor_blink = cursor_blink
        self.read_only = read_only
        self.poll = poll
        self.live = live
        self.clock = clock
        where = store if isinstance(store, (str, os.PathLike)) else store_label(store)
        self.label = label if label is not None else str(where)
        self.hints: Mapping[str, str] = dict(hints or {})
        self.tracker = StoreTracker(store)
        self.views: dict[str, RunView] = {}
        self.resumed: dict[str, int | None] = {}
        self.filter_text = ""
        self.loaded = False
        self._lock = threading.Lock()  # one tracker user at a time (load, watch, timers)
        self._last_jump: str | None = None

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StoreHeader(self.label, id="header")
        with Vertical(id="runs-pane"):
            yield Input(placeholder="filter by run id or status · esc clears", id="filter")
            yield RunsTable(id="runs")
            yield Static(id="empty")
        with Horizontal(id="lower"):
            yield Timeline(id="timeline")
            yield RecordDetail(id="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs-pane").border_title = "runs"
        self.query_one("#timeline").border_title = "timeline"
        self.query_one("#detail").border_title = "record"
        self.query_one("#filter", Input).cursor_blink = self.cursor_blink
        self.query_one("#filter").display = False
        self.query_one("#runs", RunsTable).focus()
        self._load()

    @property
    def table(self) -> RunsTable:
        """The runs table."""
        return self.query_one("#runs", RunsTable)

    @property
    def timeline(self) -> Timeline:
        """The selected run's timeline."""
        return self.query_one("#timeline", Timeline)

    @property
    def header(self) -> StoreHeader:
        """The store header."""
        return self.query_one("#header", StoreHeader)

    # -- loading and live updates ------------------------------------------------------------

    def _locked(self, fn: Callable[[], Changes]) -> Changes:
        with self._lock:
            return fn()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load(self) -> None:
        changes = self._locked(self.tracker.scan)
        self.call_from_thread(self._loaded, changes)

    def _loaded(self, changes: Changes) -> None:
        self.loaded = True
        self.apply(changes, initial=True)
        if not self.live:
            self.header.set_live("paused")
            return
        self.set_interval(LEASE_S, self._check_leases)
        self.set_interval(RETIME_S, self._retime)
        if self.poll:
            self._start_polling()
        else:
            self.header.set_live("watching")
            self._watch()

    def _start_polling(self, live: str = "polling") -> None:
        self.header.set_live(live)
        self.set_interval(POLL_S, self._rescan)

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def _watch(self) -> None:
        store = self.tracker.store
        while store is None:
            self.header.set_live("waiting for store")
            await asyncio.sleep(POLL_S)
            store = self.tracker.store
        self.header.set_live("watching")
        self.set_interval(RESCAN_S, self._rescan)
        await self._rescan()  # whatever happened before the change feed began
        try:
            async for ids in store.changes(rescan=RESCAN_S):
                if len(ids) > LOOK_ONE_BY_ONE:
                    await self._rescan()  # a rescan's worth: the summaries are cheaper
                    continue
                # Refreshing off the loop while the feed keeps collecting coalesces a burst.
                changes = await asyncio.to_thread(self._locked, partial(self.tracker.refresh, ids))
                self.apply(changes)
        except Exception as e:  # the feed is best effort: polling keeps the screen live
            self.notify(
                f"watching {self.label} failed ({e}); polling instead",
                severity="warning",
                markup=False,
            )
            self._start_polling("watch error")

    async def _rescan(self) -> None:
        self.apply(await asyncio.to_thread(self._locked, self.tracker.scan))

    async def _check_leases(self) -> None:
        self.apply(await asyncio.to_thread(self._locked, self.tracker.recheck_leases))

    def _retime(self) -> None:
        with suppress(NoMatches), self.batch_update():  # NoMatches: shutting down
            self.table.retime(self.views, self.clock())

    def apply(self, changes: Changes, *, initial: bool = False) -> None:
        """Fold a refresh into the screen: keyed table diff, counts, and the open timeline."""
        if not changes and not initial:
            return
        self.views.update(changes.views)
        self.resumed.update(changes.resumed)
        for rid in changes.removed:
            self.views.pop(rid, None)
            self.resumed.pop(rid, None)
        show = [v for v in changes.views.values() if self._matches(v)]
        hide = set(changes.removed) | {
            v.run_id for v in changes.views.values() if not self._matches(v)
        }
        try:
            self._show_changes(changes, show, hide, initial)
        except NoMatches:  # a refresh that lands while the app shuts down: nothing to draw
            return
        self.refresh_bindings()

    def _show_changes(
        self, changes: Changes, show: list[RunView], hide: set[str], initial: bool
    ) -> None:
        table = self.table
        with self.batch_update():
            table.sync(show, hide, self.clock())
            if initial and table.row_count:
                table.move_cursor(row=0, animate=False)
            self.header.set_counts(Counter(v.status for v in self.views.values()))
            if changes and not initial:
                self.header.set_live(self.header.live, time.time())
            self._update_empty()
            selected = table.selected_run
            if (
                selected is None
                or selected != self.timeline.run_id
                or selected in changes.views
                or selected in changes.removed
            ):
                self._select(selected)

    # -- selection ---------------------------------------------------------------------------

    @property
    def selected(self) -> RunView | None:
        """The view of the run under the table cursor."""
        try:
            rid = self.table.selected_run
        except NoMatches:  # asked while the app shuts down
            return None
        return self.views.get(rid) if rid is not None else None

    def _select(self, rid: str | None) -> None:
        view = self.views.get(rid) if rid is not None else None
        self.timeline.show(view, self.resumed.get(rid) if rid else None)
        self._show_detail()

    def _show_detail(self) -> None:
        try:
            detail = self.query_one("#detail", RecordDetail)
        except NoMatches:  # a highlight message handled while the app shuts down
            return
        record = self.timeline.record_at_cursor()
        detail.show(record if record is not None else self.timeline.view)

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        rid = event.row_key.value
        with suppress(NoMatches):  # a late highlight while the app shuts down
            if rid != self.timeline.run_id:
                self._select(rid)
            self.refresh_bindings()

    @on(DataTable.RowSelected, "#runs")
    def _run_selected(self) -> None:
        self.timeline.focus()

    @on(Timeline.Back)
    def _timeline_back(self) -> None:
        self.table.focus()

    @on(RecordDetail.Back)
    def _detail_back(self) -> None:
        self.timeline.focus()

    @on(DataTable.RowHighlighted, "#timeline")
    def _record_highlighted(self) -> None:
        self._show_detail()

    def _update_empty(self) -> None:
        empty = self.query_one("#empty", Static)
        has_rows = self.table.row_count > 0
        # The table stays (and keeps focus); the message sits under its header.
        empty.display = not has_rows
        if has_rows:
            return
        if not self.loaded:
            msg = "loading…"
        elif self.tracker.store is None:
            msg = f"No store at {self.label} yet; the screen fills in when runs appear."
        elif self.filter_text:
            msg = f"No run matches {self.filter_text!r} (esc clears the filter)."
        else:
            msg = f"No runs in {self.label} yet. Submit one with: agentrun submit RUN TEXT"
        empty.update(Text(msg, style="dim"))

    # -- filter ------------------------------------------------------------------------------

    def _matches(self, view: RunView) -> bool:
        f = self.filter_text
        if not f:
            return True
        return f in view.run_id.lower() or f in str(view.status) or f in LOOKS[view.status].word

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.table.focus()

    def set_filter(self, text: str) -> None:
        """Show only runs whose id or status contains ``text`` (case-insensitive)."""
        self.filter_text = text.strip().lower()
        views = self.views.values()
        show = [v for v in views if self._matches(v)]
        hide = [v.run_id for v in views if not self._matches(v)]
        with self.batch_update():
            self.table.sync(show, hide, self.clock())
            self._update_empty()
            self._select(self.table.selected_run)
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display or self.filter_text:
            box.value = ""
            box.display = False
            self.set_filter("")
            self.table.focus()

    # -- actions -----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide writes when read-only; grey out the ones the selected run does not offer."""
        if len(self.screen_stack) > 1 and action in _MAIN_ACTIONS:
            return False  # a dialog is up: its keys, not the main screen's
        return self.offers(action)

    def offers(self, action: str) -> bool | None:
        """Whether the main screen offers ``action`` now: False hidden, None greyed out."""
        if action in _WANTS:
            if self.read_only:
                return False
            view = self.selected
            if view is None:
                return None
            return True if view.status == _WANTS[action] else None
        if action == "unavailable":
            return not self.read_only
        if action == "next_human":
            return True if any(v.needs_human for v in self.views.values()) else None
        return True

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.read_only))

    def action_next_human(self) -> None:
        """Jump to the first run that needs a human, in the order the table shows; again for
        the next one down (round to the top after the last)."""
        views = self.views
        ids = [rid for rid in self.table.shown() if rid in views and views[rid].needs_human]
        if not ids:
            self.notify("No run needs a human.")
            return
        current = self.table.selected_run
        if self._last_jump is not None and current == self._last_jump and current in ids:
            target = ids[(ids.index(current) + 1) % len(ids)]
        else:
            target = ids[0]
        self._last_jump = target
        self.table.move_cursor(row=self.table.get_row_index(target), animate=False)
        self.table.focus()

    def action_approve(self) -> None:
        view = self.selected
        if self.read_only or view is None or view.status != RunStatus.AWAITING_APPROVAL:
            return
        self.push_screen(ApproveDialog(view, self._act, now=self.clock()), self._written)

    def action_reconcile(self) -> None:
        view = self.selected
        if self.read_only or view is None or view.indeterminate is None:
            return
        if view.status != RunStatus.INDETERMINATE:
            return
        dialog = ReconcileDialog(view, self._act, now=self.clock(), hints=self.hints)
        self.push_screen(dialog, self._written)

    def action_retry(self) -> None:
        view = self.selected
        if self.read_only or view is None or view.status != RunStatus.FAILED:
            return
        self._open_retry(view)

    @work(thread=True, exclusive=True, group="retry", exit_on_error=False)
    def _open_retry(self, view: RunView) -> None:
        # The failure count is a file read: off the event loop, then the dialog.
        store = self.tracker.store
        failures = failure_state(store, view) if store is not None else None
        self.call_from_thread(self._show_retry, view, failures)

    def _show_retry(self, view: RunView, failures: Failures | None) -> None:
        if len(self.screen_stack) > 1:
            return  # another dialog came up meanwhile
        dialog = RetryDialog(view, self._retry, failures, now=self.clock())
        self.push_screen(dialog, self._written)

    def _retry(self, pin: Pin) -> str:
        """Called in the retry dialog's thread worker."""
        store = self.tracker.store
        assert store is not None
        return retry_failed(store, pin)

    def action_unavailable(self, action: str) -> None:
        """Say why a key did nothing: the selected run does not offer that action."""
        view = self.selected
        if view is None:
            self.notify("No run is selected.", markup=False)
            return
        offer = {
            RunStatus.AWAITING_APPROVAL: " (a approves or denies its calls)",
            RunStatus.INDETERMINATE: " (r reconciles its open write)",
            RunStatus.FAILED: " (R retries it)",
        }.get(view.status, "")
        word = LOOKS[view.status].word
        self.notify(f"{view.run_id} has nothing to {action}: it is {word}{offer}.", markup=False)

    def _act(self, pin: Pin, decision: Decision) -> str:
        """Called in a dialog's thread worker: the only place the TUI writes."""
        store = self.tracker.store
        assert store is not None
        return write_decision(store, pin, decision)

    def _written(self, done: str | None) -> None:
        # The table changes when the watcher sees the record, not here.
        if done:
            self.notify(done, title="written", markup=False)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette offers the same actions as the keys."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Next run needing a human", "Jump (n)", self.action_next_human)
        yield SystemCommand("Filter runs", "By run id or status (/)", self.action_filter)
        yield SystemCommand("Help", "Keys and statuses (?)", self.action_help)
        if self.offers("approve"):
            yield SystemCommand(
                "Approve or deny", "The run's pending calls (a)", self.action_approve
            )
        if self.offers("reconcile"):
            yield SystemCommand(
                "Reconcile", "The run's indeterminate write (r)", self.action_reconcile
            )
        if self.offers("retry"):
            yield SystemCommand("Retry", "The failed run, as agentrun retry (R)", self.action_retry)

    def action_quit(self) -> None:  # type: ignore[override]
        self.exit(0)

    def action_quit_now(self) -> None:
        """ctrl+c quits from anywhere, a dialog included; with text selected it copies, as
        Textual's ctrl+c would, so selecting a marker and copying it never quits."""
        focused = self.focused
        selected = focused.selected_text if isinstance(focused, Input) else None
        selected = selected or self.screen.get_selected_text()
        if selected:
            self.copy_to_clipboard(selected)
            return
        self.exit(0)


# The status a run must have for each action to apply to it.
_WANTS = {
    "approve": RunStatus.AWAITING_APPROVAL,
    "reconcile": RunStatus.INDETERMINATE,
    "retry": RunStatus.FAILED,
}
_MAIN_ACTIONS = frozenset(
    {
        "help",
        "filter",
        "next_human",
        "approve",
        "reconcile",
        "retry",
        "unavailable",
        "clear_filter",
        "quit",
    }
)
