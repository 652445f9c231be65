"""The timeline of one run: a row per record, new records appended as they arrive.

The columns follow the pane's width. The fixed columns keep still while records stream in,
and the summary takes the width that is left; when too little would be left, the columns a
narrow pane can spare go (the type word, then the clock time: the record pane shows both) and
the step joins its summary in one column. A cut summary ends in "…"; the record pane beside
it shows the record whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from durableagent import Record, RunStatus, RunView

from .row_keys import ROW_KEYS
from .styles import clock
from .summaries import one_line, summary, waiting_text

# Short words keep the summary on screen in a narrow terminal.
TYPE_WORDS = {
    "run.started": ("run start", "bold"),
    "step.started": ("start", ""),
    "step.completed": ("result", "green"),
    "signal": ("signal", "bold yellow"),
    "run.completed": ("run done", "bold green"),
}
RESUMED = "resumed"
CORRUPT = "corrupt"
FAILED = "failed"
# The last column takes what is left; below this many cells a layout gives way to the next.
MIN_SUMMARY = 40


@dataclass(frozen=True)
class Layout:
    """Columns as (key, label, width); the last one's width is whatever is left."""

    name: str
    columns: tuple[tuple[str, str, int], ...]

    @property
    def last(self) -> str:
        return self.columns[-1][0]

    def rest(self, width: int, padding: int) -> int:
        """The last column's width in a pane ``width`` cells wide."""
        fixed = sum(w for _, _, w in self.columns[:-1])
        return width - fixed - 2 * padding * len(self.columns)


LAYOUTS = (
    Layout(
        "wide",
        (
            ("mark", " ", 1),
            ("seq", "seq", 5),
            ("time", "time", 8),
            ("type", "type", 9),
            ("step", "step", 24),
            ("summary", "summary", 0),
        ),
    ),
    Layout(
        "compact",
        (("mark", " ", 1), ("seq", "seq", 5), ("time", "time", 8), ("what", "step · summary", 0)),
    ),
    Layout("narrow", (("mark", " ", 1), ("seq", "seq", 5), ("what", "step · summary", 0))),
)


def choose_layout(width: int, padding: int) -> tuple[Layout, int]:
    """The widest layout whose last column keeps at least MIN_SUMMARY cells."""
    for layout in LAYOUTS:
        rest = layout.rest(width, padding)
        if rest >= MIN_SUMMARY:
            return layout, rest
    layout = LAYOUTS[-1]
    return layout, max(1, layout.rest(width, padding))


def mark_for(record: Record, view: RunView) -> Text:
    """✓ for a step that has its result, ✖ for a write started without one, … for a read."""
    if record.type != "step.started":
        return Text(" ")
    step = next((s for s in view.steps if s.name == record.step), None)
    if step is not None and step.completed:
        return Text("✓", style="green")
    if view.status == RunStatus.RUNNING:
        return Text("…", style="cyan")
    if step is not None and step.write:
        return Text("✖", style="bold red")
    return Text("…", style="yellow")


def summary_for(record: Record, view: RunView) -> Text:
    """The record's one-line summary, with a started step's missing result called out."""
    text = Text(summary(record))
    if record.type == "step.started":
        step = next((s for s in view.steps if s.name == record.step), None)
        if step is not None and not step.completed and view.status != RunStatus.RUNNING:
            if step.write:
                text.append(" — no result: indeterminate", style="bold red")
            else:
                text.append(" — no result (re-run on resume)", style="yellow")
    return text


def _cut(text: Text) -> Text:
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


