"""examples/openai_agents_helpdesk.py, unchanged, against the local OpenAI-compatible server
over a real socket (the Agents SDK's OpenAIChatCompletionsModel, through the official openai
client)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM

from durableagent import Config, FileStore, Message, Status, run, signal

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        monkeypatch.setenv("OPENAI_BASE_URL", f.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
        monkeypatch.setenv("AGENTRUN_MODEL", "helpdesk-test")
        monkeypatch.syspath_prepend(str(REPO))
        yield f


async def test_the_agents_sdk_example_completes_a_run_against_an_openai_compatible_server(
    fake: FakeLLM, store: FileStore
) -> None:
    from examples.openai_agents_helpdesk import agent

    helpdesk = agent(store.root)
    config = Config(helpdesk.config, helpdesk.gate, store)
    outcome = await run(config, "h1", [Message("user", "I need access to billing.")])
    assert outcome.status == Status.AWAITING_APPROVAL
    assert [p.tool for p in outcome.pending] == ["create_ticket"]
    signal(store, "h1", "approve", {"marker": outcome.pending[0].marker}, by="alice")

    outcome = await run(config, "h1", None)
    assert outcome.status == Status.COMPLETED
    assert outcome.message is not None and outcome.message.content == "Ticket filed: TICKET-1"
    (ticket,) = json.loads((store.root / ".helpdesk" / "tickets.json").read_text())
    assert ticket["summary"] == "billing dashboard access"
    assert ticket["key"].startswith("h1:") and ticket["key"].endswith(":tool/2/0/create_ticket")
    assert {r.body["model"] for r in fake.requests} == {"helpdesk-test"}
    # The instructions and the tools reach the model on every request.
    for r in fake.requests:
        assert r.body["messages"][0]["role"] == "system"
        names = sorted(t["function"]["name"] for t in r.body["tools"])
        assert names == ["create_ticket", "lookup_policy", "send_email"]
    assert fake.requests[0].headers["authorization"] == "Bearer sk-local"
    assert fake.turns() == {1: 1, 2: 1, 3: 1}  # the resumed attempt replayed turns 1 and 2
    # send_email is declared needs_approval in the SDK: a write a human approves.
    assert helpdesk.gate.is_write("send_email") and helpdesk.gate.needs_approval("send_email")
