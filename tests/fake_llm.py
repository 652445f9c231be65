"""A model provider on 127.0.0.1 for the tests: the real SDKs talk to it over a socket.

It speaks the documented JSON of OpenAI's Chat Completions (``POST /v1/chat/completions``,
tool calls with JSON-text arguments) and Anthropic's Messages (``POST /v1/messages``,
``tool_use`` blocks). What it answers:

- canned responses pushed with :meth:`FakeLLM.push` first (a 429 with Retry-After, a 500, a
  malformed body, a slow reply), in order;
- then its ``brain``: a function of the request (what the conversation holds) returning
  :class:`Say` or :class:`Call`, rendered in the request's API. The default brain is the
  helpdesk: look up the policy, file a ticket, then answer.

Every request is kept (``requests``), with its *turn*: one more than the assistant messages it
carries, so a test can count the calls made for each model step. ``hold(turn)`` keeps the
answer to that turn's requests back until ``release()``; the test learns that a held request
arrived through ``held``.

``python tests/fake_llm.py`` serves the helpdesk brain and prints its URL (for trying the
example by hand).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from durableagent import AgentConfig, Config, FileStore, Model, gate_for, tool


@dataclass(frozen=True)
class Say:
    """A final answer."""

    text: str


@dataclass(frozen=True)
class Call:
    """Tool calls: (name, arguments as the JSON text the model wrote), with optional text."""

    calls: tuple[tuple[str, str], ...]
    text: str = ""


@dataclass(frozen=True)
class Canned:
    """One fixed HTTP answer."""

    status: int = 200
    body: bytes | Any = b""  # bytes as they are; anything else is sent as JSON
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Request:
    """A request the server received."""

    api: str  # "openai" or "anthropic"
    body: dict[str, Any]
    headers: dict[str, str]
    turn: int
    tool_results: list[str]
    at: float = field(default_factory=time.monotonic)  # when it arrived


def helpdesk_brain(request: Request) -> Say | Call:
    """The helpdesk: look up the policy, file a ticket, answer with the ticket id."""
    results = request.tool_results
    if not results:
        return Call((("lookup_policy", json.dumps({"topic": "billing"})),))
    if len(results) == 1:
        args = {"summary": "billing dashboard access", "requester": "alex@example.com"}
        return Call((("create_ticket", json.dumps(args)),))
    return Say(f"Ticket filed: {results[-1]}")


def _openai_request(body: dict[str, Any]) -> tuple[int, list[str]]:
    messages = body.get("messages") or []
    assistants = sum(1 for m in messages if m.get("role") == "assistant")
    results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    return assistants + 1, results


def _anthropic_request(body: dict[str, Any]) -> tuple[int, list[str]]:
    turns = body.get("messages") or []
    assistants = sum(1 for t in turns if t.get("role") == "assistant")
    results = [
        str(b.get("content", ""))
        for t in turns
        if isinstance(t.get("content"), list)
        for b in t["content"]
        if b.get("type") == "tool_result"
    ]
    return assistants + 1, results


class FakeLLM:
    """The server; use as a context manager (it listens on an ephemeral port)."""

    def __init__(
        self,
        brain: Callable[[Request], Say | Call] = helpdesk_brain,
        usage: Callable[[Request], tuple[int, int]] | None = None,
    ) -> None:
        self.brain = brain
        # What each answer reports as (input, output) tokens; by default 100 a turn in and
        # 10 + turn out. ``served`` sums what every answer it made reported, including those
        # to a caller that died waiting: the provider's own bill.
        self.usage = usage
        self.served = 0
        self.requests: list[Request] = []
        self.model = "fake-model-2025-01"
        self._canned: list[Canned] = []
        self._lock = threading.Lock()
        self._hold_turn: int | None = None
        self._release = threading.Event()
        self.held = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # -- control ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The base URL for Anthropic; OpenAI's is ``url + "/v1"``."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    def push(self, *canned: Canned) -> None:
        """Answer the next requests with these, in order, before the brain answers again."""
        with self._lock:
            self._canned.extend(canned)

    def hold(self, turn: int) -> None:
        """Keep back the answer to every request of ``turn`` until :meth:`release`."""
        self._hold_turn = turn
        self._release.clear()
        self.held.clear()

    def release(self) -> None:
        self._hold_turn = None
        self._release.set()

    def turns(self) -> dict[int, int]:
        """How many requests each turn got."""
        counts: dict[int, int] = {}
        for r in self.requests:
            counts[r.turn] = counts.get(r.turn, 0) + 1
        return dict(sorted(counts.items()))

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    # -- answering -------------------------------------------------------------------------

    def _answer(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Canned:
        api = "anthropic" if path.endswith("/messages") else "openai"
        turn, results = (_anthropic_request if api == "anthropic" else _openai_request)(body)
        request = Request(api, body, headers, turn, results)
        with self._lock:
            self.requests.append(request)
            canned = self._canned.pop(0) if self._canned else None
        if canned is not None:
            return canned
        if self._hold_turn == turn:
            self.held.set()
            self._release.wait(60)
        reply = self.brain(request)
        n = len(self.requests)
        used = self.usage(request) if self.usage is not None else (100 * turn, 10 + turn)
        with self._lock:
            self.served += sum(used)
        if api == "anthropic":
            return Canned(body=self.anthropic_body(reply, n, turn, used))
        return Canned(body=self.openai_body(reply, n, turn, used))

    def openai_body(
        self, reply: Say | Call, n: int, turn: int, used: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        used = used or (100 * turn, 10 + turn)
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if isinstance(reply, Say):
            message["content"] = reply.text
            finish = "stop"
        else:
            message["content"] = reply.text or None
            message["tool_calls"] = [
                {
                    "id": f"call_{turn}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": args},
                }
                for i, (name, args) in enumerate(reply.calls)
            ]
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
            ],
            "usage": {
                "prompt_tokens": used[0],
                "completion_tokens": used[1],
                "total_tokens": sum(used),
            },
        }

    def anthropic_body(
        self, reply: Say | Call, n: int, turn: int, used: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        used = used or (100 * turn, 10 + turn)
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        if isinstance(reply, Call):
            blocks += [
                {
                    "type": "tool_use",
                    "id": f"toolu_{turn}_{i}",
                    "name": name,
                    "input": json.loads(args),
                }
                for i, (name, args) in enumerate(reply.calls)
            ]
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": "tool_use" if isinstance(reply, Call) else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": used[0], "output_tokens": used[1]},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without this, Nagle's algorithm and the
            # client's delayed ACK add ~40 ms to every reply.
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                canned = fake._answer(
                    self.path, body, {k.lower(): v for k, v in self.headers.items()}
                )
                if canned.delay:
                    time.sleep(canned.delay)
                raw = (
                    canned.body
                    if isinstance(canned.body, bytes)
                    else json.dumps(canned.body).encode()
                )
                try:
                    self.send_response(canned.status)
                    headers = {"content-type": "application/json", **canned.headers}
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout, a killed worker)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


if __name__ == "__main__":
    with FakeLLM() as fake:
        print(
            f"OPENAI_BASE_URL={fake.openai_url}  (Anthropic: {fake.url}); Ctrl-C stops", flush=True
        )
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


def helpdesk_tools(filed: list[str]) -> list[Any]:
    """The adapters' tests' agent tools: a read, and a write that appends to ``filed``."""

    @tool
    def lookup_policy(topic: str) -> str:
        """Look up the helpdesk policy on a topic."""
        return f"{topic}: access needs a ticket"

    @tool(write=True, approve=False)
    def create_ticket(summary: str, requester: str) -> str:
        """File a ticket."""
        filed.append(summary)
        return f"TICKET-{len(filed)}"

    return [lookup_policy, create_ticket]


def helpdesk_config(model: Model, store: FileStore, filed: list[str]) -> Config:
    """A run of the helpdesk tools on ``model``, gated as the tools declare."""
    tools = helpdesk_tools(filed)
    agent = AgentConfig(model, tools, system="You are a helpdesk agent.")
    return Config(agent, gate_for(tools), store)
