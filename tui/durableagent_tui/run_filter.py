"""The ``/`` filter: the query language of ``ls --where`` and the bulk commands
(durableagent.query), plus bare words for quick looks.

A word written as a term (``status:failed``, ``age>1h``, ``-tool:send_email``) is a query term;
any other word (``await``, ``billing``) keeps the filter's old meaning: the run id, the status
or its short word contains it (case-insensitive). Every word must hold. A term that does not
parse raises QueryError with the query's own message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from durableagent import Summary
from durableagent.query import Query, is_term, parse_query


@dataclass(frozen=True)
class RunFilter:
    """A parsed filter: its bare ``words`` (lower case) and its ``query`` of terms."""

    text: str
    words: tuple[str, ...] = ()
    query: Query = field(default_factory=lambda: Query(""))

    @property
    def empty(self) -> bool:
        return not self.words and not self.query.terms

    def matches(self, s: Summary, hay: str, now: float, owners: Mapping[str, str]) -> bool:
        """Whether the run passes every word (``hay``: its id and status words, lower case)
        and every term."""
        return all(w in hay for w in self.words) and self.query.matches(s, now, owners)

    def narrows(self, older: RunFilter) -> bool:
        """Whether every run this filter matches, ``older`` matched too (so this one need
        look only at the older one's matches): it keeps each of the older terms and each older
        word is inside one of its words. (``age<1h`` to ``age<10h`` widens: not kept.)"""
        terms = {t.text for t in self.query.terms}
        return all(t.text in terms for t in older.query.terms) and all(
            any(w in mine for mine in self.words) for w in older.words
        )


def parse_filter(text: str) -> RunFilter:
    """``text`` as a filter; QueryError when one of its terms does not parse."""
    words = text.split()
    terms = [w for w in words if is_term(w)]
    bare = tuple(w.lower() for w in words if not is_term(w))
    return RunFilter(" ".join(words), bare, parse_query(" ".join(terms)))
