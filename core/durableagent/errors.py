"""Every error durableagent raises on purpose derives from :class:`DurableAgentError`.

Each carries the fields a caller needs (``.run_id``, ``.step``, ``.line``) and a message that
says what was wrong and what to do about it.
"""

from __future__ import annotations


class DurableAgentError(Exception):
    """Base class of every durableagent error."""


class InvalidRunIdError(DurableAgentError, ValueError):
    """A run id that is not safe to use as a file name."""

    def __init__(self, run_id: object) -> None:
        self.run_id = run_id
        super().__init__(
            f"invalid run id {run_id!r}: use 1 to 128 ASCII letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )


class StoreError(DurableAgentError):
    """The store cannot do what was asked (missing, a symlink, a short write, ...)."""


class DurabilityError(StoreError):
    """fsync failed: the kernel may have dropped the data. Reload from disk; never retry."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached (a database server down or restarting, a connection cut).
    Nothing half-written: each write is one transaction. Not the run's fault: a worker tries
    again later without counting a failure."""


class RunConflictError(StoreError):
    """A run copied into a store that already holds it with other records: refused, nothing
    written (``agentrun copy`` goes on with the other runs)."""

    def __init__(self, run_id: str, where: str, there: int, given: int) -> None:
        self.run_id = run_id
        super().__init__(
            f"run {run_id!r} is already in {where} with other records ({there} there, {given} "
            "to copy); not copied: compare them with 'agentrun export', then remove one"
        )


class LeaseLostError(StoreError):
    """A runner's lease is no longer current (it expired while the runner was paused or cut
    off, or another runner took the run over): nothing was written, and the runner must stop."""

    def __init__(self, run_id: str, epoch: int, detail: str = "") -> None:
        self.run_id = run_id
        self.epoch = epoch
        more = f" ({detail})" if detail else ""
        super().__init__(
            f"lost the lease of run {run_id!r} (epoch {epoch}){more}: another runner has it "
            "now; nothing was written"
        )


class CorruptJournalError(StoreError):
    """A journal line that is not a torn tail does not parse, fails its crc or breaks the seqs."""

    def __init__(self, run_id: str, line: int, reason: str) -> None:
        self.run_id = run_id
        self.line = line
        self.reason = reason
        super().__init__(
            f"journal of run {run_id!r} is corrupt at line {line}: {reason}; "
            "the file was left as it is: inspect or restore it by hand"
        )


class RunBusyError(DurableAgentError):
    """Another runner (in this process or another one) holds the run's lease."""

    def __init__(self, run_id: str, holder: str = "") -> None:
        self.run_id = run_id
        self.holder = holder
        who = f" (held by {holder})" if holder else ""
        super().__init__(f"run {run_id!r} is being executed by another runner{who}; try later")


class RunNotFoundError(DurableAgentError, LookupError):
    """The run has no journal."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"no run {run_id!r} in this store: start it with an input (agentrun submit) "
            "or check the id and --store"
        )

    def __str__(self) -> str:  # LookupError would quote the message
        return str(self.args[0])


class InputMismatchError(DurableAgentError):
    """A known run id was given an input other than the one it was started with."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(
            f"run {run_id!r} was started with a different input; "
            "a run id names one run: use a new id for a new question"
        )


class IndeterminateError(DurableAgentError):
    """A write step started and never recorded a result: a human must reconcile it."""

    def __init__(self, step: str) -> None:
        self.step = step
        super().__init__(
            f"write step {step!r} started but its result was never recorded: it may or may not "
            "have happened. Check the external system, then reconcile it as done (with the "
            "result) or retry"
        )


class RunStopped(DurableAgentError):
    """The runner asked to stop (a worker shutting down): no new step was started. The run is
    not failed; it resumes from its journal on the next attempt."""

    def __init__(self, step: str) -> None:
        self.step = step
        super().__init__(f"stopped before step {step!r}: the runner is shutting down")


