"""The runs table: one row per run, attention first, drawn only where it is on screen.

A Line API widget over a ``RunRows``: it renders the header and the rows in view, never a
widget or a cell object per run, so 100,000 runs cost what 30 do. Changes arrive as keyed
diffs of the model; the cursor stays on its run while rows move around it. Columns follow
their content: the run column is as wide as the longest id seen, the waiting-on column takes
the width that is left.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from durableagent import RunStatus, Summary
from durableagent.labels import ago

from .row_keys import ROW_KEYS
from .runs_model import RunRows
from .styles import LOOKS, status_text
from .summaries import one_line
from .workers import WARNING, Crew, waiting_note

COLUMNS = (
    ("status", "status"),
    ("run", "run"),
    ("steps", "steps"),
    ("llm", "llm"),
    ("last", "last"),
    ("waiting", "waiting on"),
)
RIGHT = frozenset({"steps", "llm"})
SPARE = frozenset({"steps", "llm"})  # dropped when the waiting-on text would be cut short
PADDING = 1  # cells each side of a cell, as Textual's DataTable pads them
# Wide enough for every status word from the start: a run that turns indeterminate while the
# screen is open must not show "✖ indeterm".
STATUS_WIDTH = max(status_text(s).cell_len for s in LOOKS)
LAST_WIDTH = len("59m ago")
MIN_WAITING = 34  # "reconcile tool/2/0/create_ticket" whole, before steps and llm go
# A marked run's row (space) shows this in the cell of padding before its status: a glyph,
# never colour alone, and no column moves for it.
MARK = "*"

Row = tuple[Text, Text, Text, Text, Text, Text]
_CORRUPT_AT = re.compile(r"is corrupt at (line \d+: .*?); the file was left")


def waiting_text(s: Summary) -> str:
    """What the run waits on; a corrupt journal as ``line N: reason`` (the short form)."""
    if s.status == RunStatus.CORRUPT:
        m = _CORRUPT_AT.search(s.waiting_on)
        return m.group(1) if m else s.waiting_on
    return s.waiting_on


def row_for(s: Summary, now: float) -> Row:
    """The cells of a run's row; journal text goes in as plain Text, never markup."""
    return (
        status_text(s.status),
        Text(s.run_id, style="bold"),
        Text(str(s.steps), justify="right"),
        Text(str(s.model_calls), justify="right"),
        Text(ago(s.last_activity, now), style="dim"),
        Text(one_line(waiting_text(s), 400)),
    )


