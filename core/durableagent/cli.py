"""agentrun: the command line for durable agent runs.

Exit codes: 0 done, 1 refused or failed (one line on stderr saying why and what to do),
2 usage. Read commands never create a store; ``submit`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import importlib
import inspect
import json
import logging
import os
import shutil
import signal as signals
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import DurableAgentError
from .journal import Reconcile
from .labels import ATTENTION_RANK, STATUS_GLYPH, ago
from .messages import Message
from .record import RUN_COMPLETED, RUN_STARTED, SIGNAL, STEP_COMPLETED, STEP_STARTED, Record
from .run import signal, submit
from .store import FileStore, check_run_id
from .view import RunStatus, RunView, view_store

DEFAULT_STORE = "./runs"
DEFAULT_DEMO_STORE = "./agentrun-demo"


class Refused(Exception):
    """A command that cannot do what was asked: exit 1 with this message."""


# -- helpers --------------------------------------------------------------------------------


def _clean(text: object) -> str:
    """Journal text made safe for a terminal: control characters (escape sequences could
    restyle or rewrite the screen) are shown escaped, never interpreted."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in s)


def _one_line(text: object, width: int = 72) -> str:
    s = _clean(str(text).replace("\n", " "))
    return s if len(s) <= width else s[: width - 1] + "…"


def _args_text(arguments: Any) -> str:
    return _clean(json.dumps(arguments, ensure_ascii=False, sort_keys=True))


