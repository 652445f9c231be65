"""``agentrun cancel``, ``pause``, ``resume``, ``budget`` and ``submit --budget``: what they
print, and bad input refused with one clear line, the journal byte-identical."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from durableagent import (
    Budget,
    BudgetError,
    FileStore,
    Message,
    SignalError,
    parse_budget,
    signal,
    submit,
)
from durableagent.cli import main

INPUT = [Message("user", "do it")]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's usage errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def runs(tmp_path: Path) -> tuple[FileStore, str]:
    store = FileStore(tmp_path / "runs")
    submit(store, "r1", INPUT)
    return store, str(store.root)


def test_parse_budget_takes_what_people_write_and_refuses_the_rest() -> None:
    assert parse_budget("tokens=200000,model_calls=40,deadline=2h") == {
        "tokens": 200000,
        "model_calls": 40,
        "deadline": 7200.0,
    }
    assert parse_budget("tokens=200k tool_calls=1_000 cost=5.5") == {
        "tokens": 200000,
        "tool_calls": 1000,
        "cost": 5.5,
    }
    assert parse_budget("tokens=1.5M") == {"tokens": 1_500_000}
    assert parse_budget("tokens=none", lifting=True) == {"tokens": None}
    for text, match in [
        ("tokens=lots", "tokens takes a whole number"),
        ("tokens=-5", "whole number"),
        ("tokens=1.5", "whole number"),
        ("deadline=soon", "a duration"),
        ("cost=free", "a number above 0"),
        ("bananas=3", "the keys being tokens="),
        ("tokens", "give key=value"),
        ("tokens=5,tokens=6", "given twice"),
        ("", "an empty budget"),
        ("tokens=none", "only with --set"),
    ]:
        with pytest.raises(BudgetError, match=match):
            parse_budget(text)
    with pytest.raises(BudgetError):
        Budget(tokens=-1)


NONSENSE = [
    ("model_calls=0", "model_calls takes a whole number from 1"),
    ("tool_calls=0", "tool_calls takes a whole number from 1"),
    ("tokens=0", "tokens takes a whole number from 1"),
    ("tokens=0k", "tokens takes a whole number from 1"),
    ("tokens=1e3", "tokens takes a whole number from 1: 200000, 200k or 1.5M"),
    ("tokens=inf", "tokens takes a whole number"),
    ("tokens=+5", "tokens takes a whole number"),
    ("TOKENS=5", "unknown limit 'TOKENS'; give key=value, the keys being tokens="),
    ("Model_Calls=5", "unknown limit 'Model_Calls'"),
    ("model-calls=5", "unknown limit 'model-calls'"),
    ("deadline=0", "deadline takes a duration above 0 and up to 365d"),
    ("deadline=0s", "deadline takes a duration above 0"),
    ("deadline=99999999999w", "deadline takes a duration above 0 and up to 365d"),
    ("deadline=366d", "up to 365d"),
    ("deadline=1e3", "deadline takes a duration"),
    ("cost=0", "cost takes a number above 0"),
    ("cost=1e3", "cost takes a number above 0"),
    ("cost=nan", "cost takes a number above 0"),
]


@pytest.mark.parametrize("text, says", NONSENSE, ids=[t for t, _ in NONSENSE])
def test_a_nonsense_budget_is_refused_with_what_is_allowed_everywhere_one_is_given(
    text: str, says: str, capsys: pytest.CaptureFixture[str], runs: tuple[FileStore, str]
) -> None:
    """One grammar for submit --budget, budget --add/--set and the TUI's B dialog (all of
    them parse_budget), and a budget signal: a slip is one line that says what is allowed."""
    store, root = runs
    with pytest.raises(BudgetError, match=re.escape(says)):
        parse_budget(text)
    with pytest.raises(BudgetError, match=re.escape(says)):
        parse_budget(text, lifting=True)
    signal(store, "r1", "budget", {"set": {"tokens": 100}}, by="ana", reason="a limit to add to")
    before = store.path("r1").read_bytes()
    for argv in (
        ["submit", "b9", "do it", "--budget", text],
        ["budget", "r1", "--add", text, "--reason", "x"],
        ["budget", "r1", "--set", text, "--reason", "x"],
    ):
        code, out, err = cli(capsys, *argv, "--store", root)
        assert code == 2, (argv, out, err)
        assert says in err and "Traceback" not in err
    assert store.path("r1").read_bytes() == before
    assert store.load("b9") == []


@pytest.mark.parametrize(
    "limits",
    [{"model_calls": 0}, {"deadline": 0}, {"deadline": 1e18}, {"tokens": 0}, {"cost": 0.0}],
)
def test_a_budget_signal_with_a_limit_that_means_nothing_is_refused(
    limits: dict[str, float], runs: tuple[FileStore, str]
) -> None:
    store, _ = runs
    before = store.path("r1").read_bytes()
    for how in ("add", "set"):
        with pytest.raises(SignalError, match="takes"):
            signal(store, "r1", "budget", {how: limits}, by="ana", reason="x")
    assert store.path("r1").read_bytes() == before


def test_submit_records_a_budget_and_refuses_one_that_does_not_parse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = str(tmp_path / "runs")
    code, _, err = cli(capsys, "submit", "b1", "do it", "--budget", "tokens=lots", "--store", root)
    assert code == 2 and "budget 'tokens=lots': tokens takes a whole number" in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists() or not FileStore(root).load("b1")
    code, out, _ = cli(capsys, "submit", "b1", "do it", "--budget", "tokens=200k,deadline=2h",
                       "--store", root)  # fmt: skip
    assert code == 0
    assert FileStore(root).load("b1")[0].data["budget"] == {"tokens": 200000, "deadline": 7200.0}
    code, out, _ = cli(capsys, "budget", "b1", "--store", root)
    assert code == 0 and out.startswith("tokens 0 of 200,000 · deadline 2h (")
    code, out, _ = cli(capsys, "ls", "--json", "--store", root)
    row = json.loads(out.splitlines()[0])
    assert row["budget"] == {"tokens": 200000, "deadline": 7200.0}
    assert row["spent"]["tokens"] == 0 and row["cancelled"] is None and row["stopping"] is None


def test_cancel_pause_resume_print_what_happens_and_refuse_what_cannot(
    capsys: pytest.CaptureFixture[str], runs: tuple[FileStore, str]
) -> None:
    store, root = runs
    before = store.path("r1").read_bytes()
    code, _, err = cli(capsys, "cancel", "r1", "--store", root)
    assert code == 2 and "cancel needs --reason" in err
    code, _, err = cli(capsys, "resume", "r1", "--store", root)
    assert (
        code == 1
        and err.strip() == "agentrun resume: run 'r1' is not paused; there is nothing to resume"
    )
    code, _, err = cli(capsys, "budget", "r1", "--add", "tokens=lots", "--reason", "x",
                       "--store", root)  # fmt: skip
    assert code == 2 and "tokens takes a whole number" in err  # a usage error, as for submit
    code, _, err = cli(capsys, "budget", "r1", "--add", "tokens=5", "--reason", "x",
                       "--store", root)  # fmt: skip
    assert code == 1 and "no tokens limit to raise; set one with --set tokens=..." in err
    code, _, err = cli(capsys, "cancel", "nope", "--reason", "x", "--store", root)
    assert code == 1 and "no run 'nope'" in err
    assert store.path("r1").read_bytes() == before

    code, out, _ = cli(capsys, "pause", "r1", "--reason", "checking the prompt", "--by", "ana",
                       "--store", root)  # fmt: skip
    assert code == 0 and out.startswith("paused r1; resume it with: agentrun resume r1")
    code, out, _ = cli(capsys, "show", "r1", "--store", root)
    assert "status   ‖ paused" in out and "control  paused by ana at " in out
    assert "resume: agentrun resume r1" in out
    code, out, _ = cli(capsys, "ls", "--store", root)
    assert "paused" in out and "paused by ana" in out
    code, out, _ = cli(capsys, "resume", "r1", "--by", "ana", "--store", root)
    assert code == 0 and "resumed r1" in out
    code, out, _ = cli(capsys, "cancel", "r1", "--reason", "not needed", "--by", "bo",
                       "--store", root)  # fmt: skip
    assert code == 0 and out.startswith("cancelled r1: no step of it starts again")
    code, out, _ = cli(capsys, "show", "r1", "--json", "--store", root)
    shown = json.loads(out)
    assert shown["status"] == "cancelled" and shown["cancelled"]["by"] == "bo"
    assert shown["cancelled"]["reason"] == "not needed" and shown["cancelled"]["at_iso"]
    after = store.path("r1").read_bytes()
    code, _, err = cli(capsys, "cancel", "r1", "--reason", "again", "--store", root)
    assert code == 1 and "was cancelled by bo at " in err and ": not needed; it takes no" in err
    code, _, err = cli(capsys, "pause", "r1", "--reason", "x", "--store", root)
    assert code == 1 and "cancelled by bo" in err
    assert store.path("r1").read_bytes() == after
