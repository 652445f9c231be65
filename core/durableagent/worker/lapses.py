"""The worker's part in approval deadlines (SPEC §10): a pending call whose deadline passed
is denied by "deadline", never approved, and never over a human's decision that came first
(the deny is a signal, validated under the journal's lock like every other)."""

from __future__ import annotations

import logging

from ..control import DEADLINE
from ..deadlines import lapse_reason
from ..errors import DurableAgentError
from ..gate import Pending
from ..signals import signal
from ..stores import Store

log = logging.getLogger("durableagent.worker")


def deny_lapsed(store: Store, run_id: str, calls: list[Pending]) -> None:
    """Record ``deny`` by "deadline" for each lapsed call, under the journal's lock: a human
    who decided first (or another worker) wins, and nothing is written."""
    for p in calls:
        try:
            signal(store, run_id, "deny", {"marker": p.marker}, by=DEADLINE, reason=lapse_reason(p))
            log.info("run %s: %s denied, %s", run_id, p.step, lapse_reason(p))
        except DurableAgentError as e:
            log.debug("run %s: %s not denied (%s)", run_id, p.step, e)
