"""mcp_tools: an MCP server's tools as durable steps, classified by their annotations when the
server is trusted. The servers are real: ``_mcp_server.py`` (the official SDK's MCPServer) in
a subprocess, over stdio or streamable HTTP on 127.0.0.1, counting what it sees on disk."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import mcp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp_support import HttpServer, keys, kill_servers, lines, stdio

from durableagent import (
    AgentConfig,
    AgentStartError,
    Config,
    FileStore,
    Message,
    Model,
    Reconcile,
    RunStatus,
    ScriptedModel,
    Status,
    Tool,
    ToolCall,
    ToolNameCollisionError,
    ToolPolicyError,
    gate_for,
    mcp_tools,
    run,
    signal,
    submit,
    view_store,
)
from durableagent.journal import idempotency_key
from durableagent.record import STEP_COMPLETED, STEP_STARTED
from durableagent.tools.mcp import classify, result_of
from durableagent.worker import Agent, Worker

ASK = [Message("user", "help me")]


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[Path]:
    """Where the test server counts; every server started on it is killed at the end."""
    folder = tmp_path / "server"
    folder.mkdir()
    yield folder
    kill_servers(folder)


def calls_then_answer(*calls: ToolCall) -> Callable[[Sequence[Message]], Message]:
    """A model that asks ``calls`` in one turn, then answers with their results."""

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message("assistant", tool_calls=calls)
        return Message("assistant", " | ".join(m.content for m in done))

    return reply


def config(store: FileStore, tools: list[Tool], model: Model | Callable[..., Message]) -> Config:
    scripted = model if hasattr(model, "complete") else ScriptedModel(model)
    return Config(AgentConfig(scripted, tools), gate_for(tools), store)  # type: ignore[arg-type]


def started(store: FileStore, run_id: str, step: str) -> dict[str, Any]:
    """The data of the step's latest step.started record."""
    return [r.data for r in store.load(run_id) if r.type == STEP_STARTED and r.step == step][-1]


def key_of(store: FileStore, run_id: str, step: str) -> str:
    return idempotency_key(run_id, step, store.load(run_id)[0])