class RunsTable(ScrollView, can_focus=True):
    """The runs of a ``RunRows`` (the app's), in its order. ``rows_changed`` after the model
    moved; the cursor follows its run. Posts ``Highlighted`` when the run under the cursor
    changes and ``Selected`` on enter (or a click on the highlighted row)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *ROW_KEYS,
        Binding("down", "cursor_down", "Down", show=False, id="runs.down"),
        Binding("up", "cursor_up", "Up", show=False, id="runs.up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="runs.page_down"),
        Binding("pageup", "page_up", "Page up", show=False, id="runs.page_up"),
        Binding("enter", "select", "Open", show=False, id="runs.open"),
        Binding("space", "toggle_mark", "Mark", show=False, id="runs.mark"),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"runs-table--header", "runs-table--cursor"}
    DEFAULT_CSS = """
    RunsTable {
        overflow-x: hidden;
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .runs-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .runs-table--header { background-tint: $foreground 5%; }
        }
        & > .runs-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .runs-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    class Highlighted(Message):
        """The cursor is on another run (None: the table is empty)."""

        def __init__(self, table: RunsTable, run_id: str | None) -> None:
            super().__init__()
            self.table = table
            self.run_id = run_id

        @property
        def control(self) -> RunsTable:
            return self.table

    class Selected(Message):
        """The human opened the run under the cursor (enter, or a click on it)."""

        def __init__(self, table: RunsTable, run_id: str) -> None:
            super().__init__()
            self.table = table
            self.run_id = run_id

        @property
        def control(self) -> RunsTable:
            return self.table

    class Marked(Message):
        """The marks changed; ``count`` runs are marked now."""

        def __init__(self, table: RunsTable, count: int) -> None:
            super().__init__()
            self.table = table
            self.count = count

        @property
        def control(self) -> RunsTable:
            return self.table

    def __init__(self, rows: RunRows, clock: Callable[[], float], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.model = rows
        self.clock = clock
        self.cursor_row = 0
        self._selected: str | None = None  # the run the cursor is on
        # The run last put under the cursor on purpose (a key, a click, a jump): a filter
        # that hid it moved the cursor, and one that shows it again (esc clears it) puts the
        # cursor back, so that the next key acts on the run the human chose.
        self._chosen: str | None = None
        self._widths = self.widths(80)
        self._last_width = 0
        self._now = clock()
        self.crew: Crew | None = None  # the store's workers (a ready run says none is live)

    # -- what tests and the app ask ------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.model.shown)

    @property
    def selected_run(self) -> str | None:
        """The run under the cursor."""
        return self._selected

    def shown(self) -> list[str]:
        """The run ids in table order."""
        return list(self.model.shown)

    def get_row_index(self, run_id: str) -> int:
        """The row of ``run_id`` (KeyError when it is not shown)."""
        index = self.model.index(run_id)
        if index is None:
            raise KeyError(run_id)
        return index

    def get_row(self, run_id: str) -> Row:
        """The cells of ``run_id``'s row as drawn now."""
        return row_for(self.model.summaries[run_id], self.clock())

    # -- the model moved -------------------------------------------------------------------------

    def rows_changed(self, *, top_if_gone: bool = False) -> None:
        """The model's rows changed: keep the cursor on its run if it is still shown, else on
        the row where it was (``top_if_gone``: the filter changed: on the run last chosen if
        it shows, else on the cursor's run, else on the first row), resize, repaint what is on
        screen."""
        index = self.model.index(self._chosen) if top_if_gone and self._chosen else None
        if index is None:
            index = self.model.index(self._selected)
        if index is None:
            index = 0 if top_if_gone else min(self.cursor_row, max(0, self.row_count - 1))
        self._place(index, scroll=index != self.cursor_row)
        self._resize()
        self.refresh()

    def _resize(self) -> None:
        self.virtual_size = Size(self._width(), self.row_count + 1)  # + the header

    def on_resize(self, _event: events.Resize) -> None:
        self._resize()

    def watch_show_vertical_scrollbar(self, show: bool) -> None:
        # Textual moves the thumb only while the bar is shown (see Timeline).
        if show:
            self.vertical_scrollbar.position = self.scroll_y

    # -- the cursor --------------------------------------------------------------------------

    def move_cursor(self, *, row: int, animate: bool = False) -> None:
        """Put the cursor on ``row`` (clamped) and scroll it into view."""
        del animate  # rows jump; nothing to animate
        self._place(max(0, min(row, self.row_count - 1)), scroll=True)
        self._chosen = self._selected
        self.refresh()

    def choose_selected(self) -> None:
        """The run under the cursor is the one chosen now (enter in the filter accepts the
        run the filter put the cursor on)."""
        self._chosen = self._selected

    def _place(self, index: int, *, scroll: bool) -> None:
        shown = self.model.shown
        self.cursor_row = index
        run = shown[index] if 0 <= index < len(shown) else None
        if scroll:
            self._scroll_to_cursor()
        if run != self._selected:
            self._selected = run
            self.post_message(self.Highlighted(self, run))

    def _scroll_to_cursor(self) -> None:
        height = self.scrollable_content_region.height - 1  # rows below the header
        if height <= 0:
            return
        top = int(self.scroll_y)
        if self.cursor_row < top:
            top = self.cursor_row
        elif self.cursor_row >= top + height:
            top = self.cursor_row - height + 1
        if top != int(self.scroll_y):
            self.scroll_to(y=top, animate=False, force=True, immediate=True)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self.cursor_row + 1)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self.cursor_row - 1)

    def action_page_down(self) -> None:
        self.move_cursor(row=self.cursor_row + max(1, self.scrollable_content_region.height - 1))

    def action_page_up(self) -> None:
        self.move_cursor(row=self.cursor_row - max(1, self.scrollable_content_region.height - 1))

    def action_scroll_top(self) -> None:
        self.move_cursor(row=0)

    def action_scroll_bottom(self) -> None:
        self.move_cursor(row=self.row_count - 1)

    def action_select(self) -> None:
        if self._selected is not None:
            self.post_message(self.Selected(self, self._selected))

    def action_toggle_mark(self) -> None:
        """Mark the run under the cursor for an action on every marked run, or unmark it;
        the cursor goes on to the next row (space, space, space marks a run of rows)."""
        if self._selected is None:
            return
        self.model.toggle_mark(self._selected)
        self.post_message(self.Marked(self, len(self.model.marked)))
        self.move_cursor(row=self.cursor_row + 1)

    def on_click(self, event: events.Click) -> None:
        row = event.y - 1 + int(self.scroll_y)
        if event.y < 1 or not 0 <= row < self.row_count:
            return
        if row == self.cursor_row:
            self.action_select()
        else:
            self.move_cursor(row=row)
        event.stop()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # -- drawing -----------------------------------------------------------------------------

    def widths(self, width: int) -> dict[str, int]:
        """The columns shown in a table ``width`` cells wide and their content widths: the
        waiting-on text takes what is left; steps and llm give way when it would be short."""
        model = self.model
        fixed = {
            "status": STATUS_WIDTH,
            "run": max(3, model.id_width),
            "steps": max(len("steps"), model.steps_width),
            "llm": max(len("llm"), model.llm_width),
            "last": LAST_WIDTH,
        }

        def rest(columns: dict[str, int]) -> int:
            return width - sum(columns.values()) - 2 * PADDING * (len(columns) + 1)

        if rest(fixed) < MIN_WAITING:
            fixed = {k: w for k, w in fixed.items() if k not in SPARE}
        return {**fixed, "waiting": max(1, rest(fixed))}

    def render_lines(self, crop: Region) -> list[Strip]:
        self._widths = self.widths(self._width())  # once per paint, not per line
        self._now = self.clock()
        return super().render_lines(crop)

    def _width(self) -> int:
        """The width rows are drawn in: the widget's, less its scrollbar."""
        return self.scrollable_content_region.width

    def render_line(self, y: int) -> Strip:
        width = self._width()
        base = self.rich_style
        widths = self._widths
        if y == 0:
            header = self.get_component_rich_style("runs-table--header")
            cells = {key: Text(label) for key, label in COLUMNS}
            return self._strip(cells, widths, base + header, width)
        index = y - 1 + int(self.scroll_y)
        shown = self.model.shown
        if index >= len(shown):
            return Strip.blank(width, base)
        summary = self.model.summaries[shown[index]]
        style = base
        if index == self.cursor_row:
            style = base + self.get_component_rich_style("runs-table--cursor")
        row = row_for(summary, self._now)
        if summary.status == RunStatus.READY:
            note = waiting_note(self.crew, summary, self._now)
            if note is not None:
                row = (*row[:-1], Text(note, style=WARNING))
        cells = {key: cell for (key, _), cell in zip(COLUMNS, row, strict=True)}
        marked = summary.run_id in self.model.marked
        return self._strip(cells, widths, style, width, marked)

    def _strip(
        self,
        cells: dict[str, Text],
        widths: dict[str, int],
        style: Style,
        width: int,
        marked: bool = False,
    ) -> Strip:
        line = Text(no_wrap=True, end="")
        pad = " " * PADDING
        for i, (key, w) in enumerate(widths.items()):
            cell = cells[key].copy()
            cell.truncate(w, overflow="ellipsis")
            cell.align("right" if key in RIGHT else "left", w)
            if i == 0 and marked:
                line.append(MARK + pad[1:], style="bold")
            else:
                line.append(pad)
            line.append_text(cell)
            line.append(pad)
        line.stylize_before(style)
        segments = list(line.render(self.app.console))
        strip = Strip(segments, line.cell_len)
        return strip.crop_extend(0, width, style)
