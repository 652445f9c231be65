"""@tool: a typed function becomes a Tool whose schema and argument checks agree."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import keyword
import threading
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import jsonschema
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from durableagent import PolicyGate, Result, Tool, ToolContext, gate_for, tool
from durableagent.tools import plain_context
from durableagent.tools.typed import parse_docstring


def call(t: Tool, arguments: Any) -> Result:
    return asyncio.run(t.call(arguments))


# -- the schema ------------------------------------------------------------------------------


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(TypedDict):
    city: str
    zip: NotRequired[str]


@dataclass
class Person:
    name: str
    age: int = 0


def test_the_schema_comes_from_the_signature_and_the_docstring() -> None:
    @tool
    def create_ticket(
        summary: str,
        priority: Literal["low", "high"] = "low",
        tags: list[str] | None = None,
        count: int = 1,
        ratio: float = 0.5,
        urgent: bool = False,
        note: Annotated[str, "free text for the assignee"] = "",
    ) -> str:
        """File a ticket in the ticket system.

        The ticket is assigned by the queue's rules.

        Args:
            summary: One line saying what is wrong,
                written for the assignee.
            priority (str): How urgent it is.
        """
        return "ok"

    assert create_ticket.name == "create_ticket"
    assert create_ticket.description == "File a ticket in the ticket system."
    assert create_ticket.parameters == {
        "type": "object",
        "properties": {
            "summary": {
                "type": "string",
                "description": "One line saying what is wrong, written for the assignee.",
            },
            "priority": {
                "type": "string",
                "enum": ["low", "high"],
                "description": "How urgent it is.",
                "default": "low",
            },
            "tags": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
            "count": {"type": "integer", "default": 1},
            "ratio": {"type": "number", "default": 0.5},
            "urgent": {"type": "boolean", "default": False},
            "note": {"type": "string", "description": "free text for the assignee", "default": ""},
        },
        "required": ["summary"],
        "additionalProperties": False,
    }
    jsonschema.Draft202012Validator.check_schema(create_ticket.parameters)


def test_typeddict_dataclass_and_enum_arguments_have_object_and_enum_schemas() -> None:
    @tool
    def visit(who: Person, where: Address, level: Priority, extra: dict[str, int]) -> str:
        """Plan a visit."""
        return "ok"

    props = visit.parameters["properties"]
    assert props["who"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    assert props["where"]["required"] == ["city"]
    assert props["where"]["properties"]["zip"] == {"type": "string"}
    assert props["level"] == {"type": "string", "enum": ["low", "high"]}
    assert props["extra"] == {"type": "object", "additionalProperties": {"type": "integer"}}


def test_numpy_style_parameters_describe_the_arguments() -> None:
    summary, params = parse_docstring(
        """Look up a policy.

        Parameters
        ----------
        topic : str
            What the policy is about,
            e.g. billing.
        strict : bool, optional

        Returns
        -------
        str
        """
    )
    assert summary == "Look up a policy."
    assert params == {"topic": "What the policy is about, e.g. billing."}


def test_a_docstring_section_right_under_the_summary_ends_the_description() -> None:
    summary, params = parse_docstring("Do it.\nArgs:\n    x: the x\nReturns:\n    y")
    assert (summary, params) == ("Do it.", {"x": "the x"})


def test_a_tool_context_parameter_is_not_part_of_the_schema() -> None:
    @tool
    def f(topic: str, ctx: ToolContext) -> str:
        """F."""
        return ctx.idempotency_key

    assert list(f.parameters["properties"]) == ["topic"]
    assert f.parameters["required"] == ["topic"]


@pytest.mark.parametrize(
    ("annotation", "complaint"),
    [
        (complex, "'complex' has no JSON schema"),
        (dict[int, str], "use dict[str, ...]"),
        (tuple[int, str], "use tuple[X, ...]"),
        (set[int], "has no JSON schema"),
    ],
)
def test_a_type_without_a_json_schema_is_refused_when_the_tool_is_made(
    annotation: Any, complaint: str
) -> None:
    def f(x: int) -> str:
        return ""

    f.__annotations__ = {"x": annotation}
    with pytest.raises(TypeError, match=r"@tool f, parameter 'x'") as e:
        tool(f)
    assert complaint in str(e.value)


def test_variadic_parameters_and_bad_names_are_refused() -> None:
    def g(*args: int) -> str:
        return ""

    with pytest.raises(TypeError, match="named parameters only"):
        tool(g)
    with pytest.raises(ValueError, match="not a usable tool name"):
        tool(name="file ticket")(lambda: "")


@dataclass
class Node:
    child: Node | None = None


def test_a_self_referring_dataclass_is_refused() -> None:
    def f(n: Node) -> str:
        return ""

    with pytest.raises(TypeError, match="Node refers to itself"):
        tool(f)


def test_annotations_that_do_not_resolve_are_refused_naming_the_parameter() -> None:
    @dataclass
    class Local:
        other: Missing  # type: ignore[name-defined]  # noqa: F821

    def f(x: int) -> str:
        return ""

    f.__annotations__ = {"x": Local}
    with pytest.raises(TypeError, match=r"parameter 'x': cannot resolve the annotations of Local"):
        tool(f)


# -- the arguments -----------------------------------------------------------------------------


def test_bad_arguments_are_an_error_result_naming_each_problem_and_the_function_is_not_run():
    calls: list[Any] = []

    @tool
    def create_ticket(
        summary: str, priority: Literal["low", "high"] = "low", count: int = 1
    ) -> str:
        """File a ticket."""
        calls.append(summary)
        return "ok"

    result = call(create_ticket, {"priority": "urgent", "count": "3", "color": "red"})
    assert result.is_error
    assert result.content == (
        "invalid arguments for create_ticket: missing required argument 'summary'; "
        "unknown argument 'color' (its arguments: summary, priority, count); "
        'argument \'priority\': expected one of "low", "high", got "urgent"; '
        "argument 'count': expected an integer, got string \"3\""
    )
    assert call(create_ticket, ["summary"]).content == (
        "invalid arguments for create_ticket: expected an object"
    )
    assert calls == []


def test_nested_problems_name_the_path() -> None:
    @tool
    def f(people: list[Person], where: Address | None = None) -> str:
        """F."""
        return "ok"

    result = call(f, {"people": [{"name": "a"}, {"name": "b", "age": "x"}], "where": {"zip": "1"}})
    assert result.is_error
    assert "argument 'people[1].age': expected an integer, got string \"x\"" in result.content
    assert "argument 'where': missing 'city'" in result.content


def test_arguments_arrive_as_the_annotated_python_values() -> None:
    got: dict[str, Any] = {}

    @tool
    def f(
        who: Person, level: Priority, where: Address, n: int, x: float, tags: tuple[str, ...] = ()
    ) -> str:
        """F."""
        got.update(who=who, level=level, where=where, n=n, x=x, tags=tags)
        return "ok"

    args = {
        "who": {"name": "Ada", "age": 3.0},
        "level": "high",
        "where": {"city": "Oslo"},
        "n": 2.0,
        "x": 1,
        "tags": ["a"],
    }
    assert call(f, args) == Result("ok")
    assert got == {
        "who": Person("Ada", 3),
        "level": Priority.HIGH,
        "where": {"city": "Oslo"},
        "n": 2,
        "x": 1.0,
        "tags": ("a",),
    }
    assert type(got["n"]) is int and type(got["x"]) is float and type(got["who"].age) is int


def test_true_is_not_an_integer_and_one_is_not_true() -> None:
    @tool
    def f(n: int = 0, b: bool = False, lit: Literal[1, 2] = 1) -> str:
        """F."""
        return "ok"

    assert call(f, {"n": True}).is_error
    assert call(f, {"b": 1}).is_error
    assert call(f, {"lit": True}).is_error
    assert not call(f, {"lit": 1.0}).is_error


def test_a_sync_tool_runs_in_a_thread_and_an_async_one_on_the_loop() -> None:
    seen: list[str] = []

    @tool
    def sync_tool() -> str:
        """S."""
        seen.append(threading.current_thread().name)
        return "s"

    @tool
    async def async_tool() -> str:
        """A."""
        seen.append(threading.current_thread().name)
        return "a"

    assert call(sync_tool, {}) == Result("s")
    assert call(async_tool, {}) == Result("a")
    assert seen[0] != threading.main_thread().name
    assert seen[1] == threading.main_thread().name


def test_a_json_return_value_is_sent_as_json_text_and_a_result_as_it_is() -> None:
    @tool
    def as_dict() -> dict[str, Any]:
        """D."""
        return {"id": "T-1", "ok": True}

    @tool
    def as_result() -> Result:
        """R."""
        return Result("nope", is_error=True)

    @tool
    def as_object() -> object:
        """O."""
        return object()

    assert call(as_dict, {}) == Result('{"id": "T-1", "ok": true}')
    assert call(as_result, {}) == Result("nope", is_error=True)
    with pytest.raises(TypeError, match="return a str, a Result or a JSON value"):
        call(as_object, {})


def test_an_exception_from_the_function_propagates() -> None:
    @tool
    def broken() -> str:
        """B."""
        raise ConnectionError("ticket system down")

    with pytest.raises(ConnectionError):
        call(broken, {})


# -- the policy --------------------------------------------------------------------------------


def test_the_policy_lives_on_the_tool_and_gate_for_derives_the_gate() -> None:
    @tool
    def read() -> str:
        """R."""
        return ""

    @tool(write=True)
    def gated() -> str:
        """G."""
        return ""

    @tool(write=True, approve=False, name="unattended")
    def quiet() -> str:
        """Q."""
        return ""

    @tool(write=True, idempotent=True, hint="search the ticket system for the key")
    def keyed() -> str:
        """K."""
        return ""

    assert (keyed.write, keyed.idempotent, keyed.hint) == (
        True,
        True,
        "search the ticket system for the key",
    )
    gate = gate_for([read, gated, quiet, keyed], deny=["read"])
    assert gate == PolicyGate(
        writes={"gated", "unattended", "keyed"},
        approve={"gated", "keyed"},
        deny={"read"},
        idempotent={"keyed"},
    )
    assert gate.is_write("unattended") and not gate.needs_approval("unattended")
    assert gate.is_idempotent("keyed") and not gate.is_idempotent("gated")
    assert gate.is_denied("read")


def test_an_idempotent_read_is_a_mistake_said_at_once() -> None:
    with pytest.raises(ValueError, match="write=True, idempotent=True"):
        tool(idempotent=True, name="f")(lambda: "")


def test_only_writes_count_as_idempotent_in_a_hand_made_gate() -> None:
    gate = PolicyGate(writes={"w"}, idempotent={"w", "r"})
    assert gate.is_idempotent("w") and not gate.is_idempotent("r")


# -- the schema and the checks agree (property) ---------------------------------------------

# Field names a dataclass accepts: "def" is made of these letters, and is a keyword.
NAMES = st.text("abcdefgh", min_size=1, max_size=4).filter(lambda n: not keyword.iskeyword(n))
LITERALS = st.lists(
    st.one_of(st.text("xyz", max_size=2), st.integers(-3, 3), st.booleans(), st.none()),
    min_size=1,
    max_size=4,
    unique_by=lambda v: (type(v), v),
)
SCALARS = st.sampled_from([str, int, float, bool, type(None), Any])


def _typeddict(fields: list[tuple[str, Any]], total: bool) -> Any:
    return TypedDict("Generated", dict(fields), total=total)  # type: ignore[operator]


def _dataclass(fields: list[tuple[str, Any]], defaults: int) -> Any:
    specs = [
        (n, t, dataclasses.field(default=None)) if i >= len(fields) - defaults else (n, t)
        for i, (n, t) in enumerate(fields)
    ]
    return dataclasses.make_dataclass("Generated", specs)


def _compound(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    fields = st.lists(st.tuples(NAMES, inner), min_size=1, max_size=3, unique_by=lambda f: f[0])
    return st.one_of(
        inner.map(lambda t: list[t]),  # type: ignore[valid-type]
        inner.map(lambda t: Optional[t]),  # noqa: UP045 - works for every annotation
        inner.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        st.tuples(inner, inner).map(lambda ts: typing.Union[ts]),  # noqa: UP007
        st.builds(_typeddict, fields, st.booleans()),
        st.builds(_dataclass, fields, st.integers(0, 3)),
    )


TYPES = st.recursive(
    st.one_of(SCALARS, LITERALS.map(lambda vs: Literal[tuple(vs)])), _compound, max_leaves=5
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=3)
    | st.sampled_from(["x", "y", "abc"]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(NAMES, c, max_size=3),
    max_leaves=8,
)


def _values(tp: Any) -> st.SearchStrategy[Any]:
    """JSON values that fit ``tp`` (so that the property sees many accepted values)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return JSON
    simple: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=3),
        int: st.integers(-100, 100),
        float: st.floats(allow_nan=False, allow_infinity=False),
        bool: st.booleans(),
        type(None): st.none(),
    }
    if tp in simple:
        return simple[tp]
    if origin is Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(_values(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(NAMES, _values(args[1]), max_size=3)
    if origin in (typing.Union, typing.Optional):
        return st.one_of([_values(a) for a in args])
    hints = typing.get_type_hints(tp)
    if typing.is_typeddict(tp):
        required = tp.__required_keys__
    else:
        required = {f.name for f in dataclasses.fields(tp) if f.default is dataclasses.MISSING}
    return st.fixed_dictionaries(
        {n: _values(t) for n, t in hints.items() if n in required},
        optional={n: _values(t) for n, t in hints.items() if n not in required},
    )


def _accepted_exactly_when_it_fits(tp: Any, value: Any) -> None:
    def f(x: int) -> str:
        return "ok"

    f.__annotations__ = {"x": tp, "return": str}
    t = tool(f)
    validator = jsonschema.Draft202012Validator(t.parameters)
    arguments = {"x": value}
    fits = validator.is_valid(arguments)
    out = t.fn(arguments, ctx=plain_context("s")) if t.fn is not None else None
    assert isinstance(out, str | Result)
    accepted = out == "ok"
    event(f"accepted={accepted}")
    assert accepted == fits, (t.parameters, value, out)


@settings(deadline=None, max_examples=400)
@given(data=st.data(), tp=TYPES, near=TYPES)
def test_an_argument_is_accepted_exactly_when_it_fits_the_schema_the_model_was_shown(
    data: st.DataObject, tp: Any, near: Any
) -> None:
    # Values that fit this type, values that fit another one (near misses), any JSON.
    value = data.draw(st.one_of(_values(tp), _values(near), JSON), label="value")
    _accepted_exactly_when_it_fits(tp, value)


SCALAR_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, -2.0, 0.5, 1e300]),
    st.sampled_from(["", "x", "1", "true"]),
)


@settings(deadline=None, max_examples=300)
@given(tp=st.one_of(SCALARS, LITERALS.map(lambda vs: Literal[tuple(vs)])), value=SCALAR_VALUES)
def test_a_scalar_is_accepted_exactly_when_it_fits(tp: Any, value: Any) -> None:
    _accepted_exactly_when_it_fits(tp, value)


@settings(deadline=None, max_examples=100)
@given(tp=TYPES)
def test_every_generated_schema_is_valid_json_schema(tp: Any) -> None:
    def f(x: int) -> str:
        return "ok"

    f.__annotations__ = {"x": tp}
    jsonschema.Draft202012Validator.check_schema(tool(f).parameters)
