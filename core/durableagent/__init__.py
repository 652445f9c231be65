"""durableagent: durable AI-agent runs.

Every model call and tool call is journaled (start, then result, fsynced) before its result is
used; a restarted run replays completed steps; a write that started and never recorded a
result stops the run as indeterminate until a human reconciles it; approvals, denials and
reconciliations are signals appended to the journal.
"""

from typing import TYPE_CHECKING

from .audit import Audit, Decision, audit, decisions
from .budget import Budget, BudgetError, parse_budget
from .calls import marker_for, marker_step
from .control import Control
from .deploys import Blocker, Code, Verdict, code_of, made_by, schema_problem, verdict
from .errors import (
    AgentLostError,
    AgentStartError,
    CorruptJournalError,
    DurabilityError,
    DurableAgentError,
    ForkError,
    IndeterminateError,
    InputMismatchError,
    InvalidRunIdError,
    LeaseLostError,
    MaxTurnsExceeded,
    McpConnectionLostError,
    McpToolError,
    ModelError,
    ModelRetryError,
    OverBudgetError,
    RunBusyError,
    RunChangedError,
    RunConflictError,
    RunHalted,
    RunNotFoundError,
    RunStopped,
    SignalError,
    StoreError,
    StoreUnavailableError,
    ToolNameCollisionError,
    ToolPolicyError,
)
from .fold import NEEDS_HUMAN, Fold, RunStatus
from .fork import ForkPlan, fork, fork_points, forks_of, plan_fork
from .gate import Pending, PolicyGate, gate_for
from .ids import check_run_id, valid_run_id
from .journal import Journal, Reconcile, idempotency_key
from .lineage import ForkedFrom, forked_from
from .loop import AgentConfig, LoopOutcome, PlainRunner, StepRunner, run_loop
from .messages import Message, StepKind, ToolCall
from .models.base import Model, ScriptedModel
from .outcome import Outcome, Status
from .plan import Plan, PlanAction, PlanEnding, PlanStep, plan
from .record import Record
from .run import Config, run, submit
from .signals import accept_change, signal
from .steps import model_step, parse_step, step_tool_name, tool_step
from .stores import Attempt, FileStore, Lease, Store, Summary, open_store
from .tools import Cancelled, Result, Tool, ToolContext
from .tools.typed import tool
from .turns import AgentLoop, Turns
from .view import RunView, StepView, Tokens, view_run, view_store
from .worker import Agent, Worker

if TYPE_CHECKING:
    from .tools.mcp import mcp_tools

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # mcp_tools needs the mcp SDK (extra "mcp"): load it only when asked for, so that the
    # library starts without it.
    if name == "mcp_tools":
        from .tools.mcp import mcp_tools

        return mcp_tools
    raise AttributeError(f"module 'durableagent' has no attribute {name!r}")


__all__ = [
    "NEEDS_HUMAN",
    "Agent",
    "AgentConfig",
    "AgentLoop",
    "AgentLostError",
    "AgentStartError",
    "Attempt",
    "Audit",
    "Blocker",
    "Budget",
    "BudgetError",
    "Cancelled",
    "Code",
    "Config",
    "Control",
    "CorruptJournalError",
    "Decision",
    "DurabilityError",
    "DurableAgentError",
    "FileStore",
    "Fold",
    "ForkError",
    "ForkPlan",
    "ForkedFrom",
    "IndeterminateError",
    "InputMismatchError",
    "InvalidRunIdError",
    "Journal",
    "Lease",
    "LeaseLostError",
    "LoopOutcome",
    "MaxTurnsExceeded",
    "McpConnectionLostError",
    "McpToolError",
    "Message",
    "Model",
    "ModelError",
    "ModelRetryError",
    "Outcome",
    "OverBudgetError",
    "Pending",
    "PlainRunner",
    "Plan",
    "PlanAction",
    "PlanEnding",
    "PlanStep",
    "PolicyGate",
    "Reconcile",
    "Record",
    "Result",
    "RunBusyError",
    "RunChangedError",
    "RunConflictError",
    "RunHalted",
    "RunNotFoundError",
    "RunStatus",
    "RunStopped",
    "RunView",
    "ScriptedModel",
    "SignalError",
    "Status",
    "StepKind",
    "StepRunner",
    "StepView",
    "Store",
    "StoreError",
    "StoreUnavailableError",
    "Summary",
    "Tokens",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolNameCollisionError",
    "ToolPolicyError",
    "Turns",
    "Verdict",
    "Worker",
    "accept_change",
    "audit",
    "check_run_id",
    "code_of",
    "decisions",
    "fork",
    "fork_points",
    "forked_from",
    "forks_of",
    "gate_for",
    "idempotency_key",
    "made_by",
    "marker_for",
    "marker_step",
    "mcp_tools",
    "model_step",
    "open_store",
    "parse_budget",
    "parse_step",
    "plan",
    "plan_fork",
    "run",
    "run_loop",
    "schema_problem",
    "signal",
    "step_tool_name",
    "submit",
    "tool",
    "tool_step",
    "valid_run_id",
    "verdict",
    "view_run",
    "view_store",
]
