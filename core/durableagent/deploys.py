"""Deploys (issue 25): the code a run was made by, and whether another version may resume it.

Every agent has a :class:`Code`: a version label and a fingerprint (its tools' names and
input-schema digests, its model id, its prompt's digest). A run records the code that started
it in ``run.started``, and each attempt the code that ran it in its outcome. Before an attempt
runs anything, :func:`verdict` compares the run's journal with the code about to resume it:

- a step that has a result replays from the journal whatever changed (its tool, the prompt,
  the model): it is *changed since*, and compatible;
- a call that has no result and that a human decided or must decide on (pending, approved but
  not run) or that started as a write (open) is *incompatible* when its tool is gone or its
  recorded arguments do not validate against the tool's new input schema: nothing may run it
  with arguments no human approved. The run stops before any step as ``incompatible``.

``deploy-check`` runs the same :func:`verdict` over every unfinished run, reading only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .calls import Call, marker_for, replies
from .gate import PolicyGate
from .record import RUN_STARTED, SIGNAL, STEP_COMPLETED, STEP_STARTED, Record, signal_fields
from .steps import model_step, model_turn, parse_step, step_tool_name, tool_step
from .turns import AgentLoop

ACCEPT_CHANGE = "accept-change"


def digest(value: Any, n: int = 12) -> str:
    """The first ``n`` hex digits of sha256 over ``value`` as canonical JSON."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:n]


@dataclass(frozen=True)
class Code:
    """An agent's version label, its fingerprint (``{"tools": {name: schema digest},
    "model": id, "prompt": digest}``) and its tools' input schemas (what a call's recorded
    arguments are validated against)."""

    version: str
    fingerprint: dict[str, Any]
    schemas: Mapping[str, Any]

    def started(self, gate: PolicyGate) -> dict[str, Any]:
        """What ``run.started`` records: the version, the fingerprint, and the input schemas
        of the tools a human approves or that write (a deploy's dialog shows them beside the
        new ones)."""
        kept = {
            n: s
            for n, s in sorted(self.schemas.items())
            if gate.needs_approval(n) or gate.is_write(n)
        }
        return {"version": self.version, "fingerprint": self.fingerprint, "schemas": kept}


def code_of(agent: AgentLoop, version: str = "") -> Code:
    """The code of ``agent``: ``version`` labels it (default: the fingerprint's first 8 hex
    digits). An agent that learns its tools as it runs (a framework's) may give
    ``schemas()``, its tools' input schemas by name, and ``prompt``, its instructions."""
    given = getattr(agent, "schemas", None)
    schemas = dict(given()) if callable(given) else {t.name: t.parameters for t in agent.tools}
    model = getattr(agent.model, "model", None)
    model_id = model if isinstance(model, str) else type(agent.model).__name__
    prompt = getattr(agent, "system", None)
    if prompt is None:
        prompt = getattr(agent, "prompt", None)
    fingerprint = {
        "tools": {n: digest(s) for n, s in sorted(schemas.items())},
        "model": model_id,
        "prompt": digest(prompt or ""),
    }
    return Code(version or digest(fingerprint, 8), fingerprint, schemas)


@dataclass(frozen=True)
class Made:
    """The code a run's steps so far were made by, as far as the journal says: the version
    and fingerprint its ``run.started`` recorded (or the latest accept-change's), and the
    schemas recorded with them."""

    version: str
    fingerprint: dict[str, Any]
    schemas: Mapping[str, Any]


def made_by(records: Sequence[Record], attempts: Iterable[Any] = ()) -> Made | None:
    """The code in force for the run: the latest ``accept-change``'s, else its
    ``run.started``'s, else (a run submitted without an agent) the first attempt's that
    recorded one; None when nothing says."""
    made: Made | None = None
    for r in records:
        data = r.data if isinstance(r.data, dict) else {}
        if r.type == RUN_STARTED and r.seq == records[0].seq and data.get("version"):
            made = Made(
                str(data["version"]), _dict(data.get("fingerprint")), _dict(data.get("schemas"))
            )
        elif r.type == SIGNAL:
            name, payload, _, _ = signal_fields(r)
            if name == ACCEPT_CHANGE and payload.get("version"):
                old = made.schemas if made is not None else {}
                made = Made(str(payload["version"]), _dict(payload.get("fingerprint")), old)
    if made is None:
        for a in attempts:
            outcome = getattr(a, "outcome", None)
            if outcome is not None and outcome.version:
                return Made(outcome.version, dict(outcome.fingerprint or {}), {})
    return made


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Blocker:
    """A call the new code cannot take over: its step and marker, the tool, why (``new
    required argument 'priority'``, ``tool removed``), its recorded arguments, and the tool's
    input schema before (when recorded) and now (None: gone)."""

    step: str
    marker: str
    tool: str
    reason: str
    arguments: Any = None
    old: Any = None
    new: Any = None

    @property
    def line(self) -> str:
        return f"{self.tool}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "marker": self.marker,
            "tool": self.tool,
            "reason": self.reason,
            "arguments": self.arguments,
            "old": self.old,
            "new": self.new,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Blocker:
        return cls(
            step=str(d.get("step") or ""),
            marker=str(d.get("marker") or ""),
            tool=str(d.get("tool") or ""),
            reason=str(d.get("reason") or ""),
            arguments=d.get("arguments"),
            old=d.get("old"),
            new=d.get("new"),
        )


