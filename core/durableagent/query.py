"""One query language to select runs everywhere: ``agentrun ls --where``, the bulk commands
and the TUI's filter. Terms are ANDed; ``-term`` negates one::

    status:failed age>1h tool:create_ticket owner:host-a run:billing-* -status:paused needs:human

It is evaluated on a store's summaries (the status lines ``agentrun ls`` prints), never by
reading a journal. A field or an operator it does not know, or a value that does not parse,
is refused with what it takes.
"""

from __future__ import annotations

import fnmatch
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .durations import HOW, parse_duration
from .errors import DurableAgentError
from .fold import NEEDS_HUMAN, RunStatus, Summary
from .labels import STATUS_BY_WORD
from .steps import step_tool_name

_TERM = re.compile(r"(-?)([a-z_]+)(:|>=|<=|>|<)(.*)", re.DOTALL)


class QueryError(DurableAgentError, ValueError):
    """A query that does not parse; the message says what is wrong and what it takes."""


@dataclass(frozen=True)
class Field:
    """A field of the language: the operators it takes and what its values mean."""

    name: str
    operators: tuple[str, ...]
    help: str


FIELDS: dict[str, Field] = {
    f.name: f
    for f in (
        Field(
            "status",
            (":",),
            "a status or its short word (status:awaiting, status:failed; status:paused: "
            "every run whose pause is in force)",
        ),
        Field(
            "needs", (":",), "needs:human (corrupt, indeterminate, over_budget, awaiting, failed)"
        ),
        Field("tool", (":",), "a tool a run waits on: a pending call's or an open write's"),
        Field("run", (":",), "the run id, * and ? as wildcards (run:billing-*)"),
        Field("owner", (":",), "who holds a running run's lease (owner:host-a*, wildcards)"),
        Field("age", (">", "<", ">=", "<="), f"time since its last record ({HOW})"),
    )
}


def fields_text() -> str:
    """Every field with its operators and what it takes, for an error message."""
    return "; ".join(f"{_head(f)} {f.help}" for f in FIELDS.values())


def _head(f: Field) -> str:
    """``status:`` or ``age>|age<|age>=|age<=``."""
    return "|".join(f"{f.name}{op}" for op in f.operators) + ("" if f.operators == (":",) else ":")


# A term's test: (summary, now, owners) where owners maps a leased run to its lease holder's
# owner name (a summary does not carry it: see Query.uses_owner).
Test = Callable[[Summary, float, Mapping[str, str]], bool]
_NO_OWNERS: Mapping[str, str] = {}


@dataclass(frozen=True)
class Term:
    """One term of a query, as written (``field`` and ``value`` as parsed), and its test."""

    text: str
    negated: bool
    test: Test
    field: str = ""
    value: str = ""

    def matches(self, summary: Summary, now: float, owners: Mapping[str, str] = _NO_OWNERS) -> bool:
        return self.test(summary, now, owners) != self.negated


@dataclass(frozen=True)
class Query:
    """A parsed query: every term must hold. The empty query selects every run."""

    text: str
    terms: tuple[Term, ...] = ()

    @property
    def uses_owner(self) -> bool:
        """Whether an ``owner:`` term needs the lease holders (``owners`` of select): a
        summary says a run is leased, not by whom."""
        return any(t.field == "owner" for t in self.terms)

    def wants_tool(self, tool: str) -> bool:
        """Whether a call of ``tool`` passes every ``tool:`` term (the bulk approve and deny
        decide the matching runs' pending calls of those tools only)."""
        return all((t.value == tool) != t.negated for t in self.terms if t.field == "tool")

    def matches(
        self,
        summary: Summary,
        now: float | None = None,
        owners: Mapping[str, str] = _NO_OWNERS,
    ) -> bool:
        at = time.time() if now is None else now
        return all(t.matches(summary, at, owners) for t in self.terms)

    def select(
        self,
        summaries: Iterable[Summary],
        now: float | None = None,
        owners: Mapping[str, str] = _NO_OWNERS,
    ) -> list[Summary]:
        """The summaries the query selects, in their order (``owners``: run id → lease
        holder's owner, for ``owner:`` terms; a run not in it has none)."""
        at = time.time() if now is None else now
        terms = self.terms
        if not terms:
            return list(summaries)
        if len(terms) == 1:  # the TUI's usual keystroke: one term, no generator per run
            t = terms[0]
            test, neg = t.test, t.negated
            return [s for s in summaries if test(s, at, owners) != neg]
        return [s for s in summaries if all(t.matches(s, at, owners) for t in terms)]


