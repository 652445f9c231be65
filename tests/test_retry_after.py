"""A provider's Retry-After reaches the worker: the next attempt waits at least that long."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from fake_llm import Canned, FakeLLM

from durableagent import (
    AgentConfig,
    FileStore,
    Message,
    ModelRetryError,
    RunStatus,
    gate_for,
    submit,
    tool,
    view_store,
)
from durableagent.models import OpenAIModel
from durableagent.models.http import retry_after, status_error
from durableagent.worker import (
    Agent,
    Attempts,
    Worker,
    backoff_delay,
    note_failure,
    read_attempts,
    retry_after_of,
)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Thu, 01 Jan 1970 00:01:40 GMT"}, 60.0),  # 100 s after epoch, now 40
        ({"retry-after": "Thu, 01 Jan 1970 00:00:10 GMT"}, 0.0),  # in the past
        ({"retry-after": "-3"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_seconds_milliseconds_and_http_dates(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after(headers, now=40.0) == seconds


def test_only_failures_that_pass_with_time_are_retry_errors() -> None:
    for status in (408, 409, 429, 500, 502, 503, 529):
        assert isinstance(status_error("p", status, {}, "x"), ModelRetryError), status
    for status in (400, 401, 403, 404, 422):
        assert not isinstance(status_error("p", status, {}, "x"), ModelRetryError), status


def test_the_backoff_waits_at_least_the_retry_after_even_past_its_cap() -> None:
    assert backoff_delay(1, 1.0, 60.0) == 1.0
    assert backoff_delay(1, 1.0, 60.0, retry_after=7.0) == 7.0
    assert backoff_delay(3, 1.0, 60.0, retry_after=0.5) == 4.0  # never less than ours
    assert backoff_delay(1, 1.0, 60.0, retry_after=120.0) == 120.0  # the provider outranks


def test_retry_after_is_read_off_any_exception_that_carries_a_sane_one() -> None:
    assert retry_after_of(ModelRetryError("x", status=429, retry_after=3)) == 3.0
    assert retry_after_of(ConnectionError("down")) is None
    bad = ModelRetryError("x")
    for odd in (float("nan"), float("inf"), -1.0, True, "7"):
        bad.retry_after = odd  # type: ignore[assignment]
        assert retry_after_of(bad) is None, odd


def test_every_worker_on_the_store_sees_the_retry_after(store: FileStore) -> None:
    submit(store, "r1", [Message("user", "hi")])
    note_failure(store, "r1", ModelRetryError("rate limited", status=429, retry_after=12.5))
    attempts = read_attempts(store, "r1")
    assert attempts is not None and attempts.retry_after == 12.5 and attempts.failures == 1


def test_failures_counted_before_retry_after_existed_still_read(store: FileStore) -> None:
    store.write_failures("r1", {"failures": 2, "signals": 0, "at": 5.0, "error": "x"})
    assert read_attempts(store, "r1") == Attempts(2, 0, 5.0, "x", None)


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


def agent(fake: FakeLLM) -> Agent:
    @tool
    def lookup_policy(topic: str) -> str:
        """Look up a policy."""
        return "needs a ticket"

    @tool(write=True, approve=False)
    def create_ticket(summary: str, requester: str) -> str:
        """File a ticket."""
        return "TICKET-1"

    tools = [lookup_policy, create_ticket]
    model = OpenAIModel("gpt-test", base_url=fake.openai_url, api_key="k")
    return Agent(AgentConfig(model, tools), gate_for(tools))


async def serve_until_completed(fake: FakeLLM, store: FileStore) -> None:
    worker = Worker(agent(fake), store, backoff=0.05, rescan=0.2)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        deadline = time.monotonic() + 15
        while view_store(store, "r1").status != RunStatus.COMPLETED:
            assert time.monotonic() < deadline, view_store(store, "r1").status
            await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 10)


async def test_a_worker_waits_out_a_429s_retry_after_before_calling_the_model_again(
    fake: FakeLLM, store: FileStore
) -> None:
    fake.push(Canned(429, {"error": {"message": "Rate limit reached"}}, {"retry-after": "1.2"}))
    submit(store, "r1", [Message("user", "billing access")])
    await serve_until_completed(fake, store)
    first, second = fake.requests[0], fake.requests[1]
    assert (first.turn, second.turn) == (1, 1)
    assert second.at - first.at >= 1.2  # our backoff alone would have been 0.05 s
    assert fake.turns() == {1: 2, 2: 1, 3: 1}


async def test_without_a_retry_after_the_worker_keeps_its_own_short_backoff(
    fake: FakeLLM, store: FileStore
) -> None:
    fake.push(Canned(500, {"error": {"message": "boom"}}))
    submit(store, "r1", [Message("user", "billing access")])
    await serve_until_completed(fake, store)
    assert fake.requests[1].at - fake.requests[0].at < 1.0