CLEAN, CHANGED, INCOMPATIBLE = "resumes cleanly", "changed", "incompatible"


@dataclass(frozen=True)
class Verdict:
    """What the new code does with a run: ``blockers`` (incompatible: it stops before any
    step), else ``changed`` (steps that replay though their tool, model or prompt changed
    since ``was``), else it resumes cleanly."""

    changed: tuple[str, ...] = ()
    blockers: tuple[Blocker, ...] = ()
    was: str = ""  # the version the run was made by ("" unknown)

    @property
    def kind(self) -> str:
        if self.blockers:
            return INCOMPATIBLE
        return CHANGED if self.changed else CLEAN

    @property
    def why(self) -> str:
        """One line: the blockers (``create_ticket: new required argument 'priority'``), or
        the steps changed since the version that made them."""
        if self.blockers:
            return "; ".join(b.line for b in self.blockers)
        if self.changed:
            since = f" since {self.was}" if self.was else ""
            return f"replays {len(self.changed)} step(s) changed{since}: " + ", ".join(self.changed)
        return ""


def verdict(
    records: Sequence[Record],
    code: Code,
    gate: PolicyGate,
    *,
    pending: Iterable[str] = (),
    made: Made | None = None,
) -> Verdict:
    """The rule (module docstring): what ``code`` with ``gate`` would do with the run of
    ``records``. ``pending`` are the markers the last attempt left waiting for a human (a
    call whose tool the new code no longer gates is still one a human was asked about);
    ``made`` is the code the run was made by (default: what its journal says)."""
    if made is None:
        made = made_by(records)
    completed: set[str] = set()
    started: dict[str, dict[str, Any]] = {}
    reconciled: dict[str, str] = {}  # step -> outcome of a reconcile since its latest start
    approved: set[str] = set()
    settled: set[str] = set()  # denied, or accepted as changed
    for r in records:
        data = r.data if isinstance(r.data, dict) else {}
        if r.type == STEP_COMPLETED:
            completed.add(r.step)
        elif r.type == STEP_STARTED:
            started[r.step] = data
            reconciled.pop(r.step, None)
        elif r.type == SIGNAL:
            name, payload, _, _ = signal_fields(r)
            if name == "approve":
                approved.add(str(payload.get("marker")))
            elif name == "deny":
                settled.add(str(payload.get("marker")))
            elif name == ACCEPT_CHANGE:
                settled.update(accepted_markers(payload))
            elif name == "reconcile" and r.step in started:
                reconciled[r.step] = str(payload.get("outcome"))
    asked = set(pending)
    blockers = []
    for step, call in _unfinished_calls(records, completed):
        marker = call.marker or ""
        if marker in settled or gate.is_denied(call.tool):
            continue
        start = started.get(step)
        open_write = start is not None and start.get("write") is True
        if open_write and reconciled.get(step) == "done":
            continue  # the human's result is recorded: the tool is not called
        human = marker in approved or marker in asked or gate.needs_approval(call.tool)
        if not (human or open_write):
            continue
        old = made.schemas.get(call.tool) if made is not None else None
        if not code.schemas:
            continue  # an agent that names its tools only as it runs: nothing to check against
        if made is not None and _tool_digest(made.fingerprint, call.tool) == _tool_digest(
            code.fingerprint, call.tool
        ):
            # Not a change: the code that asked for the call would have run the same tool
            # (arguments its own model got wrong are the tool's to refuse, as they always were).
            continue
        if call.tool not in code.schemas:
            blockers.append(Blocker(step, marker, call.tool, "tool removed", call.arguments, old))
            continue
        new = code.schemas[call.tool]
        problem = schema_problem(new, call.arguments)
        if problem is not None:
            blockers.append(Blocker(step, marker, call.tool, problem, call.arguments, old, new))
    changed = _changed(completed, made, code) if made is not None else ()
    return Verdict(changed, tuple(blockers), made.version if made is not None else "")