def is_term(word: str) -> bool:
    """Whether ``word`` is written as a term (FIELD, an operator, a value; a leading - may
    negate), known field or not: the TUI's filter takes other words as plain text."""
    return _TERM.fullmatch(word) is not None


def parse_query(text: str) -> Query:
    """Parse ``text`` (terms separated by spaces); QueryError when a term does not parse."""
    terms = []
    for word in text.split():
        m = _TERM.fullmatch(word)
        if m is None:
            raise QueryError(
                f"{word!r} is not a term: write FIELD:VALUE or age>DURATION (a leading - "
                f"negates). Fields: {fields_text()}"
            )
        neg, name, op, value = m.groups()
        field = FIELDS.get(name)
        if field is None:
            raise QueryError(f"unknown field {name!r} in {word!r}. Fields: {fields_text()}")
        if op not in field.operators:
            ops = " or ".join(field.operators)
            raise QueryError(f"{name} takes {ops}, not {op!r} (in {word!r})")
        if not value:
            raise QueryError(f"{word!r} has no value: {field.help}")
        terms.append(Term(word, neg == "-", _test(name, op, value, word), name, value))
    return Query(text.strip(), tuple(terms))


def _test(name: str, op: str, value: str, word: str) -> Test:
    if name == "status":
        status = STATUS_BY_WORD.get(value.lower())
        if status is None:
            known = ", ".join(sorted(STATUS_BY_WORD))
            raise QueryError(f"unknown status {value!r} in {word!r}; use one of {known}")
        return lambda s, now, owners: s.has_status(status)
    if name == "needs":
        if value.lower() != "human":
            raise QueryError(f"needs takes human, not {value!r} (in {word!r})")
        return lambda s, now, owners: s.status in NEEDS_HUMAN
    if name == "tool":
        # Most runs wait on no tool: no set made for them (a keystroke tests 100,000 runs).
        return lambda s, now, owners: bool(s.pending or s.indeterminate) and value in tools_of(s)
    if name == "run":
        if not any(c in value for c in "*?["):
            return lambda s, now, owners: s.run_id == value
        pattern = re.compile(fnmatch.translate(value))
        return lambda s, now, owners: pattern.match(s.run_id) is not None
    if name == "owner":
        owner = re.compile(fnmatch.translate(value))
        # Only a leased run has an owner; the lease holders come from the store (owners).
        return lambda s, now, owners: s.leased and owner.match(owners.get(s.run_id, "")) is not None
    assert name == "age"
    try:
        seconds = parse_duration(value)
    except ValueError as e:
        raise QueryError(f"{e} (in {word!r})") from None
    compare: dict[str, Callable[[float, float], bool]] = {
        ">": float.__gt__,
        "<": float.__lt__,
        ">=": float.__ge__,
        "<=": float.__le__,
    }
    cmp = compare[op]

    def age(s: Summary, now: float, owners: Mapping[str, str]) -> bool:
        last = s.last_activity if s.last_activity is not None else s.started_at
        return last is not None and cmp(float(now - last), seconds)

    return age


def tools_of(s: Summary) -> set[str]:
    """The tools a run waits on: its pending calls', its open write's."""
    tools = {p.tool for p in s.pending}
    tool = step_tool_name(s.indeterminate) if s.indeterminate else None
    if tool:
        tools.add(tool)
    return tools


__all__ = [
    "FIELDS",
    "Query",
    "QueryError",
    "RunStatus",
    "is_term",
    "parse_query",
    "tools_of",
]
