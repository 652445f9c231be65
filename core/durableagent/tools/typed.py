"""``@tool``: a typed Python function becomes a :class:`Tool`.

The JSON schema the model sees comes from the signature (str, int, float, bool, None,
``list[...]``, ``dict[str, ...]``, ``Literal``, ``Optional``/``X | None``, unions, enums,
``TypedDict`` and dataclass arguments, ``Annotated[X, "description"]``; a default makes a
parameter optional) and from the docstring (its first paragraph describes the tool; a
Google-style ``Args:`` or numpy-style ``Parameters`` section describes the parameters).

The model's arguments are checked against the signature before the function is called: a
missing, unknown or mistyped argument becomes an error result naming every problem, which the
model reads on its next turn; the function is not called. Dataclass and enum arguments arrive
as instances. A parameter annotated :class:`ToolContext` receives the step's context and is not
part of the schema.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from .base import Result, Tool, ToolContext

NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what the providers accept as a function name


class _Bad(Exception):
    """One argument that does not fit its type (internal)."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"argument {path!r}: {problem}")


@dataclass(frozen=True)
class _Type:
    """A Python type as the model sees it (``schema``) and as the function receives it
    (``convert`` turns a JSON value into the Python value, or raises _Bad)."""

    schema: dict[str, Any]
    convert: Callable[[Any, str], Any]
    what: str  # how an error message names it: "an integer", "one of ..."


# -- the decorator --------------------------------------------------------------------------


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    write: bool = False,
    approve: bool | None = None,
    idempotent: bool = False,
    hint: str = "",
    approve_within: float | str | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    write: bool = False,
    approve: bool | None = None,
    idempotent: bool = False,
    hint: str = "",
    approve_within: float | str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a typed function a Tool: ``@tool``, ``@tool(write=True)``,
    ``@tool(write=True, approve=False)``, ``@tool(write=True, idempotent=True, hint="...")``,
    ``@tool(write=True, approve_within="2h")``.

    ``name`` defaults to the function's name, ``description`` to the docstring's first
    paragraph. ``write``, ``approve``, ``idempotent``, ``hint`` and ``approve_within`` (how
    long a call waits for a human before it is denied) are the tool's policy (see
    :class:`Tool`; :func:`durableagent.gate_for` builds the gate from it). The function may be
    sync (run in a thread) or async; it returns a str, a Result, or any JSON value (sent to the
    model as JSON text). It raises TypeError at once for a parameter type that has no JSON
    schema."""

    def build(f: Callable[..., Any]) -> Tool:
        t = _build(f, name, description, write, approve, idempotent, hint)
        if approve_within is not None:
            t = dataclasses.replace(t, approve_within=approve_within)
        return t

    return build if fn is None else build(fn)


def _build(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    write: bool,
    approve: bool | None,
    idempotent: bool,
    hint: str,
) -> Tool:
    tool_name: str = name or getattr(fn, "__name__", None) or ""
    if not NAME.fullmatch(tool_name):
        raise ValueError(
            f"@tool: {tool_name!r} is not a usable tool name: use 1 to 64 letters, digits, "
            "'_' or '-' (pass name=...)"
        )
    summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as e:
        raise TypeError(f"@tool {tool_name}: cannot resolve its annotations: {e}") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: dict[str, _Type] = {}
    ctx_param: str | None = None
    for p in inspect.signature(fn).parameters.values():
        where = f"@tool {tool_name}, parameter {p.name!r}"
        hint_type = hints.get(p.name, Any)
        if hint_type is ToolContext:
            ctx_param = p.name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{where}: use named parameters only (no *args, **kwargs or /)")
        t = _compile(hint_type, where, frozenset())
        schema = dict(t.schema)
        if p.name in arg_docs and "description" not in schema:
            schema["description"] = arg_docs[p.name]
        if p.default is p.empty:
            required.append(p.name)
        elif _is_json(p.default):
            schema["default"] = p.default
        properties[p.name] = schema
        params[p.name] = t
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return Tool(
        tool_name,
        summary if description is None else description,
        parameters,
        _caller(fn, tool_name, params, frozenset(required), ctx_param),
        write=write,
        approve=approve,
        idempotent=idempotent,
        hint=hint,
        origin=f"function {fn.__module__}.{fn.__qualname__}",
    )


def _caller(
    fn: Callable[..., Any],
    tool_name: str,
    params: Mapping[str, _Type],
    required: frozenset[str],
    ctx_param: str | None,
) -> Callable[..., Any]:
    """The Tool's function: check and convert the arguments, then call ``fn`` with them."""

    def bind(arguments: Any, ctx: ToolContext) -> dict[str, Any] | Result:
        if not isinstance(arguments, dict):
            return Result(f"invalid arguments for {tool_name}: expected an object", True)
        problems = [
            f"missing required argument {n!r}" for n in params if n in required - set(arguments)
        ]
        unknown = sorted(set(arguments) - set(params))
        if unknown:
            known = ", ".join(params) or "none"
            problems += [f"unknown argument {n!r} (its arguments: {known})" for n in unknown]
        kwargs: dict[str, Any] = {}
        for n, value in arguments.items():
            if n in params:
                try:
                    kwargs[n] = params[n].convert(value, n)
                except _Bad as e:
                    problems.append(str(e))
        if problems:
            return Result(f"invalid arguments for {tool_name}: " + "; ".join(problems), True)
        if ctx_param is not None:
            kwargs[ctx_param] = ctx
        return kwargs

    if inspect.iscoroutinefunction(fn):

        async def call_async(arguments: dict[str, Any], *, ctx: ToolContext) -> Result | str:
            kwargs = bind(arguments, ctx)
            if isinstance(kwargs, Result):
                return kwargs
            return _as_result(tool_name, await fn(**kwargs))

        return call_async

    def call(arguments: dict[str, Any], *, ctx: ToolContext) -> Result | str:
        kwargs = bind(arguments, ctx)
        if isinstance(kwargs, Result):
            return kwargs
        return _as_result(tool_name, fn(**kwargs))

    return call


