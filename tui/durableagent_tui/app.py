"""The supervisor app: header, runs table, timeline and record detail over a live store.

Its parts live beside it: live.py keeps the runs as the store is (load, change feed, probes,
workers), filter_box.py the ``/`` filter, acting.py and marked.py the actions."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from durableagent import NEEDS_HUMAN, RunStatus, RunView, StoreUnavailableError, Summary
from durableagent.control import budget_text
from durableagent.stores import Store

from .acting import control_offered
from .closing import SHUTTING_DOWN
from .detail import RecordDetail
from .dialogs import HelpScreen
from .filter_box import FilterBox
from .focus import focus_now
from .header import StoreHeader
from .live import RESCAN_S, LiveUpdates
from .marked import MarkedActions
from .runs_model import RunRows
from .runs_table import RunsTable
from .timeline import Timeline
from .tracker import Changes, Followed, StoreTracker
from .workers import Crew


def timeline_title(view: RunView | None, forks: tuple[str, ...]) -> Text:
    """The timeline's title: where the run came from and its forks, both directions, and a
    budgeted run's spend against its limits (plain text: a step holds a tool's name, never
    read as markup)."""
    title = "timeline"
    if view is not None and view.forked_from is not None:
        title += f" · fork of {view.forked_from.run} at {view.forked_from.step}"
    if forks:
        title += f" · forks: {', '.join(forks)}"
    if view is not None and view.controls.budget.limited:
        title += f" · {budget_text(view.controls)}"
    return Text(title)


def store_label(store: Store) -> str:
    """How the header names a store."""
    return str(getattr(store, "description", store))


class SupervisorApp(LiveUpdates, FilterBox, MarkedActions):
    """``agentrun tui``: watch a store's runs and unblock the ones that need a human."""

    CSS_PATH = "app.tcss"
    TITLE = "agentrun"
    # An action the selected run does not offer is greyed out in the footer; its key then
    # falls through to the hidden "unavailable" binding, which says why instead of nothing.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", id="help"),
        # A priority binding runs as the key arrives, before the next is passed on: what is
        # typed right after / lands in the filter, never on the runs table's keys.
        Binding("slash", "filter", "Filter", priority=True, id="filter"),
        Binding("n", "next_human", "Next", id="next_human"),
        Binding("a", "approve", "Approve", id="approve"),
        Binding("a", "change", "Decide change", show=False, id="change"),
        Binding("a", "unavailable('approve')", show=False, id="approve.unavailable"),
        Binding("r", "reconcile", "Reconcile", id="reconcile"),
        Binding("r", "unavailable('reconcile')", show=False, id="reconcile.unavailable"),
        Binding("R", "retry", "Retry", id="retry"),
        Binding("R", "unavailable('retry')", show=False, id="retry.unavailable"),
        Binding("c", "cancel", "Cancel", id="cancel"),
        Binding("c", "unavailable('cancel')", show=False, id="cancel.unavailable"),
        Binding("P", "pause", "Pause", id="pause"),
        Binding("P", "resume", "Resume", id="resume"),
        Binding("P", "unavailable('pause or resume')", show=False, id="pause.unavailable"),
        Binding("B", "budget", "Budget", id="budget"),
        Binding("B", "unavailable('budget')", show=False, id="budget.unavailable"),
        Binding("d", "deny_marked", "Deny marked", show=False, id="deny_marked"),
        Binding("p", "plan", "Plan", id="plan"),
        Binding("f", "fork", "Fork", id="fork"),
        Binding("w", "workers", "Workers", show=False, id="workers"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="clear_filter"),
        Binding("enter", "filter_done", "Done", priority=True, id="filter_done"),
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
        self.rows = RunRows(clock)  # every run's summary, sorted; the table draws from it
        self.followed: Followed | None = None  # the selected run, whole
        self._following: str | None = None  # the run whose records are being read
        self.filter_text = ""
        self.loaded = False
        self.load_seconds = 0.0
        self.rescan_s = RESCAN_S
        self._last_jump: str | None = None
        self._jump_to: str | None = None  # a run to select once the table has it (a fork)
        self.crew: Crew | None = None  # the store's workers as last read (live apps only)

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield StoreHeader(self.label, id="header")
        with Vertical(id="runs-pane"):
            yield Input(
                placeholder="filter: words of a run id or status, or status:failed age>1h … "
                "· esc clears",
                id="filter",
            )
            yield Static(id="filter-error")
            yield RunsTable(self.rows, self.clock, id="runs")
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
        self.query_one("#filter-error").display = False
        focus_now(self.query_one("#runs", RunsTable))
        self._update_empty()
        self._ticking = self.set_interval(1.0, self.header.tick)  # the loading seconds
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

    # -- what the live updates found (live.py) -----------------------------------------------

    @property
    def summaries(self) -> dict[str, Summary]:
        """Every run's summary, as the table shows them."""
        return self.rows.summaries

    def apply(self, changes: Changes, *, initial: bool = False) -> None:
        """Fold a refresh into the screen: keyed model diff, counts, the followed run."""
        if not changes and not initial:
            return
        self.rows.update(changes.summaries.values(), changes.removed)
        try:
            self._show_changes(changes, initial)
        except SHUTTING_DOWN:  # a refresh that lands while the app shuts down: nothing to draw
            return
        for rid, attempt in changes.lost.items():
            self.notify(
                f"{rid}: attempt {attempt.number} ({attempt.owner or 'a worker'}) was lost: its "
                "worker stopped without saying (killed?). The next attempt replays its steps.",
                title="worker lost",
                severity="warning",
                markup=False,
            )
        self.refresh_bindings()

    def _jump(self) -> None:
        """Select the run a fork made, once the table has it. The watcher can show the new
        run before the fork returns (its first record lands first) or after, so both the
        refresh and the fork's end try."""
        if self._jump_to is None or self._jump_to not in self.rows.summaries:
            return
        row = self.rows.index(self._jump_to)  # None when the filter hides it
        if row is not None:
            self.table.move_cursor(row=row, animate=False)
        self._jump_to = None

    def _show_changes(self, changes: Changes, initial: bool) -> None:
        table = self.table
        with self.batch_update():
            table.rows_changed()
            if initial and table.row_count:
                table.move_cursor(row=0, animate=False)
            self._jump()
            self.header.set_counts(self.rows.counts)
            if self.crew is not None:
                self.header.set_workers(self.crew, self.rows.counts.get(RunStatus.READY, 0))
            if changes and not initial:
                self.header.set_live(self.header.live, time.time())
            self._update_empty()
            selected = table.selected_run
            followed = self.followed.run_id if self.followed is not None else None
            if initial or selected in changes.summaries:
                self._select(selected, again=True)
            elif selected != followed:
                self._select(selected)
            elif followed is not None and any(
                s.forked_from is not None and s.forked_from.run == followed
                for s in changes.summaries.values()
            ):
                self._show_detail()  # a new fork of the run shown: its "forks:" line

    # -- selection ---------------------------------------------------------------------------

    @property
    def selected(self) -> Summary | None:
        """The summary of the run under the table cursor."""
        try:
            rid = self.table.selected_run
        except SHUTTING_DOWN:  # asked while the app shuts down
            return None
        return self.rows.summaries.get(rid) if rid is not None else None

    @property
    def selected_view(self) -> RunView | None:
        """The selected run whole, once the timeline has read it."""
        selected, followed = self.selected, self.followed
        if selected is None or followed is None or followed.run_id != selected.run_id:
            return None
        return followed.view

    def _select(self, rid: str | None, *, again: bool = False) -> None:
        """Follow ``rid``: read its records off the loop, then show its timeline. A read of
        that run already under way does (unless it changed since: ``again``)."""
        if rid is None:
            self.followed = self._following = None
            self.timeline.show(None)
            self._show_detail()
            return
        if rid == self._following and not again:
            return
        self._following = rid
        self._follow(rid)

    @work(thread=True, exclusive=True, group="follow", exit_on_error=False)
    def _follow(self, rid: str) -> None:
        try:
            followed = self.tracker.follow(rid)
        except StoreUnavailableError:
            self.call_from_thread(self._follow_failed, rid)
            raise  # on_worker_state_changed says so in the header
        self.call_from_thread(self._followed, rid, followed)

    def _follow_failed(self, rid: str) -> None:
        """The timeline stays as last seen; selecting the run again reads it again."""
        if self._following == rid:
            self._following = None

    def _followed(self, rid: str, followed: Followed | None) -> None:
        with suppress(*SHUTTING_DOWN):  # shutting down
            if self.table.selected_run != rid:
                return  # the cursor moved on meanwhile; its own read is on its way
            self._following = None
            self.followed = followed
            if followed is None:
                self.timeline.show(None)
            else:
                self.timeline.show(followed.view, followed.attempts)
            self._show_detail()
            self.refresh_bindings()

    def _show_detail(self) -> None:
        try:
            detail = self.query_one("#detail", RecordDetail)
        except SHUTTING_DOWN:  # a highlight message handled while the app shuts down
            return
        record = self.timeline.record_at_cursor()
        view = self.timeline.view
        forks = self.tracker.forks(view.run_id) if view is not None else ()
        self.timeline.border_title = timeline_title(view, forks)
        if record is not None:
            detail.show(record, view=view, forks=forks)
        else:
            detail.show(view, self.timeline.attempt_at_cursor(), forks=forks)

    @on(RunsTable.Highlighted, "#runs")
    def _run_highlighted(self, event: RunsTable.Highlighted) -> None:
        with suppress(*SHUTTING_DOWN):  # a late highlight while the app shuts down
            followed = self.followed.run_id if self.followed is not None else None
            if event.run_id != followed or event.run_id is None:
                self._select(event.run_id)
            self.refresh_bindings()

    @on(RunsTable.Selected, "#runs")
    def _run_selected(self) -> None:
        focus_now(self.timeline)

    @on(Timeline.Back)
    def _timeline_back(self) -> None:
        focus_now(self.table)

    @on(RecordDetail.Back)
    def _detail_back(self) -> None:
        focus_now(self.timeline)

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

    # -- actions -----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide writes when read-only; grey out the ones the selected run does not offer."""
        if len(self.screen_stack) > 1 and action in _MAIN_ACTIONS:
            return False  # a dialog is up: its keys, not the main screen's
        if action == "filter" and isinstance(self.focused, Input):
            return False  # typing in the filter: / is a character
        if action == "filter_done":
            focused = self.focused
            return isinstance(focused, Input) and focused.id == "filter"
        return self.offers(action)

    def offers(self, action: str) -> bool | None:
        """Whether the main screen offers ``action`` now: False hidden, None greyed out."""
        if action in _WANTS:
            if self.read_only:
                return False
            if self.rows.marked and action in ("approve", "retry"):
                return True  # on the marked runs
            view = self.selected
            if view is None:
                return None
            return True if view.status == _WANTS[action] else None
        if action in ("cancel", "pause", "resume", "budget"):
            if self.read_only:
                return False
            if action != "budget" and self.rows.marked:
                return True  # on the marked rows: each run is checked on its own
            return control_offered(action, self.selected)
        if action == "deny_marked":
            return not self.read_only
        if action == "unavailable":
            return not self.read_only
        if action == "next_human":
            return True if any(s in NEEDS_HUMAN for s in self.rows.counts) else None
        if action == "plan":
            return True if self.selected is not None else None
        if action == "fork":
            if self.read_only:
                return False
            return True if self.selected is not None else None
        return True

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.read_only))

    def action_next_human(self) -> None:
        """Jump to the first run that needs a human, in the order the table shows; again for
        the next one down (round to the top after the last)."""
        ids = self.rows.needing_human()
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
        focus_now(self.table)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette offers the same actions as the keys."""
        yield from super().get_system_commands(screen)
        yield SystemCommand("Next run needing a human", "Jump (n)", self.action_next_human)
        yield SystemCommand("Filter runs", "By run id or status (/)", self.action_filter)
        yield SystemCommand("Help", "Keys and statuses (?)", self.action_help)
        yield SystemCommand(
            "Workers", "Who is working on the store, live or gone (w)", self.action_workers
        )
        if self.offers("plan"):
            yield SystemCommand(
                "Recovery plan", "What the run's next attempt will do (p)", self.action_plan
            )
        if self.offers("fork"):
            yield SystemCommand(
                "Fork from a step", "The step under the timeline's cursor (f)", self.action_fork
            )
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
    "change": RunStatus.INCOMPATIBLE,
}
_MAIN_ACTIONS = frozenset(
    {
        "help",
        "filter",
        "next_human",
        "approve",
        "reconcile",
        "retry",
        "cancel",
        "pause",
        "resume",
        "budget",
        "deny_marked",
        "plan",
        "fork",
        "unavailable",
        "clear_filter",
        "filter_done",
        "quit",
    }
)
