"""The runs as the table orders and filters them: the store's summaries, kept sorted by keyed
diff. No Textual here, and no I/O: 100,000 runs are a dict and two sorted lists of run ids.

A change moves one id: bisect out at its old sort key, bisect in at its new one (a memmove,
not a sort). Only a batch larger than ``RESORT_SHARE`` of the store (a rescan after a burst)
sorts once instead. The filter (run_filter.py: the query language, and bare words) narrows the
previous matches while it only adds to them, so each keystroke scans at most the runs still
shown. ``marked`` holds the runs marked (space) for an action on all of them at once.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from durableagent import NEEDS_HUMAN, RunStatus, Summary

from .run_filter import RunFilter, parse_filter
from .styles import LOOKS, RANK

SortKey = tuple[int, float, str]
RESORT_SHARE = 0.02  # a batch changing more than this share of the runs sorts them once


def sort_key(s: Summary) -> SortKey:
    """Attention first (by status group), newest activity first within a group."""
    return (RANK[s.status], -(s.last_activity or 0.0), s.run_id)


def haystack(s: Summary) -> str:
    """What the filter looks in: the run id, the status and its short word, lower case (and
    ``paused`` for a run whose pause is in force under another status: Summary.has_status)."""
    held = "\npaused" if s.status != RunStatus.PAUSED and s.paused else ""
    return f"{s.run_id.lower()}\n{s.status}\n{LOOKS[s.status].word}{held}"


class RunRows:
    """Every run's summary, ``order`` (all runs, attention first) and ``shown`` (the ones the
    filter matches, in the same order; the same list as ``order`` when there is no filter)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock  # "now" for a filter's age terms
        self.summaries: dict[str, Summary] = {}
        self.order: list[str] = []
        self.shown: list[str] = self.order
        self.counts: Counter[RunStatus] = Counter()
        self.filter = ""
        self.marked: set[str] = set()  # runs marked for an action on all of them
        # Who holds each running run, as the workers' last beats say (set_owners): what the
        # filter's owner: terms read.
        self.owners: Mapping[str, str] = {}
        self._filter = RunFilter("")
        # A term's matches among every run (see _matching), until the runs change.
        self._term_cache: dict[str, tuple[list[str], frozenset[str]]] = {}
        # The runs waiting on a tool (a pending call, an open write): the only ones a tool:
        # term can select, a few in a hundred.
        self._waiting: set[str] = set()
        # The widest id and counts seen: a column never narrows under the eye.
        self.id_width = 0
        self.steps_width = 1
        self.llm_width = 1
        self.sorts = 0  # full sorts so far (tests check a change does not cause one)
        self._keys: dict[str, SortKey] = {}
        self._hay: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self.summaries)

    # -- changes -----------------------------------------------------------------------------

    def update(self, changed: Iterable[Summary], removed: Iterable[str] = ()) -> set[str]:
        """Apply new summaries and removed runs; the ids whose row changed."""
        fresh = [s for s in changed if self.summaries.get(s.run_id) != s]
        gone = [rid for rid in removed if rid in self.summaries]
        if not fresh and not gone:
            return set()
        self._term_cache.clear()
        if len(fresh) + len(gone) > max(64, RESORT_SHARE * len(self.summaries)):
            return self._bulk(fresh, gone)
        for rid in gone:
            self._take_out(rid)
            self._forget(rid)
        for s in fresh:
            if s.run_id in self.summaries:
                self._take_out(s.run_id)
            self._note(s)
            self._put_in(s.run_id)
        return {s.run_id for s in fresh} | set(gone)

    def _bulk(self, fresh: list[Summary], gone: list[str]) -> set[str]:
        summaries, keys, hay = self.summaries, self._keys, self._hay
        for rid in gone:
            del summaries[rid], keys[rid], hay[rid]
            self._waiting.discard(rid)
            self.marked.discard(rid)
        summaries.update({s.run_id: s for s in fresh})
        keys.update({s.run_id: sort_key(s) for s in fresh})
        hay.update({s.run_id: haystack(s) for s in fresh})
        for s in fresh:
            self._note_waiting(s)
        self.counts = Counter(s.status for s in summaries.values())
        self.id_width = max(self.id_width, max((len(s.run_id) for s in fresh), default=0))
        self.steps_width = max(self.steps_width, len(str(max((s.steps for s in fresh), default=0))))
        self.llm_width = max(
            self.llm_width, len(str(max((s.model_calls for s in fresh), default=0)))
        )
        self.sorts += 1
        self.order = sorted(keys, key=keys.__getitem__)
        self.shown = self.order if not self.filter else self._matching(self.order, self._filter)
        return {s.run_id for s in fresh} | set(gone)

    def _note(self, s: Summary) -> None:
        rid = s.run_id
        old = self.summaries.get(rid)
        if old is not None:
            self.counts[old.status] -= 1
            if not self.counts[old.status]:
                del self.counts[old.status]
        self.summaries[rid] = s
        self.counts[s.status] += 1
        self._keys[rid] = sort_key(s)
        self._hay[rid] = haystack(s)
        self._note_waiting(s)
        self.id_width = max(self.id_width, len(rid))
        self.steps_width = max(self.steps_width, len(str(s.steps)))
        self.llm_width = max(self.llm_width, len(str(s.model_calls)))

    def _note_waiting(self, s: Summary) -> None:
        if s.pending or s.indeterminate:
            self._waiting.add(s.run_id)
        else:
            self._waiting.discard(s.run_id)

    def _forget(self, rid: str) -> None:
        old = self.summaries.pop(rid)
        self.counts[old.status] -= 1
        if not self.counts[old.status]:
            del self.counts[old.status]
        del self._keys[rid], self._hay[rid]
        self._waiting.discard(rid)
        self.marked.discard(rid)

    def _take_out(self, rid: str) -> None:
        """Remove ``rid`` from the sorted lists, found at its current key."""
        for rows in self._lists():
            i = self._find(rows, rid)
            if i is not None:
                del rows[i]

    def _put_in(self, rid: str) -> None:
        key = self._keys[rid]
        get = self._keys.__getitem__
        self.order.insert(bisect.bisect_left(self.order, key, key=get), rid)
        if self.shown is not self.order and self._matches(rid):
            self.shown.insert(bisect.bisect_left(self.shown, key, key=get), rid)

    def _lists(self) -> list[list[str]]:
        return [self.order] if self.shown is self.order else [self.order, self.shown]

    def _find(self, rows: list[str], rid: str) -> int | None:
        key = self._keys.get(rid)
        if key is None:
            return None
        i = bisect.bisect_left(rows, key, key=self._keys.__getitem__)
        return i if i < len(rows) and rows[i] == rid else None

    # -- reading -----------------------------------------------------------------------------

    def index(self, rid: str | None) -> int | None:
        """Where ``rid`` is among the shown runs (a bisect), or None."""
        return None if rid is None else self._find(self.shown, rid)

    def needing_human(self) -> list[str]:
        """The shown runs that need a human, in table order: they sort first, so this reads
        only the top of the list."""
        out = []
        for rid in self.shown:
            if self.summaries[rid].status not in NEEDS_HUMAN:
                break
            out.append(rid)
        return out

    # -- the filter --------------------------------------------------------------------------

    def set_filter(self, text: str) -> None:
        """Show only the runs the filter ``text`` selects (see run_filter.py: query terms and
        bare words, all ANDed). QueryError, and the filter as it was, when a term does not
        parse."""
        new = parse_filter(text)
        if new.text == self._filter.text:
            return
        if new.empty:
            self.shown = self.order
        elif not self._filter.empty and new.narrows(self._filter):
            self.shown = self._matching(self.shown, new)  # narrowing: look at matches only
        else:
            self.shown = self._matching(self.order, new)
        self._filter = new
        self.filter = new.text

    def set_owners(self, owners: Mapping[str, str]) -> bool:
        """Who holds each running run (run id → owner name, from the workers' beats), for
        the filter's ``owner:`` terms. True when the runs shown changed."""
        if owners == self.owners:
            return False
        self.owners = dict(owners)
        if not self._filter.query.uses_owner:
            return False
        old = self.shown
        self.shown = self._matching(self.order, self._filter)
        return self.shown != old

    def _matches(self, rid: str) -> bool:
        s = self.summaries[rid]
        return self._filter.matches(s, self._hay[rid], self.clock(), self.owners)

    def _matching(self, rows: list[str], f: RunFilter) -> list[str]:
        """The ``rows`` that ``f`` selects, in their order. Term by term, each on what the
        ones before left: first the terms whose matches among every run are known from an
        earlier keystroke (a set lookup each), then the bare words, then the new terms. A term
        tested on every run is remembered until the runs change (not an age term: its
        matches move with the clock; nor an owner term: they move with the workers' beats)."""
        hay, summaries, cache = self._hay, self.summaries, self._term_cache
        terms = f.query.terms
        known = [t for t in terms if t.text in cache]
        for t in known:
            ordered, members = cache[t.text]
            rows = ordered if rows is self.order else [rid for rid in rows if rid in members]
        for word in f.words:
            rows = [rid for rid in rows if word in hay[rid]]
        now = self.clock()
        for t in terms:
            if t.text in cache:
                continue
            test, negated, owners = t.test, t.negated, self.owners
            everyone = rows is self.order
            if t.field == "tool":  # tested on the runs waiting on a tool only
                hits = {rid for rid in self._waiting if test(summaries[rid], now, owners)}
                rows = [rid for rid in rows if (rid in hits) != negated]
            else:
                rows = [rid for rid in rows if test(summaries[rid], now, owners) != negated]
            if everyone and t.field not in ("age", "owner"):
                cache[t.text] = (rows, frozenset(rows))
        return rows if rows is not self.order else list(rows)

    # -- marks -------------------------------------------------------------------------------

    def toggle_mark(self, rid: str) -> bool:
        """Mark ``rid`` or take its mark off; True when it is marked now."""
        if rid in self.marked:
            self.marked.discard(rid)
            return False
        if rid in self.summaries:
            self.marked.add(rid)
            return True
        return False

    def marked_runs(self) -> list[Summary]:
        """The marked runs' summaries, in table order (all of them, shown by the filter or
        not)."""
        marked = self.marked
        return [self.summaries[rid] for rid in self.order if rid in marked]
