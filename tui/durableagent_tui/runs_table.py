"""The runs table: one row per run, attention first, updated by keyed diff."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from durableagent import RunView
from durableagent.labels import ago

from .row_keys import ROW_KEYS
from .styles import LOOKS, RANK, status_text
from .summaries import one_line, waiting_text

COLUMNS = (
    ("status", "status"),
    ("run", "run"),
    ("steps", "steps"),
    ("llm", "llm"),
    ("last", "last activity"),
    ("waiting", "waiting on"),
)

Row = tuple[Text, Text, Text, Text, Text, Text]

# Wide enough for every status word from the start: a run that turns indeterminate while the
# screen is open must not show "✖ indeterm".
STATUS_WIDTH = max(status_text(s).cell_len for s in LOOKS)


def sort_key(view: RunView) -> tuple[int, float, str]:
    """Attention first (by status group), newest activity first within a group."""
    return (RANK[view.status], -(view.last_activity or 0.0), view.run_id)


def row_for(view: RunView, now: float) -> Row:
    """The cells of a run's row; journal text goes in as plain Text, never markup."""
    return (
        status_text(view.status),
        Text(view.run_id, style="bold"),
        Text(str(len(view.steps)), justify="right"),
        Text(str(view.model_calls), justify="right"),
        Text(ago(view.last_activity, now), style="dim"),
        Text(one_line(waiting_text(view), 72)),
    )


class RunsTable(DataTable[Text]):
    """Runs by status group. ``sync`` adds, updates and removes rows by run id; it never
    rebuilds the table. A cell that grows widens its column (a table sizes its columns by
    the rows it was given, not by later updates)."""

    BINDINGS: ClassVar[list[BindingType]] = ROW_KEYS

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._rows: dict[str, Row] = {}
        self._keys: dict[str, tuple[int, float, str]] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key, width=STATUS_WIDTH if key == "status" else None)

    @property
    def selected_run(self) -> str | None:
        """The run under the cursor."""
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        except Exception:  # the cursor can sit past the end while rows are removed
            return None
        return key.value

    def shown(self) -> list[str]:
        """The run ids in table order."""
        return [str(r.key.value) for r in self.ordered_rows]

    def sync(self, show: Iterable[RunView], hide: Iterable[str], now: float) -> bool:
        """Show these views and drop these runs. Returns True when anything changed."""
        changed = False
        resort = False
        for rid in hide:
            if rid in self._rows:
                del self._rows[rid]
                del self._keys[rid]
                self.remove_row(rid)
                changed = True
        for view in show:
            rid = view.run_id
            row = row_for(view, now)
            key = sort_key(view)
            old = self._rows.get(rid)
            if old is None:
                self.add_row(*row, key=rid)
                self._keys[rid] = key
                resort = True
            else:
                if old == row and self._keys[rid] == key:
                    continue
                for (col, _), new_cell, old_cell in zip(COLUMNS, row, old, strict=True):
                    if new_cell != old_cell:
                        self._update(rid, col, new_cell)
                if self._keys[rid] != key:
                    self._keys[rid] = key
                    resort = resort or not self._in_place(rid, key)
            self._rows[rid] = row
            changed = True
        if resort:
            self._resort()
        return changed

    def retime(self, views: dict[str, RunView], now: float) -> None:
        """Refresh the relative times, touching only cells whose text moved."""
        for rid, old in self._rows.items():
            view = views.get(rid)
            if view is None:
                continue
            cell = Text(ago(view.last_activity, now), style="dim")
            if cell != old[4]:
                self._update(rid, "last", cell)
                self._rows[rid] = (*old[:4], cell, old[5])

    def _update(self, rid: str, col: str, cell: Text) -> None:
        """Update a cell; widen its column only when the cell no longer fits. (Asking the table
        to re-measure on every update would measure the whole column when a cell shrinks.)"""
        column = self.columns[ColumnKey(col)]
        grow = column.auto_width and cell.cell_len > column.content_width
        if grow:
            # Widen first: the table caches drawn lines by its update count, not by column
            # widths, so a width set after the update (update_width alone does it when idle)
            # can leave the row drawn at the old width until something else changes.
            column.content_width = cell.cell_len
        self.update_cell(rid, col, cell, update_width=grow)

    def _in_place(self, rid: str, key: tuple[int, float, str]) -> bool:
        """True when the row still sorts between its neighbours: no need to sort 10,000 rows
        because the newest run got newer."""
        index = self.get_row_index(rid)
        for neighbour, want in ((index - 1, False), (index + 1, True)):
            if 0 <= neighbour < self.row_count:
                other = self.coordinate_to_cell_key(Coordinate(neighbour, 0)).row_key.value
                if other is not None and (self._keys[other] > key) != want:
                    return False
        return True

    def _resort(self) -> None:
        selected = self.selected_run
        keys = self._keys
        self.sort("run", key=lambda cell: keys[cell.plain])
        if selected is not None and selected in keys:
            self.move_cursor(row=self.get_row_index(selected), animate=False)