def agentrun(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


# -- the classification -----------------------------------------------------------------

A = ToolAnnotations
CLASSES = [
    # annotations, trusted → write, approve, idempotent, classified_by
    (A(read_only_hint=True), False, (True, True, False, "default")),
    (None, False, (True, True, False, "default")),
    (A(read_only_hint=True), True, (False, False, False, "annotation")),
    (A(read_only_hint=True, destructive_hint=True), True, (False, False, False, "annotation")),
    (A(destructive_hint=False), True, (True, False, False, "annotation")),
    (A(destructive_hint=False, idempotent_hint=True), True, (True, False, True, "annotation")),
    (A(idempotent_hint=True), True, (True, True, True, "annotation")),
    (A(read_only_hint=False), True, (True, True, False, "annotation")),
    (A(title="Search", open_world_hint=True), True, (True, True, False, "default")),
    (None, True, (True, True, False, "default")),
]


@pytest.mark.parametrize(("annotations", "trusted", "expected"), CLASSES)
def test_the_classification_table(
    annotations: ToolAnnotations | None, trusted: bool, expected: tuple[bool, bool, bool, str]
) -> None:
    c = classify(annotations, trusted=trusted)
    assert (c.write, c.approve, c.idempotent, c.classified_by) == expected


hints = st.one_of(st.none(), st.booleans())
any_annotations = st.one_of(
    st.none(),
    st.builds(
        ToolAnnotations,
        read_only_hint=hints,
        destructive_hint=hints,
        idempotent_hint=hints,
        open_world_hint=hints,
        title=st.one_of(st.none(), st.text(max_size=10)),
    ),
)
class_overrides = st.dictionaries(
    st.sampled_from(["write", "approve", "idempotent"]), st.booleans(), max_size=3
)


@settings(deadline=None, max_examples=200)
@given(annotations=any_annotations)
def test_an_untrusted_server_says_nothing_the_gate_uses(annotations: Any) -> None:
    c = classify(annotations, trusted=False)
    assert (c.write, c.approve, c.idempotent, c.classified_by) == (True, True, False, "default")


@settings(deadline=None, max_examples=300)
@given(annotations=any_annotations, trusted=st.booleans(), override=class_overrides)
def test_overrides_win_key_by_key_and_say_so(
    annotations: Any, trusted: bool, override: dict[str, bool]
) -> None:
    derived = classify(annotations, trusted=trusted)
    try:
        c = classify(annotations, trusted=trusted, override=override)
    except ToolPolicyError as e:  # the one override that makes no sense: an idempotent read
        merged = {**derived.__dict__, **override}
        assert merged["idempotent"] and not merged["write"] and "idempotent" in str(e)
        return
    for key in ("write", "approve", "idempotent"):
        assert getattr(c, key) == override.get(key, getattr(derived, key))
    assert c.classified_by == ("override" if override else derived.classified_by)
    # Whatever is said, a read is never idempotent and an annotation never overrules trust.
    assert c.write or not c.idempotent


def test_a_gate_written_by_hand_that_overrules_a_tool_says_so() -> None:
    from durableagent import PolicyGate
    from durableagent.gate import describe_policy, policy_source

    t = Tool("wipe", write=True, classified_by="default", origin="MCP server 's'", about="x")
    assert policy_source(t, gate_for([t])) == "default"
    assert describe_policy(t, gate_for([t])) == (
        "write, needs approval · class from default · MCP server 's' · x"
    )
    assert policy_source(t, PolicyGate(writes={"wipe"}, approve=())) == "gate"
    assert describe_policy(Tool("mine", write=True), gate_for([])) == ""  # declared in code


def test_an_override_that_makes_no_sense_is_refused_before_any_call(srv: Path) -> None:
    async def main() -> None:
        async with mcp.Client(stdio(srv)) as client:
            for overrides, why in [
                ({"lookup": {"idempotent": True}}, "idempotent applies to writes"),
                ({"lookup": {"readonly": True}}, "unknown 'readonly'"),
                ({"lookup": {"write": "no"}}, "write must be True or False"),
            ]:
                with pytest.raises(ToolPolicyError, match=why):
                    await mcp_tools(client, trust_annotations=True, overrides=overrides)

    asyncio.run(main())
    assert lines(srv, "calls") == []


def test_a_result_is_its_text_blocks_and_a_placeholder_for_the_rest() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    result = CallToolResult(
        content=[
            TextContent(text="first"),
            ImageContent(data=png, mime_type="image/png"),
            AudioContent(data=base64.b64encode(b"abc").decode(), mime_type="audio/wav"),
            ResourceLink(uri="file:///r.txt", name="r", size=12),
            EmbeddedResource(resource=TextResourceContents(uri="file:///t", text="hello")),
            EmbeddedResource(resource=BlobResourceContents(uri="file:///b", blob=png)),
            TextContent(text="last"),
        ],
        is_error=True,
    )
    assert result_of(result).content.splitlines() == [
        "first",
        "[image image/png, 100 bytes]",
        "[audio audio/wav, 3 bytes]",
        "[resource link file:///r.txt, 12 bytes]",
        "[resource file:///t, 5 characters of text]",
        "[resource file:///b, 100 bytes]",
        "last",
    ]
    assert result_of(result).is_error
    structured = CallToolResult(content=[], structured_content={"id": 7})
    assert result_of(structured).content == '{"id": 7}'


# -- two servers ------------------------------------------------------------------------


def search_server(name: str) -> MCPServer:
    app = MCPServer(name, log_level="WARNING")

    @app.tool(annotations=ToolAnnotations(read_only_hint=True))
    def search(query: str) -> str:
        """Search."""
        return f"{name}: {query}"

    return app


async def test_two_servers_offering_one_tool_name_are_refused_naming_both() -> None:
    model = ScriptedModel([Message("assistant", "done")])
    async with mcp.Client(search_server("crm")) as crm, mcp.Client(search_server("files")) as fs:
        both = await mcp_tools(crm) + await mcp_tools(fs)
        with pytest.raises(ToolNameCollisionError) as refused:
            AgentConfig(model, both)
        message = str(refused.value)
        assert "'search'" in message and "MCP server 'crm'" in message
        assert "MCP server 'files'" in message and "prefix" in message
        # A prefix tells them apart.
        apart = await mcp_tools(crm, prefix="crm_") + await mcp_tools(fs)
        assert sorted(t.name for t in AgentConfig(model, apart).tools) == ["crm_search", "search"]

    def search(args: dict[str, Any]) -> str:
        return "ours"

    with pytest.raises(ToolNameCollisionError, match=r"function .*search"):
        AgentConfig(model, [*both[1:], Tool("search", fn=search)])


# -- stdio ------------------------------------------------------------------------------


async def test_a_stdio_servers_tools_are_durable_steps_with_the_key_in_meta(
    srv: Path, store: FileStore
) -> None:
    reply = calls_then_answer(
        ToolCall("a", "lookup", {"topic": "vpn"}),
        ToolCall("b", "file_ticket", {"summary": "vpn broken"}),
    )
    async with mcp.Client(stdio(srv)) as client:
        tools = await mcp_tools(client, trust_annotations=True)
        listed = {t.name: t for t in (await client.list_tools()).tools}
        # Name, description and input schema reach the model unchanged.
        for t in tools:
            assert (t.description, t.parameters) == (
                listed[t.name].description,
                listed[t.name].input_schema,
            )
        outcome = await run(config(store, tools, reply), "r1", ASK)
        assert outcome.status == Status.COMPLETED
        assert outcome.message is not None
        assert outcome.message.content == "policy for vpn: file a ticket | TICKET-1"

        # Each call carried its step's idempotency key, the read too.
        assert keys(srv, "lookup") == [key_of(store, "r1", "tool/1/0/lookup")]
        assert keys(srv, "file_ticket") == [key_of(store, "r1", "tool/1/1/file_ticket")]
        assert started(store, "r1", "tool/1/0/lookup") == {
            "write": False,
            "classified_by": "annotation",
        }
        ticket = started(store, "r1", "tool/1/1/file_ticket")
        assert (ticket["write"], ticket["idempotent"], ticket["classified_by"]) == (
            True,
            True,
            "annotation",
        )
        assert "MCP server 'test-tickets'" in ticket["hint"]

        # A completed run replays: the server is not called again.
        again = await run(config(store, tools, reply), "r1", ASK)
        assert again.message == outcome.message
        assert len(lines(srv, "calls")) == 2

    shown = agentrun("show", "r1", "--store", str(store.root))
    assert shown.returncode == 0, shown.stderr
    assert (
        "tool/1/0/lookup" in shown.stdout and "read started (class from annotation)" in shown.stdout
    )
    assert "idempotent write started (class from annotation)" in shown.stdout
    steps = json.loads(agentrun("show", "r1", "--json", "--store", str(store.root)).stdout)
    assert {s["name"]: s["classified_by"] for s in steps["step_views"]} == {
        "llm/1": "",
        "tool/1/0/lookup": "annotation",
        "tool/1/1/file_ticket": "annotation",
        "llm/2": "",
    }


async def test_an_untrusted_server_waits_for_a_human_on_every_tool_and_says_why(
    srv: Path, store: FileStore
) -> None:
    reply = calls_then_answer(
        ToolCall("a", "lookup", {"topic": "vpn"}),
        ToolCall("b", "file_ticket", {"summary": "vpn broken"}),
    )
    async with mcp.Client(stdio(srv)) as client:
        tools = await mcp_tools(client, overrides={"lookup": {"write": False, "approve": False}})
        cfg = config(store, tools, reply)
        outcome = await run(cfg, "r1", ASK)
        assert outcome.status == Status.AWAITING_APPROVAL
        (pending,) = view_store(store, "r1").pending  # the read, by override, waits for nobody
        assert pending.tool == "file_ticket"
        assert pending.policy == (
            "write, needs approval · class from default · MCP server 'test-tickets' · "
            '"File a ticket", closed world'
        )
        assert lines(srv, "calls") == []  # nothing ran before the human decided

        shown = agentrun("show", "r1", "--store", str(store.root))
        assert "class      write, needs approval · class from default" in shown.stdout

        signal(store, "r1", "approve", {"marker": pending.marker}, by="alice")
        assert (await run(cfg, "r1", None)).status == Status.COMPLETED
    assert started(store, "r1", "tool/1/0/lookup")["classified_by"] == "override"
    assert started(store, "r1", "tool/1/1/file_ticket") == {
        "write": True,
        "hint": "ask MCP server 'test-tickets' whether file_ticket ran (it was sent this step's "
        "idempotency key)",
        "classified_by": "default",
    }
    assert [line.split()[0] for line in lines(srv, "effects")] == ["file_ticket"]


async def test_an_is_error_answer_is_a_result_the_model_reads(srv: Path, store: FileStore) -> None:
    seen: list[str] = []

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message("assistant", tool_calls=(ToolCall("a", "fail", {"reason": "no"}),))
        seen.append(done[0].content)
        return Message("assistant", "sorry")

    async with mcp.Client(stdio(srv)) as client:
        tools = await mcp_tools(client, trust_annotations=True)
        assert (await run(config(store, tools, reply), "r1", ASK)).status == Status.COMPLETED
    recorded = [r.data for r in store.load("r1") if r.step == "tool/1/0/fail"][-1]
    assert recorded["is_error"] is True and "cannot do that: no" in recorded["content"]
    assert seen == [recorded["content"]]


async def test_a_call_that_times_out_leaves_the_step_open(srv: Path, store: FileStore) -> None:
    """A read that times out is run again on the next attempt, with the same key; a write
    that times out may have happened on the server: the run stops as indeterminate."""
    (srv / "hold-send_note").touch()  # the note is sent, then its answer never comes
    async with mcp.Client(stdio(srv)) as client:
        tools = await mcp_tools(client, trust_annotations=True, timeout=0.5)
        slow = calls_then_answer(ToolCall("a", "slow", {"seconds": 3}))
        with pytest.raises(Exception, match="MCP server 'test-tickets' gave no answer to slow"):
            await run(config(store, tools, slow), "read", ASK)
        assert view_store(store, "read").status == RunStatus.FAILED
        assert "gave no answer to slow" in view_store(store, "read").error

        note = calls_then_answer(ToolCall("a", "send_note", {"to": "bo", "text": "hi"}))
        with pytest.raises(Exception, match="gave no answer to send_note"):
            await run(config(store, tools, note), "write", ASK)
        view = view_store(store, "write")
        assert view.status == RunStatus.INDETERMINATE
        assert view.indeterminate is not None and view.indeterminate.classified_by == "annotation"
        sent = key_of(store, "write", "tool/1/0/send_note")
        assert lines(srv, "effects") == [f"send_note {sent}"]

        # The next attempt of the read asks the server again, with the same key.
        fast = await mcp_tools(client, trust_annotations=True, timeout=10)
        (srv / "release-send_note").touch()
        with pytest.raises(Exception, match="gave no answer to slow"):
            await run(config(store, tools, slow), "read", None)
        assert keys(srv, "slow") == [key_of(store, "read", "tool/1/0/slow")] * 2
        assert (await run(config(store, fast, slow), "read", None)).status == Status.COMPLETED


async def test_a_tool_that_disappears_between_attempts_is_an_error_or_stops_the_run(
    srv: Path, store: FileStore
) -> None:
    reply = calls_then_answer(ToolCall("a", "send_note", {"to": "bo", "text": "hi"}))
    held = {"send_note": {"approve": True}}
    async with mcp.Client(stdio(srv)) as client:
        tools = await mcp_tools(client, trust_annotations=True, overrides=held)
        assert (await run(config(store, tools, reply), "gone", ASK)).status == (
            Status.AWAITING_APPROVAL
        )
        assert (await run(config(store, tools, reply), "stale", ASK)).status == (
            Status.AWAITING_APPROVAL
        )
        # While the old tools are still in use, the server stops offering send_note.
        retire = next(t for t in tools if t.name == "retire")
        await retire.call({"name": "send_note"})
        for run_id in ("gone", "stale"):
            (p,) = view_store(store, run_id).pending
            signal(store, run_id, "approve", {"marker": p.marker}, by="alice")
        # An agent holding the old listing: the server answers that it has no such tool.
        stale = await run(config(store, tools, reply), "stale", None)
        assert stale.status == Status.COMPLETED and stale.message is not None
        assert "send_note" in stale.message.content
        (result,) = [
            r.data
            for r in store.load("stale")
            if r.type == STEP_COMPLETED and "/" in r.step and r.step.endswith("send_note")
        ]
        assert result["is_error"] is True and "Unknown tool" in result["content"]

    # A worker started since: the approved call's tool is not in its listing. The run stops
    # before any step as incompatible (a deploy's rule, docs/deploys.md), naming the call:
    # never run, never answered behind the human's back.
    async with mcp.Client(stdio(srv, "v2")) as client:
        now = await mcp_tools(client, trust_annotations=True, overrides=held)
        assert "send_note" not in {t.name for t in now}
        gone = await run(config(store, now, reply), "gone", None)
        assert gone.status == Status.INCOMPATIBLE
        view = view_store(store, "gone")
        assert view.status == RunStatus.INCOMPATIBLE and "send_note" in view.waiting_on
    assert lines(srv, "effects") == []


class SeesTools:
    """A scripted model that also keeps the tools it was offered at each call."""

    def __init__(self, reply: Callable[[Sequence[Message]], Message]) -> None:
        self.reply = reply
        self.offered: list[dict[str, Tool]] = []

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        self.offered.append({t.name: t for t in tools})
        return self.reply(messages)


async def test_a_tool_whose_schema_changed_replays_its_record_and_is_called_anew(
    srv: Path, store: FileStore
) -> None:
    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if len(done) == 0:
            return Message("assistant", tool_calls=(ToolCall("a", "lookup", {"topic": "vpn"}),))
        if len(done) == 1:
            call = ToolCall("b", "file_ticket", {"summary": "vpn"})
            return Message("assistant", tool_calls=(call,))
        if len(done) == 2:
            call = ToolCall("c", "lookup", {"topic": "vpn", "lang": "fr"})
            return Message("assistant", tool_calls=(call,))
        return Message("assistant", " | ".join(m.content for m in done))

    held = {"file_ticket": {"approve": True}}
    async with mcp.Client(stdio(srv)) as client:
        tools = await mcp_tools(client, trust_annotations=True, overrides=held)
        model = SeesTools(reply)
        assert (await run(config(store, tools, model), "r1", ASK)).status == (
            Status.AWAITING_APPROVAL
        )
        assert model.offered[0]["lookup"].parameters["required"] == ["topic"]
    (p,) = view_store(store, "r1").pending
    signal(store, "r1", "approve", {"marker": p.marker}, by="alice")

    async with mcp.Client(stdio(srv, "v2")) as client:
        tools = await mcp_tools(client, trust_annotations=True, overrides=held)
        model = SeesTools(reply)
        outcome = await run(config(store, tools, model), "r1", None)
    assert outcome.status == Status.COMPLETED and outcome.message is not None
    # The recorded lookup replayed (the server saw it once, under v1); the new call of turn 3
    # was made with the schema the server offers now.
    assert keys(srv, "lookup") == [
        key_of(store, "r1", "tool/1/0/lookup"),
        key_of(store, "r1", "tool/3/0/lookup"),
    ]
    assert model.offered[0]["lookup"].parameters["required"] == ["topic", "lang"]
    assert outcome.message.content.split(" | ") == [
        "policy for vpn: file a ticket",
        "TICKET-1",
        "policy for vpn (fr): file a ticket",
    ]


# -- streamable HTTP --------------------------------------------------------------------


@pytest.fixture
def http(srv: Path) -> Iterator[HttpServer]:
    server = HttpServer(srv).start()
    yield server
    server.stop()


async def test_a_streamable_http_server_through_a_client_session(
    http: HttpServer, srv: Path, store: FileStore
) -> None:
    async with (
        streamable_http_client(http.url) as (read, write),
        mcp.ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = await mcp_tools(session, trust_annotations=True, prefix="desk_")
        assert {t.name for t in tools} >= {"desk_lookup", "desk_file_ticket"}
        prefixed = calls_then_answer(
            ToolCall("a", "desk_lookup", {"topic": "crm"}),
            ToolCall("b", "desk_file_ticket", {"summary": "crm"}),
        )
        outcome = await run(config(store, tools, prefixed), "r1", ASK)
    assert outcome.status == Status.COMPLETED and outcome.message is not None
    assert outcome.message.content == "policy for crm: file a ticket | TICKET-1"
    assert keys(srv, "lookup") == [key_of(store, "r1", "tool/1/0/desk_lookup")]
    assert keys(srv, "file_ticket") == [key_of(store, "r1", "tool/1/1/desk_file_ticket")]


async def wait_until(what: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_server_that_goes_down_fails_the_read_stops_the_write_and_never_the_worker(
    http: HttpServer, srv: Path, store: FileStore
) -> None:
    """The server dies while a read and a write are inside it. The read is run again, with
    the same key, once the server is back; the write (it happened) waits for a human. The
    worker lives through it and connects again by itself."""

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if done:
            return Message("assistant", done[0].content)
        if messages[0].content == "read":
            return Message("assistant", tool_calls=(ToolCall("a", "lookup", {"topic": "vpn"}),))
        call = ToolCall("a", "send_note", {"to": "bo", "text": "hi"})
        return Message("assistant", tool_calls=(call,))

    @contextlib.asynccontextmanager
    async def helpdesk() -> AsyncIterator[Agent]:
        async with mcp.Client(http.url) as client:
            tools = await mcp_tools(client, trust_annotations=True, timeout=10)
            yield Agent(AgentConfig(ScriptedModel(reply), tools), gate_for(tools))

    (srv / "hold-lookup").touch()
    (srv / "hold-send_note").touch()
    worker = Worker(helpdesk, store, rescan=0.2, backoff=0.2, max_attempts=5)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        submit(store, "read", [Message("user", "read")])
        submit(store, "write", [Message("user", "write")])
        await wait_until(lambda: (srv / "inside-lookup").exists())
        await wait_until(lambda: (srv / "inside-send_note").exists())
        http.stop()  # SIGKILL, both calls inside it
        await wait_until(lambda: view_store(store, "write").status == RunStatus.INDETERMINATE)
        await wait_until(lambda: "gave no answer to lookup" in view_store(store, "read").error)
        assert "MCP server 'test-tickets'" in view_store(store, "read").error
        await asyncio.sleep(0.5)  # the worker tries to connect again, and cannot
        assert not serving.done()

        http.start()  # the same port
        await wait_until(lambda: view_store(store, "read").status == RunStatus.COMPLETED)
        read_step = key_of(store, "read", "tool/1/0/lookup")
        assert keys(srv, "lookup") == [read_step, read_step]
        assert view_store(store, "write").status == RunStatus.INDETERMINATE
        note_key = key_of(store, "write", "tool/1/0/send_note")
        assert lines(srv, "effects") == [f"send_note {note_key}"]  # it did happen
        signal(store, "write", "reconcile", Reconcile("tool/1/0/send_note", "done", "sent"))
        await wait_until(lambda: view_store(store, "write").status == RunStatus.COMPLETED)
        assert len(lines(srv, "effects")) == 1
    finally:
        stop.set()
        await asyncio.wait_for(serving, 15)


async def test_a_server_that_is_down_when_the_worker_starts_is_said_before_any_run(
    store: FileStore,
) -> None:
    @contextlib.asynccontextmanager
    async def unreachable() -> AsyncIterator[Agent]:
        async with mcp.Client("http://127.0.0.1:9/mcp") as client:  # the discard port
            tools = await mcp_tools(client)
            yield Agent(AgentConfig(ScriptedModel([]), tools), gate_for(tools))

    submit(store, "r1", ASK)
    worker = Worker(unreachable, store, rescan=0.2)
    with pytest.raises(AgentStartError, match="the agent did not start: ConnectError"):
        await asyncio.wait_for(worker.serve(asyncio.Event()), 30)
    assert view_store(store, "r1").status == RunStatus.READY and len(store.load("r1")) == 1


async def test_a_stdio_server_that_dies_is_started_again_by_the_worker(
    srv: Path, store: FileStore
) -> None:
    """The server's process exits between two runs: the next call finds the connection
    closed (the read is not recorded), the worker connects again, starting a new server, and
    the read runs again there."""
    reply = calls_then_answer(ToolCall("a", "lookup", {"topic": "vpn"}))

    @contextlib.asynccontextmanager
    async def helpdesk() -> AsyncIterator[Agent]:
        async with mcp.Client(stdio(srv)) as client:
            tools = await mcp_tools(client, trust_annotations=True)
            yield Agent(AgentConfig(ScriptedModel(reply), tools), gate_for(tools))

    worker = Worker(helpdesk, store, rescan=0.2, backoff=0.1, max_attempts=5)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        submit(store, "first", ASK)
        await wait_until(lambda: view_store(store, "first").status == RunStatus.COMPLETED)
        kill_servers(srv)
        submit(store, "second", ASK)
        await wait_until(lambda: view_store(store, "second").status == RunStatus.COMPLETED)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 15)
    assert len(lines(srv, "pids")) == 2  # a second server, started by the worker
    started_twice = [r for r in store.load("second") if r.type == STEP_STARTED and "/" in r.step]
    assert [r.step for r in started_twice].count("tool/1/0/lookup") == 2
    assert keys(srv, "lookup") == [
        key_of(store, "first", "tool/1/0/lookup"),
        key_of(store, "second", "tool/1/0/lookup"),  # the first try never reached a server
    ]
