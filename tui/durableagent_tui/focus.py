"""Focus that moves before the next key is handled.

Textual's ``Widget.focus()`` moves the focus later (``call_later``), so keys already queued,
as they are when someone types fast or pastes, still go to the widget that had it. When a key
sends the next keys somewhere else (``/`` to the filter, ``d`` to the deny reason), they must
not reach the old widget's bindings: the first letter of a reason, ``y``, would approve.
"""

from __future__ import annotations

from textual.widget import Widget


def focus_now(widget: Widget) -> None:
    """Give ``widget`` the focus before the next queued key is handled."""
    widget.screen.set_focus(widget)
