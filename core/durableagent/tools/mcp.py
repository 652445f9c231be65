"""Tools from MCP servers: every tool a server lists becomes a :class:`Tool` whose call is a
durable step like any other (extra ``mcp``: the official ``mcp`` SDK, 2.x).

``await mcp_tools(client)`` takes a connected ``mcp.Client`` or ``mcp.ClientSession`` (stdio,
streamable HTTP, in-process): the caller opens and closes the connection; the tools use it
while it is open. Each tool keeps the server's name (plus ``prefix``), description and input
schema unchanged. Its class (read or write, idempotent, needs approval) comes from
:func:`classify`, and where that class came from is recorded with every call:

==============================  =====  ========  ==========  =============
the server says (trusted)       write  approve   idempotent  classified_by
==============================  =====  ========  ==========  =============
anything, server untrusted      yes    yes       no          default
``readOnlyHint``                no     no        no          annotation
``destructiveHint: false``      yes    no        hint        annotation
otherwise (destructive)         yes    yes       hint        annotation
no hint at all                  yes    yes       no          default
==============================  =====  ========  ==========  =============

("hint": idempotent when ``idempotentHint`` is true.) ``overrides`` then win, key by key
(``classified_by`` becomes "override"). ``openWorldHint`` and the title are shown to the
human (``Tool.about``), never used by the gate.

Every call carries the step's idempotency key in its request's ``_meta``
(``{"durableagent/idempotency_key": key}``), reads included, so a server can deduplicate, and
the lease's fencing token (``{"durableagent/fence": {"run": run_id, "epoch": n}}``), so a
server can refuse a paused holder's late write. The
result is the text blocks joined with newlines (other blocks as a short placeholder naming
their type and size); ``isError`` is an error result the model reads. A call that gets no
answer (the server is down, the connection broke, the call timed out) raises
:class:`McpToolError`: the step is not recorded, so a read runs again on the next attempt,
an idempotent write runs again with the same key, and any other write stops the run as
indeterminate. When the connection itself is gone it is :class:`McpConnectionLostError`,
on which a worker connects its agent again (``holder.py``). A server that refuses the request
itself (JSON-RPC "invalid params" or
"method not found": a tool it no longer has, arguments its new schema rejects) did nothing,
so that is recorded as an error result too.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

try:
    import anyio
    import mcp
    from mcp.shared.exceptions import MCPError
except ImportError as e:  # say what to install, not only what is missing
    raise ImportError(
        f"durableagent.mcp_tools needs the mcp extra: pip install 'durableagent[mcp]' ({e})"
    ) from e

from ..errors import McpConnectionLostError, McpToolError, ToolPolicyError
from .base import Result, Tool, ToolContext

log = logging.getLogger("durableagent.mcp")

IDEMPOTENCY_KEY_META = "durableagent/idempotency_key"
"""The ``_meta`` member of every ``tools/call`` request that carries the step's key."""
FENCE_META = "durableagent/fence"
"""The ``_meta`` member that carries the lease's fencing token, ``{"run", "epoch"}``, on every
call of a leased run: a server that remembers the highest epoch per run and refuses lower ones
stops a paused holder's late write (see ToolContext.fence)."""

OVERRIDE_KEYS = ("write", "approve", "idempotent", "hint")
_CLASS_KEYS = ("write", "approve", "idempotent")
_INVALID_PARAMS = -32602  # JSON-RPC: the server refused the request; nothing ran
_METHOD_NOT_FOUND = -32601
_CONNECTION_CLOSED = -32000  # the SDK's: the connection is gone (a worker connects again)
_TITLE_MAX = 80  # a server's title is shown to a human on one line
_PAGES_MAX = 100  # a listing that never ends cannot hang the agent's start


@dataclass(frozen=True)
class Classification:
    """A tool's policy and where it came from (see the module's table)."""

    write: bool
    approve: bool
    idempotent: bool
    classified_by: str


