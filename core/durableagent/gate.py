"""The policy gate: which tools write, which need a human, and the markers binding approvals."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .durations import parse_duration
from .tools import Tool


@dataclass(frozen=True, slots=True)
class PolicyGate:
    """``writes``: tools with side effects. ``approve``: tools a human must approve (defaults to
    ``writes``). ``deny``: tools refused outright. ``idempotent``: writes whose external system
    deduplicates on the step's idempotency key, so an unfinished one is run again instead of
    waiting for a human (only writes count). ``approve_within`` maps a tool to how long
    (seconds, or a duration such as ``"2h"``) a call of it waits for a human before it is
    denied. :func:`gate_for` derives one from the tools."""

    writes: frozenset[str] = frozenset()
    approve: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    idempotent: frozenset[str] = frozenset()
    approve_within: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)

    def __init__(
        self,
        writes: Iterable[str] = (),
        approve: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        idempotent: Iterable[str] = (),
        approve_within: Mapping[str, float | str] | None = None,
    ) -> None:
        object.__setattr__(self, "writes", frozenset(writes))
        object.__setattr__(self, "approve", None if approve is None else frozenset(approve))
        object.__setattr__(self, "deny", frozenset(deny))
        object.__setattr__(self, "idempotent", frozenset(idempotent))
        within = {t: parse_duration(s) for t, s in (approve_within or {}).items()}
        object.__setattr__(self, "approve_within", within)

    def is_write(self, tool: str) -> bool:
        return tool in self.writes

    def needs_approval(self, tool: str) -> bool:
        return tool in (self.writes if self.approve is None else self.approve)

    def is_denied(self, tool: str) -> bool:
        return tool in self.deny

    def is_idempotent(self, tool: str) -> bool:
        """A write that may run again with the same key (a read always may)."""
        return tool in self.idempotent and tool in self.writes


def gate_for(tools: Iterable[Tool], *, deny: Iterable[str] = ()) -> PolicyGate:
    """The PolicyGate the tools declare (``Tool.write``, ``.approve``, ``.idempotent``), with
    ``deny`` refused outright."""
    tools = list(tools)
    return PolicyGate(
        writes={t.name for t in tools if t.write},
        approve={t.name for t in tools if t.needs_approval},
        deny=deny,
        idempotent={t.name for t in tools if t.write and t.idempotent},
        approve_within={t.name: t.approve_within for t in tools if t.approve_within is not None},
    )


def class_words(*, write: bool, approve: bool, idempotent: bool) -> str:
    """A tool's class in words: ``read``, ``write``, ``idempotent write``, each with ``, needs
    approval`` when a human must approve it."""
    what = ("idempotent write" if idempotent else "write") if write else "read"
    return what + (", needs approval" if approve else "")


def policy_source(tool: Tool, gate: PolicyGate) -> str:
    """Where the class the gate gives ``tool`` came from: the tool's ``classified_by`` when
    the gate agrees with the tool's own policy (``gate_for``), else "gate" (a PolicyGate
    written by hand decides); "" for a tool whose policy is its code's."""
    if not tool.classified_by:
        return ""
    agrees = (
        gate.is_write(tool.name) == tool.write
        and gate.needs_approval(tool.name) == tool.needs_approval
        and gate.is_idempotent(tool.name) == (tool.write and tool.idempotent)
    )
    return tool.classified_by if agrees else "gate"


def describe_policy(tool: Tool, gate: PolicyGate) -> str:
    """One line for a human deciding on a call of ``tool``: its class as the gate applies it,
    where that class came from, where the tool comes from and what else it says about itself
    (``about``). "" for a tool whose policy is its own code's: nothing to explain."""
    source = policy_source(tool, gate)
    if not source:
        return ""
    words = class_words(
        write=gate.is_write(tool.name),
        approve=gate.needs_approval(tool.name),
        idempotent=gate.is_idempotent(tool.name),
    )
    parts = [words, f"class from {source}"]
    parts += [p for p in (tool.origin, tool.about) if p]
    return " · ".join(parts)


@dataclass(frozen=True, slots=True)
class Pending:
    """A tool call waiting for a human. Approve or deny it by its ``marker``. ``policy`` is
    the line :func:`describe_policy` gives its tool (journal text once saved), or ""."""

    marker: str
    step: str
    tool: str
    arguments: dict[str, Any]
    policy: str = ""
    # When a worker denies it if nobody decided (epoch seconds), and how long it was given
    # (seconds, from the model step that asked for it); None: it waits for ever.
    deadline_at: float | None = None
    approve_within: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "marker": self.marker,
            "step": self.step,
            "tool": self.tool,
            "arguments": self.arguments,
        }
        if self.policy:  # only when there is one: older outcomes and readers stay as they were
            d["policy"] = self.policy
        if self.deadline_at is not None:
            d["deadline_at"] = self.deadline_at
            d["approve_within"] = self.approve_within
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pending:
        policy = d.get("policy")
        deadline, within = d.get("deadline_at"), d.get("approve_within")
        return cls(
            d["marker"],
            d["step"],
            d["tool"],
            dict(d.get("arguments") or {}),
            policy if isinstance(policy, str) else "",
            float(deadline) if isinstance(deadline, int | float) else None,
            float(within) if isinstance(within, int | float) else None,
        )


def static_gate(
    *,
    writes: Iterable[str],
    approve: Iterable[str],
    requires_approval: Iterable[str],
    deny: Iterable[str] = (),
    idempotent: Iterable[str] = (),
    approve_within: dict[str, float | str] | None = None,
) -> PolicyGate:
    """A framework agent's gate, known before the run (durableagent.integrations): the named
    writes and the tools the framework flags for approval (Pydantic AI's
    ``requires_approval``, the Agents SDK's ``needs_approval``) are writes; a human approves
    every write (``approve`` empty) or exactly the ``approve`` tools, and always a flagged
    one."""
    flagged = frozenset(requires_approval)
    all_writes = frozenset(writes) | flagged
    named = frozenset(approve)
    return PolicyGate(
        writes=all_writes,
        approve=(named or all_writes) | flagged,
        deny=deny,
        idempotent=idempotent,
        approve_within=approve_within,
    )