def _as_result(tool_name: str, out: Any) -> Result | str:
    if isinstance(out, Result | str):
        return out
    if _is_json(out):
        return json.dumps(out, ensure_ascii=False)
    raise TypeError(
        f"tool {tool_name!r} returned {type(out).__name__}; return a str, a Result or a JSON value"
    )


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


# -- types to schemas and converters --------------------------------------------------------


def _kind(value: Any) -> str:
    """A JSON value's type, as an error message names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 40 else text[:39] + "…"


def _got(what: str, value: Any, path: str) -> _Bad:
    return _Bad(path, f"expected {what}, got {_kind(value)} {_shown(value)}")


def _simple(what: str, json_type: str, check: Callable[[Any], Any]) -> _Type:
    """A scalar type: ``check`` returns the Python value, or raises ValueError."""

    def convert(v: Any, path: str) -> Any:
        try:
            return check(v)
        except ValueError:
            raise _got(what, v, path) from None

    return _Type({"type": json_type}, convert, what)


def _check_null(v: Any) -> None:
    if v is not None:
        raise ValueError
    return None


def _check_boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError
    return v


def _check_integer(v: Any) -> int:
    # JSON has one number type: 3.0 is the integer 3 (JSON Schema counts it so, too).
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError
    return v


def _check_number(v: Any) -> float:
    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
        raise ValueError
    return float(v)


def _check_string(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError
    return v


_SCALARS = {
    type(None): _simple("null", "null", _check_null),
    bool: _simple("a boolean", "boolean", _check_boolean),
    int: _simple("an integer", "integer", _check_integer),
    float: _simple("a number", "number", _check_number),
    str: _simple("a string", "string", _check_string),
}
_ANY = _Type({}, lambda v, path: v, "any value")


def _compile(tp: Any, where: str, seen: frozenset[type]) -> _Type:
    """The schema and converter of one annotation; TypeError for one JSON cannot carry."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any or tp is inspect.Parameter.empty:
        return _ANY
    if tp is None:
        tp = type(None)
    if tp in _SCALARS:
        return _SCALARS[tp]
    if origin is typing.NotRequired or origin is typing.Required:  # a TypedDict's keys
        return _compile(args[0], where, seen)
    if origin is typing.Annotated:
        inner = _compile(args[0], where, seen)
        notes = [a for a in args[1:] if isinstance(a, str)]
        if not notes:
            return inner
        return _Type({**inner.schema, "description": " ".join(notes)}, inner.convert, inner.what)
    if origin is Literal:
        return _literal(args, where)
    if origin is typing.Union or origin is types.UnionType:
        return _union(args, where, seen)
    if origin in (list, Sequence, tuple) or tp in (list, tuple):
        return _array(tp, origin, args, where, seen)
    if origin in (dict, Mapping) or tp is dict:
        return _mapping(args, where, seen)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp, where)
    if typing.is_typeddict(tp):
        return _record(tp, where, seen, typeddict=True)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _record(tp, where, seen, typeddict=False)
    raise TypeError(
        f"{where}: type {getattr(tp, '__name__', tp)!r} has no JSON schema; use str, int, "
        "float, bool, list[...], dict[str, ...], Literal, Optional, an Enum, a TypedDict or a "
        "dataclass"
    )


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 and 1.0 are one number, but true is not 1 and "1" is not 1."""
    return _kind(a).replace("integer", "number") == _kind(b).replace("integer", "number") and a == b


def _literal(values: tuple[Any, ...], where: str) -> _Type:
    for v in values:
        if not (v is None or isinstance(v, str | int | float | bool)):
            raise TypeError(f"{where}: Literal values must be str, int, float, bool or None")
    schema: dict[str, Any] = {"enum": list(values)}
    kinds = {_kind(v) for v in values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    what = "one of " + ", ".join(_shown(v) for v in values)

    def convert(v: Any, path: str) -> Any:
        for choice in values:
            if _same(choice, v):
                return choice
        raise _Bad(path, f"expected {what}, got {_shown(v)}")

    return _Type(schema, convert, what)


def _union(args: tuple[Any, ...], where: str, seen: frozenset[type]) -> _Type:
    options = [_compile(a, where, seen) for a in args]
    what = " or ".join(o.what for o in options)

    # Optional[X] given something other than null: X's own complaint says more (tags[2]).
    values = [o for o in options if o is not _SCALARS[type(None)]]

    def convert(v: Any, path: str) -> Any:
        problems = []
        for o in options:
            try:
                return o.convert(v, path)
            except _Bad as e:
                problems.append(e)
        if v is not None and len(values) == 1:
            raise problems[options.index(values[0])]
        raise _got(what, v, path)

    return _Type({"anyOf": [o.schema for o in options]}, convert, what)


def _array(tp: Any, origin: Any, args: tuple[Any, ...], where: str, seen: frozenset[type]) -> _Type:
    as_tuple = tp is tuple or origin is tuple
    if as_tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        raise TypeError(f"{where}: use tuple[X, ...] (fixed-length tuples have no schema here)")
    item = _compile(args[0], where, seen) if args else _ANY
    schema: dict[str, Any] = {"type": "array"}
    if item.schema:
        schema["items"] = item.schema

    def convert(v: Any, path: str) -> Any:
        if not isinstance(v, list):
            raise _got("an array", v, path)
        out = [item.convert(x, f"{path}[{i}]") for i, x in enumerate(v)]
        return tuple(out) if as_tuple else out

    return _Type(schema, convert, "an array")


def _mapping(args: tuple[Any, ...], where: str, seen: frozenset[type]) -> _Type:
    if args and args[0] is not str:
        raise TypeError(f"{where}: JSON object keys are strings: use dict[str, ...]")
    value = _compile(args[1], where, seen) if args else _ANY
    schema: dict[str, Any] = {"type": "object"}
    if value.schema:
        schema["additionalProperties"] = value.schema

    def convert(v: Any, path: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise _got("an object", v, path)
        return {k: value.convert(x, f"{path}.{k}") for k, x in v.items()}

    return _Type(schema, convert, "an object")


def _enum(tp: type[enum.Enum], where: str) -> _Type:
    members = list(tp)
    inner = _literal(tuple(m.value for m in members), f"{where} ({tp.__name__})")

    def convert(v: Any, path: str) -> enum.Enum:
        value = inner.convert(v, path)
        return next(m for m in members if m.value == value)

    return _Type(inner.schema, convert, inner.what)


def _record(tp: Any, where: str, seen: frozenset[type], *, typeddict: bool) -> _Type:
    if tp in seen:
        raise TypeError(f"{where}: {tp.__name__} refers to itself; recursive types have no schema")
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as e:
        raise TypeError(f"{where}: cannot resolve the annotations of {tp.__name__}: {e}") from None
    if typeddict:
        names = list(hints)
        # From the resolved hints: under `from __future__ import annotations` Python 3.11
        # builds __required_keys__ from strings and misses NotRequired.
        required = {
            n
            for n, h in hints.items()
            if typing.get_origin(h) is typing.Required
            or (typing.get_origin(h) is not typing.NotRequired and n in tp.__required_keys__)
        }
    else:
        fields = [f for f in dataclasses.fields(tp) if f.init]
        names = [f.name for f in fields]
        required = {
            f.name
            for f in fields
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
    inner = {
        n: _compile(hints.get(n, Any), f"{where} ({tp.__name__}.{n})", seen | {tp}) for n in names
    }
    schema = {
        "type": "object",
        "properties": {n: t.schema for n, t in inner.items()},
        "required": [n for n in names if n in required],
        "additionalProperties": False,
    }
    what = f"an object ({tp.__name__})"

    def convert(v: Any, path: str) -> Any:
        if not isinstance(v, dict):
            raise _got(what, v, path)
        missing = [n for n in names if n in required and n not in v]
        if missing:
            raise _Bad(path, f"missing {', '.join(map(repr, missing))}")
        unknown = sorted(set(v) - set(inner))
        if unknown:
            raise _Bad(path, f"unknown {', '.join(map(repr, unknown))} (has: {', '.join(names)})")
        values = {n: inner[n].convert(x, f"{path}.{n}") for n, x in v.items()}
        return values if typeddict else tp(**values)

    return _Type(schema, convert, what)


# -- docstrings -----------------------------------------------------------------------------

_SECTION = re.compile(r"[A-Z][A-Za-z ]*:")
_PARAMS_GOOGLE = re.compile(r"(?:Args|Arguments|Parameters|Params):")
_NUMPY_RULE = re.compile(r"-{3,}")
_GOOGLE_ITEM = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_NUMPY_ITEM = re.compile(r"(\w+)\s*(?::.*)?")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph (its lines joined) and the parameter descriptions of a
    Google-style ``Args:`` section or a numpy-style ``Parameters`` section."""
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for i, line in enumerate(lines):
        text = line.strip()
        if not text:
            if summary:
                break
            continue
        if _SECTION.fullmatch(text) or _underlined(lines, i):
            break
        summary.append(text)
    return " ".join(summary), _parameter_docs(lines)


