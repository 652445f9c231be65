"""What one attempt of a run ended with."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .gate import Pending
from .messages import Message


class Status(enum.StrEnum):
    """How an attempt of a run ended."""

    COMPLETED = "completed"
    AWAITING_APPROVAL = "awaiting_approval"
    INDETERMINATE = "indeterminate"
    FAILED = "failed"
    MOVED = "moved"  # a move signal stopped it: the run lives in another store now
    CANCELLED = "cancelled"  # a cancel signal stopped it
    PAUSED = "paused"  # a pause signal stopped it until a resume
    OVER_BUDGET = "over_budget"  # its next step would have broken a limit of its budget
    # A call it would run does not fit this version's code (a tool gone, arguments its new
    # schema rejects): it stopped before any step (issue 25, deploys.py)
    INCOMPATIBLE = "incompatible"


@dataclass(frozen=True)
class Outcome:
    """The result of one ``run()`` attempt. ``seq`` is the journal's last seq when it was made."""

    status: Status
    message: Message | None = None
    pending: tuple[Pending, ...] = field(default=())
    step: str = ""
    error: str = ""
    seq: int = 0
    # The code that ran the attempt (deploys.Code): its version label and fingerprint.
    version: str = ""
    fingerprint: dict[str, Any] | None = None
    # An incompatible attempt's calls (deploys.Blocker dicts): what a human decides on.
    blocked: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": str(self.status),
            "message": None if self.message is None else self.message.to_dict(),
            "pending": [p.to_dict() for p in self.pending],
            "step": self.step,
            "error": self.error,
            "seq": self.seq,
        }
        # Only when set: older outcomes and readers stay as they were.
        if self.version:
            d["version"] = self.version
        if self.fingerprint:
            d["fingerprint"] = self.fingerprint
        if self.blocked:
            d["blocked"] = list(self.blocked)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Outcome:
        msg = d.get("message")
        return cls(
            status=Status(d["status"]),
            message=None if msg is None else Message.from_dict(msg),
            pending=tuple(Pending.from_dict(p) for p in d.get("pending") or ()),
            step=str(d.get("step") or ""),
            error=str(d.get("error") or ""),
            seq=int(d.get("seq") or 0),
            version=str(d.get("version") or ""),
            fingerprint=d.get("fingerprint") if isinstance(d.get("fingerprint"), dict) else None,
            blocked=tuple(b for b in d.get("blocked") or () if isinstance(b, dict)),
        )
