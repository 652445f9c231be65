"""The keys terminal users reach for in any list of rows: j/k, g/G, home/end. Shared by the
runs table and the timeline, with ids so a keymap can move them."""

from __future__ import annotations

from textual.binding import Binding, BindingType

ROW_KEYS: list[BindingType] = [
    Binding("j", "cursor_down", "Down", show=False, id="rows.down"),
    Binding("k", "cursor_up", "Up", show=False, id="rows.up"),
    Binding("g,home", "scroll_top", "First row", show=False, id="rows.first"),
    Binding("G,end", "scroll_bottom", "Last row", show=False, id="rows.last"),
]