class RunHalted(DurableAgentError):
    """A human's control signal (``move``, ``cancel``, ``pause``) or the run's budget stops
    the run: no step starts after it. ``.signal`` is the signal's name (``budget`` for a
    limit), ``.step`` the step that did not start (or whose read was cancelled), ``.why``
    the reason in words."""

    def __init__(self, run_id: str, signal: str, step: str, why: str) -> None:
        self.run_id = run_id
        self.signal = signal
        self.step = step
        self.why = why
        where = f" before step {step!r}" if step else ""
        super().__init__(f"run {run_id!r} stopped{where}: {why}")


class OverBudgetError(RunHalted):
    """Starting ``step`` would break a limit of the run's budget; nothing was called.
    ``agentrun budget RUN --add ...`` lets the run go on."""

    def __init__(self, run_id: str, step: str, why: str) -> None:
        super().__init__(run_id, "budget", step, f"over budget: {why}")
        self.limit = why


class SignalError(DurableAgentError):
    """A signal was refused; nothing was written."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(message)


class ForkError(DurableAgentError):
    """A fork was refused (nothing written), or a run is a fork whose copy is not whole yet."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(message)


class MaxTurnsExceeded(DurableAgentError):
    """The model kept asking for tools past the configured number of turns."""

    def __init__(self, max_turns: int) -> None:
        self.max_turns = max_turns
        super().__init__(f"the model made {max_turns} calls without a final answer (max_turns)")


class RunChangedError(SignalError):
    """A signal pinned to what a human saw (``expect_seq``) found the run moved on."""

    def __init__(self, run_id: str, expected: int, actual: int) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(
            run_id,
            f"run {run_id!r} changed since you looked (seq {expected} then, {actual} now); "
            "nothing was written: look at it again",
        )


class ModelError(DurableAgentError):
    """A model call produced no usable reply (the provider refused the request, or answered
    with something that is not a reply). The model step is not recorded: the next attempt
    calls the model again. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ModelRetryError(ModelError):
    """A model call failed in a way that passes (rate limited, overloaded, a server error, a
    lost connection). ``retry_after`` is how long the provider asked us to wait (its
    ``Retry-After``), in seconds, or None: a worker waits at least that long before the next
    attempt."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status)


class ToolNameCollisionError(DurableAgentError, ValueError):
    """Two tools of an agent share a name (two MCP servers both offer ``search``, or a server
    offers a tool named like one of ours). ``.name``, and ``.first`` and ``.second``: where
    each came from."""

    def __init__(self, name: str, first: str, second: str) -> None:
        self.name = name
        self.first = first
        self.second = second
        super().__init__(
            f"two tools are named {name!r}: one from {first}, one from {second}; the model "
            "could not tell them apart. Rename one, or give one server's tools a prefix "
            "(mcp_tools(client, prefix='crm_'))"
        )


class McpToolError(DurableAgentError):
    """An MCP tool call got no answer from its server (the server is down, the connection
    broke, the call timed out). The step is not recorded: a read is run again on the next
    attempt, an idempotent write is run again with the same key, and any other write stops
    the run as indeterminate, since the server may have acted. ``.server``, ``.tool``."""

    def __init__(self, server: str, tool: str, detail: str) -> None:
        self.server = server
        self.tool = tool
        super().__init__(f"MCP server {server!r} gave no answer to {tool}: {detail}")


class ToolPolicyError(DurableAgentError, ValueError):
    """A tool's policy cannot be used as given (an override key that does not exist, a value
    that is not a bool, an idempotent read)."""


class AgentStartError(DurableAgentError):
    """A worker's agent did not start: entering it (connecting the MCP servers its tools come
    from) failed, so no run was touched. Fix what it names and start the worker again."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the agent did not start: {detail}")


class AgentLostError(DurableAgentError):
    """Raised by a tool whose connection is gone for good (the MCP server's process exited,
    the connection was torn down): a worker connects its agent again (see ``holder.py``)."""


class McpConnectionLostError(McpToolError, AgentLostError):
    """An MCP tool call found its connection to the server closed. The step is not recorded
    (as for any :class:`McpToolError`); a worker connects to the server again before it
    starts another run."""