def asked_of(outcome: Any) -> list[str]:
    """The markers of the calls a human was asked about (or an incompatible attempt named)
    in the run's last outcome: a call whose tool the new code no longer gates is still one."""
    if outcome is None:
        return []
    asked = [p.marker for p in outcome.pending]
    asked.extend(str(b.get("marker")) for b in outcome.blocked if b.get("marker"))
    return asked


# The statuses deploy-check looks at: every run a worker may still take up.
FINISHED = frozenset({"completed", "cancelled", "moved", "corrupt"})


@dataclass(frozen=True)
class RunCheck:
    """One unfinished run as deploy-check sees it: its status now, the verdict, and what
    the worker of the new code will do with it (``then``)."""

    run_id: str
    status: str
    verdict: Verdict

    @property
    def then(self) -> str:
        """What a worker of the new code does, in words."""
        v = self.verdict
        if v.blockers:
            if self.status == "indeterminate":
                return f"incompatible once reconciled --retry ({v.why}); --done resumes it"
            return f"stops before any step as incompatible: {v.why}"
        waits = {
            "awaiting_approval": "waits for its approval, then ",
            "indeterminate": "waits for a reconcile, then ",
            "paused": "waits for a resume, then ",
            "over_budget": "waits for more budget, then ",
        }.get(self.status, "")
        if v.changed:
            return f"{waits}resumes; {v.why}"
        return f"{waits}resumes cleanly"

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        return {
            "run": self.run_id,
            "status": self.status,
            "verdict": v.kind,
            "why": v.why,
            "then": self.then,
            "was": v.was or None,
            "changed": list(v.changed),
            "blockers": [b.to_dict() for b in v.blockers],
        }


def check_store(store: Any, code: Code, gate: PolicyGate) -> list[RunCheck]:
    """``deploy-check``: what ``code`` with ``gate`` would do with every unfinished run of
    ``store``. Reads only (each unfinished run's journal; the last outcome of an
    incompatible one; the attempt log of a run whose journal names no version) and runs no
    model and no tool."""
    out = []
    for s in store.summaries():
        if str(s.status) in FINISHED:
            continue
        try:
            records = store.load(s.run_id)
        except Exception:  # a journal that stopped loading since the listing: not ours
            continue
        if not records:
            continue
        asked = [p.marker for p in s.pending]
        if str(s.status) == "incompatible":
            asked.extend(asked_of(store.last_outcome(s.run_id)))
        made = made_by(records)
        if made is None:
            made = made_by(records, store.attempts(s.run_id))
        verdict_now = verdict(records, code, gate, pending=asked, made=made)
        out.append(RunCheck(s.run_id, str(s.status), verdict_now))
    return out


def pending_blocked(code: Code, pending: Iterable[Any]) -> bool:
    """True when a pending call (a ``Pending``: its tool and arguments) is one ``code``
    cannot run: its tool is gone, or its arguments do not validate (a worker finds out from
    a run's summary, without reading its journal)."""
    if not code.schemas:
        return False
    for p in pending:
        schema = code.schemas.get(p.tool)
        if schema is None or schema_problem(schema, p.arguments) is not None:
            return True
    return False


def _changed(completed: set[str], made: Made, code: Code) -> tuple[str, ...]:
    """The completed steps whose tool (its schema, or the tool itself) or whose model and
    prompt differ between the code that made the run and ``code``: they replay."""
    was, now = made.fingerprint, code.fingerprint
    if not was:
        return ()
    model_changed = was.get("model") != now.get("model") or was.get("prompt") != now.get("prompt")
    was_tools = _dict(was.get("tools"))
    now_tools = _dict(now.get("tools"))
    out = []
    for step in sorted(completed, key=_step_order):
        if model_turn(step) is not None:
            if model_changed:
                out.append(step)
            continue
        tool = step_tool_name(step) or ""
        if tool and was_tools.get(tool) != now_tools.get(tool):
            out.append(step)
    return tuple(out)


def _unfinished_calls(records: Sequence[Record], completed: set[str]) -> list[tuple[str, Call]]:
    """The calls recorded model steps asked for that have no result, by step (a marker is
    made only for these: a deploy-check reads thousands of runs whose calls mostly ran)."""
    out = []
    for turn, reply in sorted(replies(records).items()):
        for i, c in enumerate(reply.tool_calls):
            step = tool_step(turn, i, c.name)
            if step in completed:
                continue
            marker = marker_for(step, c.arguments) if isinstance(c.arguments, dict) else None
            out.append((step, Call(step, c, marker)))
    return out