def classify(
    annotations: Any,
    *,
    trusted: bool,
    override: Mapping[str, Any] | None = None,
) -> Classification:
    """The class of a tool with these MCP ``annotations`` (an SDK ``ToolAnnotations``, a
    dict with the wire's camelCase names, or None). Untrusted, the annotations are ignored:
    every tool is a write that needs approval. ``override`` (any of ``write``, ``approve``,
    ``idempotent``) wins over what was derived. Raises ToolPolicyError for an override that
    makes no sense (an idempotent read, a value that is not a bool, an unknown key)."""
    read_only = _hint(annotations, "readOnlyHint")
    destructive = _hint(annotations, "destructiveHint")
    idempotent_hint = _hint(annotations, "idempotentHint")
    if not trusted:
        write, approve, idempotent, source = True, True, False, "default"
    elif read_only is True:
        write, approve, idempotent, source = False, False, False, "annotation"
    else:
        said = read_only is not None or destructive is not None or idempotent_hint is not None
        write = True
        approve = destructive is not False  # MCP's default: destructive
        idempotent = idempotent_hint is True
        source = "annotation" if said else "default"
    given = {k: v for k, v in (override or {}).items() if k in _CLASS_KEYS}
    if given:
        write = given.get("write", write)
        approve = given.get("approve", approve)
        idempotent = given.get("idempotent", idempotent)
        source = "override"
        if idempotent and not write:
            raise ToolPolicyError(
                "idempotent applies to writes (a read is always run again): override "
                "write=True too, or drop idempotent"
            )
    return Classification(write, approve, idempotent, source)


def _hint(annotations: Any, wire_name: str) -> bool | None:
    """One boolean hint: True, False, or None when the server did not say."""
    if annotations is None:
        return None
    if isinstance(annotations, Mapping):
        value = annotations.get(wire_name)
    else:
        snake = "".join("_" + c.lower() if c.isupper() else c for c in wire_name)
        value = getattr(annotations, snake, None)
    return value if isinstance(value, bool) else None


async def mcp_tools(
    client: mcp.Client | mcp.ClientSession,
    *,
    trust_annotations: bool = False,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    prefix: str = "",
    timeout: float | None = None,
) -> list[Tool]:
    """The tools of the MCP server behind ``client`` (an entered ``mcp.Client``, or an
    initialized ``mcp.ClientSession``), as durable :class:`Tool` objects.

    ``trust_annotations``: derive each tool's class from its annotations (else every tool is
    a write that needs approval). ``overrides`` maps a tool's name (the server's, or with
    ``prefix``) to any of ``write``, ``approve``, ``idempotent`` (bools: merged over what was
    derived) and ``hint`` (where a human checks whether an unfinished write happened).
    ``prefix`` is put before every name (two servers with a ``search`` each: ``prefix="crm_"``).
    ``timeout``: seconds a call may take before it counts as failed (None: the client's own
    read timeout). The tools call through ``client``: keep it open while they are used."""
    wanted: dict[str, Mapping[str, Any]] = dict(overrides or {})
    for name, given in wanted.items():
        unknown = sorted(set(given) - set(OVERRIDE_KEYS))
        if unknown:
            raise ToolPolicyError(
                f"overrides for {name!r}: unknown {', '.join(map(repr, unknown))}; use "
                + ", ".join(OVERRIDE_KEYS)
            )
        for key in _CLASS_KEYS:
            if key in given and not isinstance(given[key], bool):
                raise ToolPolicyError(f"overrides for {name!r}: {key} must be True or False")
        if "hint" in given and not isinstance(given["hint"], str):
            raise ToolPolicyError(f"overrides for {name!r}: hint must be a str")
    server = _server_name(client)
    tools: list[Tool] = []
    used: set[str] = set()
    for listed in await _list_tools(client):
        name = prefix + listed.name
        key = listed.name if listed.name in wanted else name
        override = wanted.get(key)
        if override is not None:
            used.add(key)
        try:
            c = classify(listed.annotations, trusted=trust_annotations, override=override)
        except ToolPolicyError as e:
            raise ToolPolicyError(f"overrides for {key!r}: {e}") from None
        hint = override.get("hint") if override is not None else None
        tools.append(
            Tool(
                name,
                listed.description or "",
                listed.input_schema,
                _caller(client, server, listed.name, timeout),
                write=c.write,
                approve=c.approve,
                idempotent=c.idempotent,
                hint=hint if isinstance(hint, str) else _default_hint(server, listed.name),
                classified_by=c.classified_by,
                origin=f"MCP server {server!r}",
                about=_about(listed),
            )
        )
    for key in sorted(set(wanted) - used):
        # Not an error: a tool may leave its server between two starts of a worker, and the
        # agent must still start (the model simply no longer sees it).
        log.warning("MCP server %r lists no tool %r; its override is not used", server, key)
    return tools


