"""The query language: one grammar for ls --where, the bulk commands and the TUI's filter,
evaluated on summaries; a field, an operator or a value it does not know is refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durableagent import Pending, RunStatus, Summary
from durableagent.durations import format_duration, parse_duration
from durableagent.query import QueryError, parse_query

NOW = 1_800_000_000.0


def summary(run_id: str, status: RunStatus, *, ago: float = 0.0, **more: object) -> Summary:
    return Summary(run_id, status, last_activity=NOW - ago, started_at=NOW - ago, **more)  # type: ignore[arg-type]


RUNS = [
    summary("billing-1", RunStatus.FAILED, ago=7200),
    summary("billing-2", RunStatus.FAILED, ago=60),
    summary(
        "access-1",
        RunStatus.AWAITING_APPROVAL,
        ago=4000,
        pending=(
            Pending("tool/2/0/create_ticket#0", "tool/2/0/create_ticket", "create_ticket", {}),
        ),
    ),
    summary("mail-1", RunStatus.INDETERMINATE, ago=10, indeterminate="tool/3/1/send_email"),
    summary("done-1", RunStatus.COMPLETED, ago=99999),
]


def ids(text: str) -> list[str]:
    return [s.run_id for s in parse_query(text).select(RUNS, NOW)]


def test_terms_are_anded_and_a_minus_negates_one():
    assert ids("status:failed age>1h") == ["billing-1"]
    assert ids("run:billing-*") == ["billing-1", "billing-2"]
    assert ids("run:billing-* -age>1h") == ["billing-2"]
    assert ids("needs:human -status:failed") == ["access-1", "mail-1"]
    assert ids("") == [s.run_id for s in RUNS]


def test_status_takes_the_tui_s_short_words_and_tool_the_call_a_run_waits_on():
    assert ids("status:awaiting") == ["access-1"]
    assert ids("tool:create_ticket") == ["access-1"]
    assert ids("tool:send_email") == ["mail-1"]
    assert ids("age<=1m") == ["billing-2", "mail-1"]


@pytest.mark.parametrize(
    "text, says",
    [
        ("colour:red", "unknown field 'colour'"),
        ("status>failed", "status takes :, not '>'"),
        ("status:nope", "unknown status 'nope'"),
        ("age>lots", "'lots' is not a duration: 90s, 30m, 2h, 1d, 1w, or plain seconds"),
        ("age:1h", "age takes > or < or >= or <=, not ':'"),
        ("needs:robot", "needs takes human"),
        ("failed", "is not a term"),
        ("run:", "has no value"),
    ],
)
def test_a_query_that_does_not_parse_is_refused_saying_what_it_takes(text: str, says: str):
    with pytest.raises(QueryError) as e:
        parse_query(text)
    assert says in str(e.value)
    if "unknown field" in says or "not a term" in says:
        for field in ("status", "needs", "tool", "run", "owner", "age"):
            assert field in str(e.value)


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86400),
        ("1w", 604800),
        ("45", 45),
        ("2.5", 2.5),
    ],
)
def test_durations_take_the_one_grammar(text: str, seconds: float):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "lots", "-5m", "2 hours", "1y", "inf", "nan", "5mm"])
def test_a_duration_that_does_not_parse_is_refused(text: str):
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@given(st.floats(min_value=0, max_value=10**8, allow_nan=False))
@settings(deadline=None)
def test_a_formatted_duration_parses_back_to_no_more_than_it_said(seconds: float):
    back = parse_duration(format_duration(seconds))
    assert back <= seconds
    assert seconds - back < max(60.0, seconds / 1.5)  # the leading unit only
