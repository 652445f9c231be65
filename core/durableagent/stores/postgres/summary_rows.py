"""A row of the ``summaries`` table as a Summary: what ``agentrun ls`` and the TUI read of a
PostgreSQL store, 100,000 rows at a time (built as bare tuples: no per-field defaults)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ...fold import RunStatus, Summary, held_note
from ...gate import Pending
from ...lineage import ForkedFrom

_STATUS = {str(s): s for s in RunStatus}
_SETTLED = (RunStatus.COMPLETED, RunStatus.CORRUPT)


_new = tuple.__new__  # a listing turns 100,000 rows into summaries: no per-field defaults


def summary_from(row: Sequence[Any]) -> Summary | None:
    """A ``summaries`` row as a Summary; None when the run's summary is missing. The stored
    status is as if the lease were free: a held lease makes it running (as file_logs'
    summary_of does for the FileStore's index)."""
    (run_id, status, steps, calls, started, last, last_seq, waiting, error, answer, pending,
     indeterminate, signals, forked, controls, held) = row  # fmt: skip
    if status is None:
        return None
    status = _STATUS[status]
    origin = ForkedFrom.from_dict(json.loads(forked)) if forked else None
    controls = controls or ""
    fields: tuple[Any, ...]
    if held and status not in _SETTLED:
        note = held_note(status, waiting)
        fields = (run_id, RunStatus.RUNNING, steps, calls, started, last, last_seq, note, "",
                  answer, True, (), None, signals, origin, controls)  # fmt: skip
    else:
        waiting_calls = tuple(Pending.from_dict(p) for p in json.loads(pending)) if pending else ()
        fields = (run_id, status, steps, calls, started, last, last_seq, waiting, error, answer,
                  bool(held), waiting_calls, indeterminate, signals, origin,
                  controls)  # fmt: skip
    summary: Summary = _new(Summary, fields)
    return summary