def _underlined(lines: list[str], i: int) -> bool:
    """Line ``i`` is a numpy-style section header (the next line is a rule of dashes)."""
    return i + 1 < len(lines) and bool(_NUMPY_RULE.fullmatch(lines[i + 1].strip()))


def _parameter_docs(lines: list[str]) -> dict[str, str]:
    for i, line in enumerate(lines):
        text = line.strip()
        if _PARAMS_GOOGLE.fullmatch(text):
            return _items(lines[i + 1 :], numpy=False)
        if text in ("Parameters", "Arguments", "Args") and _underlined(lines, i):
            return _items(lines[i + 2 :], numpy=True)
    return {}


def _items(lines: list[str], *, numpy: bool) -> dict[str, str]:
    """``name: text`` (Google) or ``name : type`` then indented text (numpy) items, up to the
    next section."""
    docs: dict[str, str] = {}
    current: str | None = None
    base: int | None = None
    for j, line in enumerate(lines):
        text = line.strip()
        if not text:
            continue
        indent = len(line) - len(line.lstrip())
        base = indent if base is None else base
        if indent < base or (
            indent == base and (_underlined(lines, j) or _SECTION.fullmatch(text))
        ):
            break
        item = (_NUMPY_ITEM if numpy else _GOOGLE_ITEM).fullmatch(text)
        if indent == base and item:
            current = item.group(1)
            docs[current] = "" if numpy else item.group(2)
        elif current is not None:
            docs[current] = f"{docs[current]} {text}".strip()
    return {k: v for k, v in docs.items() if v}