def _server_name(client: Any) -> str:
    info = getattr(client, "server_info", None)
    name = getattr(info, "name", None)
    return name if isinstance(name, str) and name else "unnamed"


async def _list_tools(client: mcp.Client | mcp.ClientSession) -> list[Any]:
    """Every tool of the server, page by page, as the server says now (never a cached
    listing: a tool that changed its schema is sent to the model as it is now)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(_PAGES_MAX):
        if isinstance(client, mcp.Client):
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        else:
            params = mcp.types.PaginatedRequestParams(cursor=cursor)
            page = await client.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _default_hint(server: str, tool: str) -> str:
    return f"ask MCP server {server!r} whether {tool} ran (it was sent this step's idempotency key)"


def _about(listed: Any) -> str:
    """The title and world the server gives the tool, for the human (never for the gate)."""
    annotations = listed.annotations
    title = listed.title or getattr(annotations, "title", None)
    parts = []
    if isinstance(title, str) and title.strip():
        title = " ".join(title.split())
        if len(title) > _TITLE_MAX:
            title = title[: _TITLE_MAX - 1] + "…"
        parts.append(f'"{title}"')
    world = _hint(annotations, "openWorldHint")
    if world is not None:
        parts.append("open world" if world else "closed world")
    return ", ".join(parts)


def _caller(
    client: mcp.Client | mcp.ClientSession, server: str, tool: str, timeout: float | None
) -> Callable[[dict[str, Any], ToolContext], Awaitable[Result]]:
    """The Tool's function: one ``tools/call`` with the step's key in ``_meta``."""

    async def call(arguments: dict[str, Any], ctx: ToolContext) -> Result:
        meta: Any = {IDEMPOTENCY_KEY_META: ctx.idempotency_key}  # the SDK's open TypedDict
        if ctx.fence is not None:
            meta[FENCE_META] = {"run": ctx.fence[0], "epoch": ctx.fence[1]}
        try:
            result = await client.call_tool(
                tool, arguments, read_timeout_seconds=timeout, meta=meta
            )
        except MCPError as e:
            if e.code in (_INVALID_PARAMS, _METHOD_NOT_FOUND):
                # The server answered that it would not run the call: nothing happened, and
                # the model can read why (a tool that is gone, arguments it no longer takes).
                return Result(f"MCP server {server!r} refused the call: {e.message}", True)
            lost = e.code == _CONNECTION_CLOSED
            raise (McpConnectionLostError if lost else McpToolError)(server, tool, _why(e)) from e
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as e:
            raise McpConnectionLostError(server, tool, _why(e)) from e
        except Exception as e:  # any other way the call got no answer: the step is open
            raise McpToolError(server, tool, _why(e)) from e
        return result_of(result)

    return call


def _why(error: BaseException) -> str:
    text = str(error).strip() or "no detail"
    return f"{type(error).__name__}: {text}"


def result_of(result: Any) -> Result:
    """A ``CallToolResult`` as a Result: its text blocks joined with newlines, every other
    block as a placeholder naming its type and size; ``isError`` kept. A result with no
    content block but structured content gives that content as JSON."""
    parts = [_block_text(b) for b in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True))
    return Result("\n".join(parts), is_error=bool(result.is_error))


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", "?")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {block.mime_type}, {_base64_size(block.data)} bytes]"
    if kind == "resource_link":
        size = f", {block.size} bytes" if getattr(block, "size", None) is not None else ""
        return f"[resource link {block.uri}{size}]"
    if kind == "resource":
        inner = block.resource
        text = getattr(inner, "text", None)
        if isinstance(text, str):
            return f"[resource {inner.uri}, {len(text)} characters of text]"
        return f"[resource {inner.uri}, {_base64_size(getattr(inner, 'blob', ''))} bytes]"
    return f"[{kind} content]"


def _base64_size(data: str) -> int:
    """The size of base64 ``data`` once decoded (without decoding it)."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))