def _tool_digest(fingerprint: Mapping[str, Any], tool: str) -> Any:
    tools = fingerprint.get("tools")
    return tools.get(tool) if isinstance(tools, dict) else None


def _step_order(step: str) -> tuple[int, int, str]:
    """Turn, then the model step before its tool calls, then by index (the step grammar)."""
    parsed = parse_step(step)
    if parsed is None:
        return 0, -1, step
    return parsed.turn, -1 if parsed.index is None else parsed.index, step


def fork_step(blocked: Sequence[Mapping[str, Any]]) -> str:
    """Where to fork an incompatible run from: the model step that asked for its first
    blocked call (the fork keeps every step before it; the new code asks the model again)."""
    step = str(blocked[0].get("step") or "") if blocked else ""
    parsed = parse_step(step)
    return model_step(parsed.turn) if parsed is not None else "STEP"


def accepted_markers(payload: Mapping[str, Any]) -> list[str]:
    """The markers an accept-change signal's payload names."""
    calls = payload.get("calls")
    if not isinstance(calls, list):
        return []
    return [str(c.get("marker")) for c in calls if isinstance(c, dict) and c.get("marker")]


def accepted_reasons(records: Iterable[Record]) -> dict[str, str]:
    """``{marker: what the model reads}`` for each call an accept-change settled: the call is
    answered with an error naming the change, never run, and the model asks again with the
    arguments the tool takes now (a gated tool's new call waits for a new approval)."""
    out: dict[str, str] = {}
    for r in records:
        if r.type != SIGNAL:
            continue
        name, payload, by, why = signal_fields(r)
        if name != ACCEPT_CHANGE:
            continue
        for c in payload.get("calls") or ():
            if not isinstance(c, dict) or not c.get("marker"):
                continue
            tool, reason = str(c.get("tool") or "the tool"), str(c.get("reason") or "changed")
            out.setdefault(
                str(c["marker"]),
                f"not run: {tool} changed since this call was made ({reason}); "
                f"{by or 'a human'} accepted the change"
                + (f" ({why})" if why else "")
                + ". Call it again with the arguments it takes now, if it is still needed.",
            )
    return out


# -- arguments against a schema ------------------------------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _is(value: Any, kind: str) -> bool:
    types = _TYPES.get(kind)
    if types is None:
        return True  # a type we do not know: not ours to refuse
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, types)


def schema_problem(schema: Any, value: Any) -> str | None:
    """Why ``value`` (a call's arguments) does not validate against the JSON schema, in
    words a human reads (``new required argument 'priority'``), or None. It checks what a
    deploy changes: types, required properties, properties no longer taken, enums, nested
    objects and arrays, ``anyOf``/``oneOf`` and local ``$ref``s; other keywords pass."""
    return _problem(schema, value, "", schema, 0)


def _problem(schema: Any, value: Any, path: str, root: Any, depth: int) -> str | None:
    if not isinstance(schema, dict) or depth > 32:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        return _problem(target, value, path, root, depth + 1)
    where = f"argument {path!r}" if path else "the arguments"
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    if kinds and not any(_is(value, k) for k in kinds if isinstance(k, str)):
        return f"{where} must now be {' or '.join(map(str, kinds))}, not {_json_kind(value)}"
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        return f"{where}: {value!r} is no longer one of {schema['enum']!r}"
    if "const" in schema and value != schema["const"]:
        return f"{where} must now be {schema['const']!r}"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            problems = [_problem(o, value, path, root, depth + 1) for o in options]
            if all(p is not None for p in problems):
                return problems[0]
    for sub in schema.get("allOf") or ():
        problem = _problem(sub, value, path, root, depth + 1)
        if problem is not None:
            return problem
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        for name in schema.get("required") or ():
            if name not in value:
                full = f"{path}.{name}" if path else str(name)
                return f"new required argument {full!r}"
        for name, v in value.items():
            full = f"{path}.{name}" if path else str(name)
            if name in props:
                problem = _problem(props[name], v, full, root, depth + 1)
                if problem is not None:
                    return problem
            elif schema.get("additionalProperties") is False:
                return f"argument {full!r} is no longer taken"
    if isinstance(value, list):
        items = schema.get("items")
        for i, v in enumerate(value):
            problem = _problem(items, v, f"{path}[{i}]", root, depth + 1)
            if problem is not None:
                return problem
    return None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
