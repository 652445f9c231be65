"""Where a run came from: the ``forked_from`` that a fork writes into its ``run.started``.

A fork's journal is written one append at a time (the Store protocol has no multi-record
write), so its ``run.started`` also says how many copied records follow it (``copied``). Until
they are all there the fork is *unfinished*: its status is ``corrupt`` (``running`` while the
forker holds its lease), ``run()`` and ``signal()`` refuse it, and running the same fork again
finishes it. Nothing can execute a fork with half its history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import hints
from .record import RUN_STARTED, Record


@dataclass(frozen=True, slots=True)
class ForkedFrom:
    """The origin of a fork: the run it was copied from, the step it runs afresh from, the
    last copied record's seq in that run, who forked it and why, and how many records were
    copied after its ``run.started``."""

    run: str
    seq: int
    step: str
    by: str | None = None
    reason: str | None = None
    copied: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "seq": self.seq,
            "step": self.step,
            "by": self.by,
            "reason": self.reason,
            "copied": self.copied,
        }

    @classmethod
    def from_dict(cls, d: Any) -> ForkedFrom | None:
        """The origin a ``forked_from`` object names; None when it is not one (hand-edited
        shapes read as no lineage rather than fail)."""
        if not isinstance(d, dict):
            return None
        run, seq, step = d.get("run"), d.get("seq"), d.get("step")
        if not isinstance(run, str) or type(seq) is not int or not isinstance(step, str):
            return None
        by, reason, copied = d.get("by"), d.get("reason"), d.get("copied")
        return cls(
            run=run,
            seq=seq,
            step=step,
            by=by if isinstance(by, str) else None,
            reason=reason if isinstance(reason, str) else None,
            copied=copied if type(copied) is int and copied >= 0 else 0,
        )

    def describe(self) -> str:
        """``forked from R at S (seq N) by WHO: REASON``."""
        text = f"forked from {self.run} at {self.step} (seq {self.seq})"
        if self.by:
            text += f" by {self.by}"
        if self.reason:
            text += f": {self.reason}"
        return text


def forked_from(record: Record) -> ForkedFrom | None:
    """The origin recorded in a ``run.started`` record, or None (not a fork)."""
    if record.type != RUN_STARTED or not isinstance(record.data, dict):
        return None
    return ForkedFrom.from_dict(record.data.get("forked_from"))


def unfinished(
    origin: ForkedFrom | None, first_seq: int, last_seq: int, run_id: str = ""
) -> str | None:
    """Why the fork ``run_id``, whose ``run.started`` has ``first_seq`` and whose journal ends
    at ``last_seq``, is not whole yet; None when it is (or is no fork)."""
    if origin is None or last_seq >= first_seq + origin.copied:
        return None
    return (
        f"an interrupted fork of {origin.run} at {origin.step} ({last_seq - first_seq} of "
        f"{origin.copied} records copied): run the same fork again to finish it "
        f"({hints.fork(origin.run, origin.step, run_id or 'NEW')})"
    )


def unfinished_fork(records: Sequence[Record], run_id: str = "") -> str | None:
    """Why a journal is an unfinished fork, or None."""
    if not records:
        return None
    return unfinished(forked_from(records[0]), records[0].seq, records[-1].seq, run_id)