class Timeline(DataTable[Text]):
    """Records of the selected run. Re-showing the same run only appends new records and
    re-marks the ones whose state moved."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *ROW_KEYS,
        Binding("escape", "back", "Back to runs", show=False, id="timeline.back"),
    ]

    class Back(Message):
        """The human asked to go back to the runs table."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", **kwargs)  # type: ignore[arg-type]
        self.run_id: str | None = None
        self.view: RunView | None = None
        self._marks: dict[str, tuple[Text, Text]] = {}
        self._resumed_at: int | None = None
        self._failed_row = False
        self.columns_layout, self._rest = LAYOUTS[0], MIN_SUMMARY

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for key, label, width in self.columns_layout.columns:
            self.add_column(label, key=key, width=width or self._rest)

    def on_resize(self, _event: events.Resize) -> None:
        """Refit the columns to the new width (rebuilding one run's rows is cheap)."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return
        layout, rest = choose_layout(width, self.cell_padding)
        if (layout, rest) == (self.columns_layout, self._rest):
            return
        self.columns_layout, self._rest = layout, rest
        row = self.cursor_row
        view, resumed = self.view, self._resumed_at
        self.clear(columns=True)
        self._marks.clear()
        self._failed_row = False
        self._add_columns()
        if view is not None:
            self.run_id = None  # show it afresh
            self.show(view, resumed)
            self.move_cursor(row=min(row, max(0, self.row_count - 1)), animate=False)

    def action_back(self) -> None:
        self.post_message(self.Back())

    # -- rows --------------------------------------------------------------------------------

    def _add(self, cells: dict[str, Text], *, key: str) -> None:
        """Add a row, laid out for the current columns (step and summary may share one)."""
        if self.columns_layout.last == "what":
            step, text = cells.get("step"), cells["summary"]
            what = Text.assemble((step.plain, "bold"), "  ", text) if step and step.plain else text
            cells = {**cells, "what": what}
        empty = Text("")
        row = [cells.get(k, empty) for k, _, _ in self.columns_layout.columns]
        row[-1] = _cut(row[-1].copy())
        self.add_row(*row, key=key)

    def _banner(self, glyph: str, word: str, style: str, summary: Text, *, key: str) -> None:
        """A row that is not a record (the corrupt notice, the resumed divider, the failure)."""
        if self.columns_layout.last == "what":
            summary = Text.assemble((word, style), "  ", summary)
        self._add(
            {"mark": Text(glyph, style=style), "type": Text(word, style=style), "summary": summary},
            key=key,
        )

    def _summary_cell(self, record: Record, text: Text) -> Text:
        if self.columns_layout.last == "what" and record.step:
            text = Text.assemble((record.step, "bold"), "  ", text)
        return _cut(text.copy())

    def record_at_cursor(self) -> Record | None:
        """The record under the cursor (None on a banner row or an empty timeline)."""
        if self.view is None or not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None
        if key is None or not key.isdigit():
            return None
        seq = int(key)
        records = self.view.records
        return records[seq - 1] if 0 < seq <= len(records) else None

    def show(self, view: RunView | None, resumed_at: int | None = None) -> None:
        """Show ``view``; the same run again updates in place and follows the tail."""
        if view is None:
            self.run_id, self.view = None, None
            self.clear()
            self._marks.clear()
            self._failed_row = False
            return
        same = view.run_id == self.run_id
        at_end = not same or self.cursor_row >= self.row_count - 1
        if not same or self._resumed_at != resumed_at:
            self.clear()
            self._marks.clear()
            self._failed_row = False
        self.run_id, self.view, self._resumed_at = view.run_id, view, resumed_at
        if view.status == RunStatus.CORRUPT:
            self.clear()
            self._marks.clear()
            self._failed_row = False
            self._banner(
                "⊘",
                "corrupt",
                "bold magenta",
                Text(f"journal does not load: {waiting_text(view)}"),
                key=CORRUPT,
            )
            return
        if self._failed_row:  # it stays the last row: take it out while records are added
            self.remove_row(FAILED)
            self._failed_row = False
        last = self.columns_layout.last
        for record in view.records:
            key = str(record.seq)
            mark, text = mark_for(record, view), summary_for(record, view)
            old = self._marks.get(key)
            if old is None:
                if resumed_at is not None and record.seq == resumed_at + 1:
                    summary = f"records up to seq {resumed_at} are replayed, not re-run"
                    self._banner(
                        "↻", "resumed", "bold cyan", Text(summary, style="cyan"), key=RESUMED
                    )
                self._add(
                    {
                        "mark": mark,
                        "seq": Text(str(record.seq), justify="right"),
                        "time": Text(clock(record.at), style="dim"),
                        "type": Text(*TYPE_WORDS.get(record.type, (record.type, ""))),
                        "step": Text(record.step),
                        "summary": text,
                    },
                    key=key,
                )
            elif old != (mark, text):
                self.update_cell(key, "mark", mark)
                self.update_cell(key, last, self._summary_cell(record, text))
            self._marks[key] = (mark, text)
        if view.status == RunStatus.FAILED:
            # The failure is the end of the story so far; the record pane shows it whole.
            error = one_line(view.error or "the last attempt failed")
            self._banner("✗", "failed", "red", Text(f"{error} · R retries"), key=FAILED)
            self._failed_row = True
        if at_end and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)
