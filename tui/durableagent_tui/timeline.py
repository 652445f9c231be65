"""The timeline of one run: a row per record, new records appended as they arrive."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from durableagent import Record, RunStatus, RunView

from .styles import clock
from .summaries import summary, waiting_text

# Fixed widths (None: as wide as the content) keep the columns still while records stream
# in, instead of jumping each time a longer step name arrives.
COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("mark", " ", 1),
    ("seq", "seq", 5),
    ("time", "time", 8),
    ("type", "type", 9),
    ("step", "step", 24),
    ("summary", "summary", None),
)
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


class Timeline(DataTable[Text]):
    """Records of the selected run. Re-showing the same run only appends new records and
    re-marks the ones whose state moved."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", **kwargs)  # type: ignore[arg-type]
        self.run_id: str | None = None
        self.view: RunView | None = None
        self._marks: dict[str, tuple[Text, Text]] = {}
        self._resumed_at: int | None = None

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    def _banner(self, glyph: str, word: str, style: str, summary: Text, *, key: str) -> None:
        """A row that is not a record (the corrupt notice, the resumed divider)."""
        empty = Text("")
        self.add_row(
            Text(glyph, style=style), empty, empty, Text(word, style=style), empty, summary, key=key
        )

    def record_at_cursor(self) -> Record | None:
        """The record under the cursor (None on a divider or an empty timeline)."""
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
            return
        same = view.run_id == self.run_id
        at_end = not same or self.cursor_row >= self.row_count - 1
        if not same or self._resumed_at != resumed_at:
            self.clear()
            self._marks.clear()
        self.run_id, self.view, self._resumed_at = view.run_id, view, resumed_at
        if view.status == RunStatus.CORRUPT:
            self.clear()
            self._marks.clear()
            self._banner(
                "⊘",
                "corrupt",
                "bold magenta",
                Text(f"journal does not load: {waiting_text(view)}"),
                key=CORRUPT,
            )
            return
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
                self.add_row(
                    mark,
                    Text(str(record.seq), justify="right"),
                    Text(clock(record.at), style="dim"),
                    Text(*TYPE_WORDS.get(record.type, (record.type, ""))),
                    Text(record.step),
                    text,
                    key=key,
                )
            elif old != (mark, text):
                self.update_cell(key, "mark", mark)
                self.update_cell(key, "summary", text)
            self._marks[key] = (mark, text)
        if at_end and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)
