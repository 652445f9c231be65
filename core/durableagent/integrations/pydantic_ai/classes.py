"""Which of a Pydantic AI agent's tools are reads and which are writes, and which need a human.

Known when ``durable()`` is called: the caller's ``writes=`` and ``approve=``, and every function
tool declared ``requires_approval`` (a write a human approves). An MCP server's tools are only
known once the run lists them: each is classed from its annotations when the caller trusts them
(``trust_annotations``), else as a write that needs approval, as ``durableagent.mcp_tools``
does; the caller's ``writes=``/``approve=`` win over both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.tools import ToolDefinition

from ...gate import PolicyGate
from ...tools import Tool


@dataclass(frozen=True)
class Classes:
    """The gate known before the run (``gate``, its ``approve`` always explicit), what the
    caller named (``writes``, ``approve``), and the ids of the agent's MCP toolsets."""

    gate: PolicyGate
    writes: frozenset[str]
    approve: frozenset[str]
    mcp: frozenset[str] = frozenset()
    trust_annotations: bool = False

    def tool(self, d: ToolDefinition) -> Tool:
        """Our descriptor of a tool Pydantic AI offers (its ``fn`` is never called: the call
        goes through the agent's toolset)."""
        parameters = dict(d.parameters_json_schema or {"type": "object"})
        if d.toolset_id is not None and d.toolset_id in self.mcp:
            from ...tools.mcp import classify

            override: dict[str, bool] = {}
            if d.name in self.writes:
                override["write"] = True
            if d.name in self.approve:
                override["approve"] = True
            annotations = (d.metadata or {}).get("annotations")
            c = classify(annotations, trusted=self.trust_annotations, override=override)
            return Tool(
                d.name,
                d.description or "",
                parameters=parameters,
                write=c.write,
                approve=c.approve,
                idempotent=c.idempotent,
                classified_by=c.classified_by,
                origin=f"MCP toolset {d.toolset_id!r}",
            )
        gate = self.gate
        return Tool(
            d.name,
            d.description or "",
            parameters=parameters,
            write=gate.is_write(d.name),
            approve=gate.needs_approval(d.name),
            idempotent=gate.is_idempotent(d.name),
            origin=f"Pydantic AI toolset {d.toolset_id!r}" if d.toolset_id else "",
        )

    def gate_with(self, gate: PolicyGate, tools: Sequence[Tool]) -> PolicyGate:
        """``gate`` with the classes of the MCP tools among ``tools`` added (unchanged when it
        has them already)."""
        mcp = [t for t in tools if t.classified_by]
        writes = gate.writes | {t.name for t in mcp if t.write}
        approve = _approve(gate) | {t.name for t in mcp if t.needs_approval}
        idempotent = gate.idempotent | {t.name for t in mcp if t.write and t.idempotent}
        if writes == gate.writes and approve == gate.approve and idempotent == gate.idempotent:
            return gate
        return PolicyGate(
            writes=writes,
            approve=approve,
            deny=gate.deny,
            idempotent=idempotent,
            approve_within=dict(gate.approve_within),
        )


def _approve(gate: PolicyGate) -> frozenset[str]:
    return gate.writes if gate.approve is None else gate.approve
