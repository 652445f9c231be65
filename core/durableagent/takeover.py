"""Whether a write left open by a lost attempt may still land.

No store can stop a write already sent by a holder that was paused past its lease (a GC
pause, a frozen VM, SIGSTOP) and woke after another worker took the run over; only the system
written to can, with the fencing token (``ToolContext.fence``). So a human reconciling such a
write is told when its holder may be alive:

- its lease expired and nobody has taken the run over yet: the holder is silent, and silence
  is all anyone knows (a paused worker and a dead one look the same), for as long as it lasts;
- its attempt ended ``lost`` and the next one took over within about two ttls of its last
  sign of life (a pause looks like a death that soon).

Unless the holder is known dead: its worker's process, on this host, no longer exists. On one
host a FileStore never needs this: a flock outlives its holder only in a holder that is
alive, and then the run shows as running (stuck), not indeterminate.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence

from .record import Record
from .roster import WorkerInfo
from .stores.protocol import LOST, Attempt


def late_write_note(
    records: Sequence[Record],
    attempts: Sequence[Attempt],
    step: str,
    ttl: float,
    now: float | None = None,
    workers: Sequence[WorkerInfo] = (),
) -> str:
    """One line when the open write ``step``'s holder may still be alive (its write may yet
    land), else "". ``workers``: the store's registrations, to tell a dead holder."""
    start = next(
        (r for r in reversed(records) if r.type == "step.started" and r.step == step), None
    )
    if start is None:
        return ""
    ran = [a for a in attempts if a.first_seq <= start.seq]
    if not ran or ran[-1].ended not in (None, LOST):
        return ""  # its holder said how the attempt ended
    holder = ran[-1]
    if known_dead(holder.owner, workers):
        return ""
    now = time.time() if now is None else now
    later = [a for a in attempts if a.number > holder.number and a.started_at is not None]
    last_sign = max((r.at for r in records if r.seq >= holder.first_seq), default=start.at)
    fence = (
        f"its write may still land; the system it writes to can refuse it by its fencing "
        f"token (epoch {holder.epoch})"
    )
    took_over = later[0].started_at if later else None
    if took_over is None:
        # The window between its lease expiring and a takeover: nothing says it is dead.
        return (
            f"its attempt (owner {holder.owner}, epoch {holder.epoch}) is silent: no record "
            f"for {max(0.0, now - last_sign):.0f}s and its lease expired, and no worker has "
            f"taken the run over; its worker may be paused rather than dead, and {fence}"
        )
    if took_over - last_sign > 2 * ttl:
        return ""
    return (
        f"its attempt (owner {holder.owner}, epoch {holder.epoch}) ended without saying, "
        f"{took_over - last_sign:.0f}s after its last record: its worker may be paused rather "
        f"than dead, and {fence}"
    )


def known_dead(owner: str, workers: Sequence[WorkerInfo]) -> bool:
    """True when ``owner``'s process is known to be gone: its registration (or, without one,
    an owner named ``host:pid``) names a process on this host that no longer exists. A
    process elsewhere, or a worker that merely stopped beating, may only be paused."""
    here = socket.gethostname()
    found = [(w.host, w.pid) for w in workers if w.owner == owner]
    if not found:
        name, _, digits = owner.rpartition(":")
        found = [(name, int(digits))] if digits.isdigit() else []
    for host, pid in found:
        if host == here and pid > 0:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            except OSError:
                return False
    return False