def _stamp(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _open_store(args: argparse.Namespace) -> FileStore:
    return FileStore(args.store, create=False)


def _dump(value: Any) -> str:
    # ensure_ascii: the output holds no raw control or bidi characters from a journal.
    return json.dumps(value, sort_keys=False)


def _status_word(view: RunView) -> str:
    return f"{STATUS_GLYPH[view.status]} {view.status}"


def view_dict(view: RunView, *, records: bool = True) -> dict[str, Any]:
    """A RunView as plain JSON (what ``show --json`` prints)."""
    d: dict[str, Any] = {
        "run_id": view.run_id,
        "status": str(view.status),
        "needs_human": view.needs_human,
        "waiting_on": view.waiting_on,
        "steps": len(view.steps),
        "model_calls": view.model_calls,
        "started_at": view.started_at,
        "last_activity": view.last_activity,
        "last_seq": view.last_seq,
        "error": view.error,
        "pending": [p.to_dict() for p in view.pending],
        "indeterminate": None,
        "answer": None if view.answer is None else view.answer.to_dict(),
        "leased": view.leased,
    }
    if view.indeterminate is not None:
        s = view.indeterminate
        d["indeterminate"] = {
            "step": s.name,
            "tool": s.call.name if s.call else None,
            "arguments": s.call.arguments if s.call else None,
            "started_at": s.started_at,
            "attempts": s.attempts,
        }
    if records:
        d["input"] = [m.to_dict() for m in view.input]
        d["step_views"] = [
            {
                "name": s.name,
                "kind": s.kind,
                "write": s.write,
                "started": s.started,
                "completed": s.completed,
                "result": s.result,
                "attempts": s.attempts,
                "started_at": s.started_at,
                "completed_at": s.completed_at,
                "call": None if s.call is None else s.call.to_dict(),
            }
            for s in view.steps
        ]
        d["records"] = [r.to_dict() for r in view.records]
        d["outcome"] = None if view.outcome is None else view.outcome.to_dict()
    return d


def _load_views(store: FileStore) -> list[RunView]:
    views = [view_store(store, i) for i in store.run_ids()]
    views.sort(key=lambda v: (ATTENTION_RANK[v.status], -(v.last_activity or 0.0), v.run_id))
    return views


# -- read commands --------------------------------------------------------------------------


def cmd_ls(args: argparse.Namespace) -> int:
    """List runs, needs-attention first."""
    store = _open_store(args)
    views = _load_views(store)
    if args.status:
        views = [v for v in views if v.status in args.status]
    if args.json:
        for v in views:
            print(_dump(view_dict(v, records=False)))
        return 0
    if not views:
        print(f"no runs in {store.root}" + (" with that status" if args.status else ""))
        return 0
    now = time.time()
    rows = [("STATUS", "RUN", "STEPS", "MODEL CALLS", "WAITING ON", "LAST ACTIVITY")]
    for v in views:
        rows.append(
            (
                _status_word(v),
                v.run_id,
                str(len(v.steps)),
                str(v.model_calls),
                _one_line(v.waiting_on, 60) or "-",
                ago(v.last_activity, now),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _describe(r: Record) -> str:
    data = r.data if isinstance(r.data, dict) else {}
    if r.type == RUN_STARTED:
        msgs = data.get("input") or []
        first = msgs[0].get("content", "") if msgs and isinstance(msgs[0], dict) else ""
        return f"input: {_one_line(first)}"
    if r.type == STEP_STARTED:
        return "write" if data.get("write") else ""
    if r.type == STEP_COMPLETED:
        if r.kind == "model":
            calls = data.get("tool_calls") or []
            if calls:
                return "asks " + ", ".join(
                    f"{_clean(c.get('name'))}({_one_line(_args_text(c.get('arguments')), 60)})"
                    for c in calls
                    if isinstance(c, dict)
                )
            return f"answer: {_one_line(data.get('content', ''))}"
        error = " (error)" if data.get("is_error") else ""
        return f"result{error}: {_one_line(data.get('content', ''))}"
    if r.type == SIGNAL:
        payload = data.get("payload") or {}
        what = _clean(data.get("name"))
        if what == "reconcile":
            what += f" {_clean(payload.get('outcome'))}"
            if payload.get("result") is not None:
                what += f": {_one_line(payload.get('result'), 40)}"
        else:
            what += f" {_clean(payload.get('marker'))}"
        if data.get("by"):
            what += f" by {_clean(data['by'])}"
        if data.get("reason"):
            what += f" ({_one_line(data['reason'], 60)})"
        return what
    if r.type == RUN_COMPLETED:
        msg = data.get("message") or {}
        return f"answer: {_one_line(msg.get('content', '') if isinstance(msg, dict) else '')}"
    return ""


def cmd_show(args: argparse.Namespace) -> int:
    """Print one run: its timeline and what it waits on."""
    store = _open_store(args)
    check_run_id(args.run)
    view = view_store(store, args.run)
    if view.status == RunStatus.CORRUPT:
        raise Refused(view.error)
    if not view.records:
        raise Refused(f"no run {args.run!r} in {store.root}; see 'agentrun ls'")
    if args.json:
        print(_dump(view_dict(view)))
        return 0
    print(f"run      {view.run_id}")
    print(f"status   {_status_word(view)}")
    print(f"started  {_stamp(view.started_at)}")
    print(f"last     {_stamp(view.last_activity)}")
    print(f"steps    {len(view.steps)}, model calls {view.model_calls}")
    print()
    print("timeline")
    for r in view.records:
        when = time.strftime("%H:%M:%S", time.localtime(r.at))
        step = _clean(r.step) if r.step else ""
        desc = _describe(r)
        print(f"  {r.seq:>4}  {when}  {r.type:<14} {step:<28} {desc}".rstrip())
    print()
    run = view.run_id
    if view.status == RunStatus.AWAITING_APPROVAL:
        print(f"waiting for approval ({len(view.pending)}):")
        for p in view.pending:
            print(f"  marker     {_clean(p.marker)}")
            print(f"  tool       {_clean(p.tool)}")
            print(f"  arguments  {_args_text(p.arguments)}")
            print()
        print(f"approve:  agentrun approve {run} MARKER   (or --all)")
        print(f"deny:     agentrun deny {run} MARKER --reason WHY")
    elif view.status == RunStatus.INDETERMINATE and view.indeterminate is not None:
        s = view.indeterminate
        print(f"indeterminate: write step {_clean(s.name)} started and never recorded a result")
        if s.call is not None:
            print(f"  tool       {_clean(s.call.name)}")
            print(f"  arguments  {_args_text(s.call.arguments)}")
        print("it may or may not have happened: check the external system, then")
        print(f"  agentrun reconcile {run} {_clean(s.name)} --done RESULT   (it happened)")
        print(f"  agentrun reconcile {run} {_clean(s.name)} --retry         (it did not)")
        from .demo import demo_dir, is_demo_store

        if is_demo_store(store.root):
            print(f"(demo: the ticket system is {demo_dir(store.root) / 'tickets.json'})")
    elif view.status == RunStatus.FAILED:
        print(f"failed: {_clean(view.error)}")
        print(f"fix the cause, then: agentrun retry {run}")
    elif view.status == RunStatus.COMPLETED and view.answer is not None:
        print(f"answer: {_clean(view.answer.content)}")
    elif view.status == RunStatus.READY:
        print("ready: a worker will resume it (agentrun worker --agent MODULE:ATTR)")
    elif view.status == RunStatus.RUNNING:
        holder = store.lease_holder(run) or {}
        who = f" (pid {holder['pid']} on {holder['host']})" if "pid" in holder else ""
        print(f"running: a worker holds its lease{_clean(who)}")
    return 0


# -- write commands -------------------------------------------------------------------------


def cmd_submit(args: argparse.Namespace) -> int:
    """Record a new run's input for a worker to execute."""
    if not args.text.strip():
        raise Refused("the run's text is empty: say what the agent should do")
    store = FileStore(args.store)
    check_run_id(args.run)
    known = bool(store.load(args.run))
    submit(store, args.run, [Message("user", args.text)])
    if known:
        print(f"run {args.run} was already submitted with this text; nothing changed")
    else:
        print(f"submitted {args.run}; a worker will pick it up")
    return 0


def _signal(args: argparse.Namespace, name: str, payload: Any) -> Record:
    return signal(
        _open_store(args), args.run, name, payload, by=args.by or None, reason=args.reason
    )


def cmd_approve(args: argparse.Namespace) -> int:
    """Approve one pending call (by marker) or, with --all, every pending call."""
    if args.all == bool(args.marker):
        raise _Usage("approve needs a MARKER or --all (not both)")
    if not args.all:
        _signal(args, "approve", {"marker": args.marker})
        print(f"approved {args.marker}")
        return 0
    store = _open_store(args)
    check_run_id(args.run)
    view = view_store(store, args.run)
    if not view.records and view.status != RunStatus.CORRUPT:
        raise Refused(f"no run {args.run!r} in {store.root}; see 'agentrun ls'")
    if not view.pending:
        raise Refused(f"run {args.run} has no pending approvals (it is {view.status})")
    for p in view.pending:
        _signal(args, "approve", {"marker": p.marker})
        print(f"approved {_clean(p.marker)}")
    return 0


def cmd_deny(args: argparse.Namespace) -> int:
    """Deny one pending call; the model reads the reason."""
    _signal(args, "deny", {"marker": args.marker})
    print(f"denied {args.marker}")
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    """Settle an indeterminate write: it happened (--done RESULT) or run it again (--retry)."""
    if args.done is not None:
        payload = Reconcile(args.step, "done", args.done)
    else:
        payload = Reconcile(args.step, "retry")
    _signal(args, "reconcile", payload)
    print(f"reconciled {args.step} as {payload.outcome}; a worker will resume {args.run}")
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    """Give a failed run a fresh budget of worker attempts."""
    from .worker import reset_attempts

    store = _open_store(args)
    check_run_id(args.run)
    view = view_store(store, args.run)
    if view.status != RunStatus.FAILED:
        if not view.records and view.status != RunStatus.CORRUPT:
            raise Refused(f"no run {args.run!r} in {store.root}; see 'agentrun ls'")
        raise Refused(f"run {args.run} is {view.status}, not failed: nothing to retry")
    reset_attempts(store.root, args.run)
    print(f"run {args.run} will be retried by the next worker that looks (within a second)")
    return 0


# -- worker, tui, demo ----------------------------------------------------------------------


def load_agent(spec: str, root: Path) -> Any:
    """``module:attr`` → an Agent. ``attr`` is an Agent, or a function returning one, called
    with no arguments or with the store's path."""
    from .worker import Agent

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise _Usage(f"--agent wants MODULE:ATTR (e.g. myagents:helpdesk), not {spec!r}")
    # Like `python -m`, let modules in the current directory be found.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise Refused(f"cannot import {module_name!r}: {e}") from None
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise Refused(f"module {module_name!r} has no attribute {attr!r}") from None
    if not isinstance(obj, Agent) and callable(obj):
        params = inspect.signature(obj).parameters
        obj = obj(root) if params else obj()
    if not isinstance(obj, Agent):
        raise Refused(
            f"{spec} is {type(obj).__name__}, not a durableagent.Agent (or a function "
            "returning one)"
        )
    return obj


def cmd_worker(args: argparse.Namespace) -> int:
    """Serve the store until SIGINT/SIGTERM."""
    from .worker import Worker

    store = FileStore(args.store)
    agent = load_agent(args.agent, store.root)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    if not args.verbose:  # watchfiles logs every batch of changes at INFO
        logging.getLogger("watchfiles").setLevel(logging.WARNING)
    try:
        worker = Worker(
            agent,
            store,
            concurrency=args.concurrency,
            max_attempts=args.max_attempts,
            backoff=args.backoff,
            max_backoff=args.max_backoff,
            grace=args.grace,
            rescan=args.rescan,
            debounce=args.debounce,
        )
    except ValueError as e:
        raise _Usage(str(e)) from None

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"agentrun worker: serving {store.root} (pid {os.getpid()})", file=sys.stderr)
        await worker.serve(stop)
        print("agentrun worker: stopped", file=sys.stderr)

    asyncio.run(serve())
    return 0


def _run_tui() -> Callable[..., int]:
    # Imported here, never at module level: the core must load without textual.
    try:
        run_tui = getattr(importlib.import_module("durableagent_tui"), "run_tui", None)
    except ImportError as e:
        run_tui, why = None, str(e)
    else:
        why = "durableagent_tui has no run_tui"
    if not callable(run_tui):
        raise Refused(
            f"the terminal UI is not available ({why}); reinstall durableagent with its "
            "dependencies, or use 'agentrun ls' and 'agentrun show'"
        )
    return run_tui  # type: ignore[no-any-return]


def cmd_tui(args: argparse.Namespace) -> int:
    """Open the terminal UI on the store."""
    store = _open_store(args)
    run_tui = _run_tui()
    return int(run_tui(store.root, read_only=args.read_only, poll=args.poll))


def cmd_demo(args: argparse.Namespace) -> int:
    """Build (or reuse) the demo store, start a worker for it and open the TUI."""
    from .demo import build_demo_store, demo_agent, is_demo_store
    from .worker import Worker, WorkerThread

    root = Path(args.store if args.store is not None else DEFAULT_DEMO_STORE)
    has_content = root.exists() and (not root.is_dir() or any(root.iterdir()))
    if has_content and args.fresh:
        if not is_demo_store(root):
            raise Refused(f"{root} is not a demo store; --fresh only deletes demo stores")
        shutil.rmtree(root)
        has_content = False
    if has_content:
        if not is_demo_store(root):
            raise Refused(
                f"{root} is not empty and not a demo store: pick another --store directory"
            )
        print(f"reusing the demo store at {root} (--fresh rebuilds it)")
    else:
        print(f"building the demo store at {root} ...")
        build_demo_store(root)
    store = FileStore(root, create=False)
    if args.no_tui:
        args.status = None
        args.json = False
        args.store = str(root)
        return cmd_ls(args)
    run_tui = _run_tui()
    # The TUI owns the terminal: the worker's log must not write over it.
    worker_log = logging.getLogger("durableagent.worker")
    worker_log.addHandler(logging.NullHandler())
    worker_log.propagate = False
    thread = WorkerThread(
        Worker(demo_agent(root), store, backoff=2.0, grace=5.0, rescan=2.0)
    ).start()
    try:
        return int(run_tui(root))
    finally:
        if not thread.stop():
            print("agentrun demo: the worker did not stop in time", file=sys.stderr)


# -- parsing --------------------------------------------------------------------------------


class _Usage(Exception):
    """Bad usage found after parsing: exit 2."""


def _default_store() -> str:
    return os.environ.get("AGENTRUN_STORE") or DEFAULT_STORE


def build_parser() -> argparse.ArgumentParser:
    """The agentrun argument parser."""
    store_help = "the store directory (default: $AGENTRUN_STORE, else ./runs)"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=None, metavar="DIR", help=store_help)
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON")
    by = argparse.ArgumentParser(add_help=False)
    by.add_argument("--by", default=None, help="who decides (default: your login name)")
    by.add_argument("--reason", default=None, help="why (recorded in the journal)")

    p = argparse.ArgumentParser(
        prog="agentrun",
        description="Durable AI-agent runs: list, inspect, approve, reconcile, serve.",
        epilog="exit codes: 0 done, 1 refused or failed, 2 usage",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    s = sub.add_parser("ls", parents=[common, as_json], help="list runs, needs-attention first")
    s.add_argument(
        "--status",
        action="append",
        choices=[str(x) for x in RunStatus],
        help="only runs with this status (repeatable)",
    )
    s.set_defaults(fn=cmd_ls)

    s = sub.add_parser("show", parents=[common, as_json], help="one run's timeline")
    s.add_argument("run", metavar="RUN")
    s.set_defaults(fn=cmd_show)

    s = sub.add_parser("submit", parents=[common], help="submit a new run for a worker")
    s.add_argument("run", metavar="RUN")
    s.add_argument("text", metavar="TEXT", help="the user's request")
    s.set_defaults(fn=cmd_submit)

    s = sub.add_parser("approve", parents=[common, by], help="approve a pending tool call")
    s.add_argument("run", metavar="RUN")
    s.add_argument("marker", metavar="MARKER", nargs="?", help="as printed by 'agentrun show'")
    s.add_argument("--all", action="store_true", help="approve every pending call of the run")
    s.set_defaults(fn=cmd_approve)

    s = sub.add_parser("deny", parents=[common, by], help="deny a pending tool call")
    s.add_argument("run", metavar="RUN")
    s.add_argument("marker", metavar="MARKER")
    s.set_defaults(fn=cmd_deny)

    s = sub.add_parser("reconcile", parents=[common, by], help="settle an indeterminate write")
    s.add_argument("run", metavar="RUN")
    s.add_argument("step", metavar="STEP")
    how = s.add_mutually_exclusive_group(required=True)
    how.add_argument("--done", metavar="RESULT", help="it happened; RESULT is what it produced")
    how.add_argument("--retry", action="store_true", help="it did not happen; run it again")
    s.set_defaults(fn=cmd_reconcile)

    s = sub.add_parser(
        "retry",
        parents=[common],
        help="let workers retry a failed run that used up its attempts",
        description=(
            "Workers retry a failed run with exponential backoff until it has failed "
            "--max-attempts times (counted for all workers in <store>/.worker/), then leave "
            "it failed. Fix the cause, then run this: it clears the count and the next worker "
            "tries again within a second. Any new signal on the run clears it too."
        ),
    )
    s.add_argument("run", metavar="RUN")
    s.set_defaults(fn=cmd_retry)

    s = sub.add_parser(
        "worker",
        parents=[common],
        help="resume ready runs until stopped",
        description=(
            "Resume every ready run of the store and retry failed ones, watching the store "
            "for submissions and signals. MODULE:ATTR names a durableagent.Agent, or a "
            "function returning one (called with the store's path when it takes an "
            "argument); the current directory is searched first. SIGINT/SIGTERM stop it "
            "gracefully: no new step starts, steps in flight get --grace seconds."
        ),
    )
    s.add_argument("--agent", required=True, metavar="MODULE:ATTR", help="the Agent to run")
    s.add_argument("--concurrency", type=int, default=4, help="runs at once (default 4)")
    s.add_argument("--max-attempts", type=int, default=3, help="tries of a failing run")
    s.add_argument("--backoff", type=float, default=1.0, help="first retry delay, seconds")
    s.add_argument("--max-backoff", type=float, default=60.0, help="longest retry delay")
    s.add_argument("--grace", type=float, default=10.0, help="seconds for steps in flight")
    s.add_argument("--rescan", type=float, default=5.0, help="full rescan every N seconds")
    s.add_argument("--debounce", type=int, default=200, help="watch debounce, ms")
    s.add_argument("-v", "--verbose", action="store_true", help="log every decision")
    s.set_defaults(fn=cmd_worker)

    s = sub.add_parser("tui", parents=[common], help="the terminal supervisor")
    s.add_argument("--read-only", action="store_true", help="no approve/deny/reconcile")
    s.add_argument("--poll", action="store_true", help="poll instead of watching files")
    s.set_defaults(fn=cmd_tui)

    s = sub.add_parser(
        "demo",
        help="a demo store with runs in every state, a worker and the TUI",
        description=(
            "Build a demo store (default ./agentrun-demo, not ./runs, so your own runs are "
            "never touched), start a worker for the demo helpdesk agent and open the TUI."
        ),
    )
    s.add_argument("--store", default=None, metavar="DIR", help=f"default {DEFAULT_DEMO_STORE}")
    s.add_argument("--fresh", action="store_true", help="delete and rebuild the demo store")
    s.add_argument("--no-tui", action="store_true", help="build, print 'ls' and exit")
    s.set_defaults(fn=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run agentrun; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "demo" and args.store is None:
        args.store = _default_store()
    if hasattr(args, "by") and args.by is None:
        args.by = _login_name()
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        return fn(args)
    except _Usage as e:
        parser.error(str(e))
    except (DurableAgentError, Refused) as e:
        print(f"agentrun {args.command}: {_clean(e)}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `agentrun ls | head`: the reader has what it wanted
        return 0
    except OSError as e:
        print(f"agentrun {args.command}: {e.strerror or e}: {e.filename or ''}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _login_name() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


if __name__ == "__main__":
    sys.exit(main())
