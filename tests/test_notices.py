"""What a notice says and when one is due (notify/notices.py: pure, no store)."""

from __future__ import annotations

import json

from durableagent import Pending, RunStatus, Summary
from durableagent.notify.notices import notices_for, parse_kinds, stalled

NOW = 1_800_000_000.0


def summary(status: RunStatus, **kw: object) -> Summary:
    base: dict[str, object] = {"last_activity": NOW - 14 * 60, "last_seq": 9}
    base.update(kw)
    return Summary("a1", status, **base)  # type: ignore[arg-type]


def test_kinds_default_to_all_and_an_unknown_one_is_named() -> None:
    assert "stalled" in parse_kinds(None) and parse_kinds("approval") == {"approval"}
    try:
        parse_kinds("approval,nope")
    except ValueError as e:
        assert "unknown kind 'nope'" in str(e)
    else:
        raise AssertionError("accepted")


def test_an_indeterminate_write_names_the_step_and_both_reconciles() -> None:
    (n,) = notices_for(
        summary(RunStatus.INDETERMINATE, indeterminate="tool/2/0/create_ticket"),
        now=NOW,
        store="runs",
    )
    assert n.kind == "indeterminate" and n.seq == 9
    body = n.body(NOW)
    assert "the write tool/2/0/create_ticket started and never recorded a result" in body
    assert "act: agentrun reconcile a1 tool/2/0/create_ticket --done RESULT --store runs" in body
    assert "or: agentrun reconcile a1 tool/2/0/create_ticket --retry --store runs" in body
    assert "waiting 14m" in body


def test_a_failed_run_is_told_only_once_the_workers_gave_up() -> None:
    s = summary(RunStatus.FAILED, error="ServerError: 503")
    assert notices_for(s, now=NOW, store="runs") == []
    (n,) = notices_for(s, now=NOW, store="runs", exhausted=True)
    assert "the workers gave up: ServerError: 503" in n.body(NOW)
    assert "act: agentrun retry a1 --store runs" in n.body(NOW)


def test_a_stalled_store_is_one_notice_for_its_longest_waiting_ready_run() -> None:
    runs = [
        summary(RunStatus.READY, last_activity=NOW - 60),
        Summary("b2", RunStatus.READY, last_activity=NOW - 30, last_seq=3),
    ]
    assert stalled(runs, now=NOW, store="runs", no_worker_since=None) is None
    assert stalled(runs, now=NOW, store="runs", no_worker_since=NOW - 600) is None  # 60 s
    n = stalled(runs, now=NOW + 90, store="runs", no_worker_since=NOW - 600)
    assert n is not None and (n.kind, n.run_id, n.seq) == ("stalled", "a1", 9)
    assert n.title == "a1 and 1 more ready and no worker is live"
    assert "no live worker has served the store for 11m" in n.body(NOW + 90)
    assert "act: agentrun worker --agent MODULE:ATTR --store runs" in n.body(NOW + 90)
    assert notices_for(runs[0], now=NOW + 90, store="runs") == []


def test_an_approval_lapsing_within_a_tenth_of_its_window_is_warned() -> None:
    p = Pending(
        "tool/1/0/x#ab", "tool/1/0/x", "x", {"a": 1}, deadline_at=NOW + 300, approve_within=3600.0
    )
    kinds = [
        n.kind
        for n in notices_for(
            summary(RunStatus.AWAITING_APPROVAL, pending=(p,)), now=NOW, store="runs"
        )
    ]
    assert kinds == ["approval", "deadline"]
    early = notices_for(
        summary(RunStatus.AWAITING_APPROVAL, pending=(p,)), now=NOW - 600, store="runs"
    )
    assert [n.kind for n in early] == ["approval"]
    with_quote = notices_for(
        summary(RunStatus.AWAITING_APPROVAL, pending=(p,)), now=NOW, store="my runs"
    )
    assert "--store 'my runs'" in with_quote[0].body(NOW)


def test_two_calls_waiting_after_one_turn_are_two_notices_each_claimed_on_its_own() -> None:
    calls = [Pending(f"tool/1/{i}/x#a{i}", f"tool/1/{i}/x", "x", {"i": i}) for i in range(2)]
    both = notices_for(
        summary(RunStatus.AWAITING_APPROVAL, pending=tuple(calls)), now=NOW, store="runs"
    )
    assert [n.kind for n in both] == ["approval", "approval"]
    assert both[0].key != both[1].key  # what the store claims each under
    for n, p in zip(both, calls, strict=True):
        assert f"({p.step})" in n.waits_on and f"approve a1 '{p.marker}'" in n.body(NOW)
        assert n.as_escalation().key != both[1 - calls.index(p)].as_escalation().key


def test_an_over_budget_notice_raises_the_limit_the_run_stopped_at() -> None:
    from durableagent.budget import Budget

    def notice(budget: Budget, why: str, started_at: float = NOW - 60) -> str:
        controls = json.dumps({"budget": budget.to_dict()})
        s = summary(RunStatus.OVER_BUDGET, waiting_on=why, controls=controls, started_at=started_at)
        (n,) = notices_for(s, now=NOW, store="runs")
        return n.commands[0]

    calls_only = notice(Budget(model_calls=1), "over budget: model calls: 1 made of a limit of 1")
    assert calls_only == "agentrun budget a1 --add model_calls=10 --reason WHY --store runs"
    both = Budget(tokens=1000, tool_calls=3)
    assert "--add tool_calls=10 " in notice(both, "over budget: tool calls: 3 made of a limit of 3")
    assert "--add tokens=100000 " in notice(both, "over budget: tokens: 900 spent + 400 ...")
    late = notice(Budget(deadline=3600), "over budget: deadline: 3h since ...", NOW - 3 * 3600)
    assert "--add deadline=3h " in late  # 2h overdue, and an hour more
