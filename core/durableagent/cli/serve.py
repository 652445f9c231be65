"""The long-running commands: ``worker``, ``tui``, ``web`` and ``demo``."""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import inspect
import logging
import os
import shutil
import signal as signals
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ..stores import Store, open_store
from ..worker import DEFAULT_BACKOFF, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_BACKOFF
from .common import DEFAULT_DEMO_STORE, Parents, Refused, Usage, describe, store_of
from .runs import cmd_ls


def load_agent(spec: str, root: Path | str) -> Any:
    """``module:attr`` → an Agent. ``attr`` is an Agent, or a function returning one, called
    with no arguments or with the store's path. The function may instead return an async
    context manager that yields the Agent (an ``@asynccontextmanager``): the worker enters it
    on its event loop and leaves it when it stops, so the agent's MCP connections live as
    long as the worker serves; it is then returned as a function making a fresh one, which
    the worker calls again to connect again when a connection is gone."""
    from ..worker import Agent

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise Usage(f"--agent wants MODULE:ATTR (e.g. myagents:helpdesk), not {spec!r}")
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
    if not isinstance(obj, Agent) and not _enterable(obj) and callable(obj):
        fn = obj
        params = inspect.signature(fn).parameters
        obj = fn(root) if params else fn()
        if _enterable(obj):
            # The worker calls it again for a fresh context when the connection is gone.
            fresh = [obj]
            return lambda: fresh.pop() if fresh else (fn(root) if params else fn())
    if not isinstance(obj, Agent) and not _enterable(obj):
        raise Refused(
            f"{spec} is {type(obj).__name__}, not a durableagent.Agent (or a function "
            "returning one, or an async context manager yielding one)"
        )
    return obj


def _enterable(obj: object) -> bool:
    return hasattr(obj, "__aenter__") and hasattr(obj, "__aexit__")


def cmd_worker(args: argparse.Namespace) -> int:
    """Serve the store until SIGINT/SIGTERM."""
    from ..telemetry import TelemetryUnavailable, new_metrics, otlp_endpoint
    from ..telemetry.logs import configure as configure_logs
    from ..worker import Worker

    if args.lease_ttl is not None and args.lease_ttl <= 0:
        raise Usage("--lease-ttl must be a positive number of seconds")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise Usage(f"--metrics-port wants 0..65535 (0 picks a free port), not {args.metrics_port}")
    store = store_of(args, create=True, lease_ttl=args.lease_ttl)
    agent = load_agent(args.agent, store.directory or args.store)
    configure_logs(verbose=args.verbose, fmt=args.log_format, stream=sys.stderr)
    try:
        metrics = None if args.metrics_port is None else new_metrics(store)
    except TelemetryUnavailable as e:
        raise Refused(str(e)) from None
    if not args.verbose:  # watchfiles logs every batch of changes at INFO
        logging.getLogger("watchfiles").setLevel(logging.WARNING)
        # psycopg's pool logs each failed reconnection over several lines; the store says
        # once, in one line, that PostgreSQL is out of reach and when it is back.
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
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
            owner=args.owner,
            metrics=metrics,
            heartbeat=args.heartbeat,
            agent_name=args.agent,
            pin=args.pin,
        )
    except ValueError as e:
        raise Usage(str(e)) from None
    except TelemetryUnavailable as e:
        raise Refused(str(e)) from None
    notifier = None
    if args.notify:  # checked before anything serves: a bad URL is refused at start
        from .notify import notifier_of

        notifier = notifier_of(store, args.notify, flag="--notify")
    # Refused (its owner name is a live worker's) before it says or serves anything.
    worker.register()
    if metrics is not None:
        try:
            port = metrics.serve(args.metrics_port, args.metrics_host)
        except OSError as e:
            worker.heartbeat.forget()  # it never served: its registration goes with it
            where = f"{args.metrics_host}:{args.metrics_port}"
            raise Refused(f"cannot serve metrics on {where} ({e.strerror or e})") from None
        _say(args, f"agentrun worker: metrics at http://{args.metrics_host}:{port}/metrics")
    if worker.telemetry.traces is not None:
        _say(args, f"agentrun worker: traces to {otlp_endpoint()} (OTLP/HTTP)")

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        who = args.owner or f"pid {os.getpid()}"
        _say(args, f"agentrun worker: serving {describe(store)} ({who})")
        telling = None if notifier is None else asyncio.create_task(notifier.serve(stop))
        try:
            await worker.serve(stop)
        finally:
            stop.set()
            if telling is not None:
                await telling
        _say(args, "agentrun worker: stopped")

    try:
        asyncio.run(serve())
    finally:
        if metrics is not None:
            metrics.close()
    return 0


def _say(args: argparse.Namespace, line: str) -> None:
    """The worker's own lines: plain on stderr, or a log record when every line is JSON."""
    if args.log_format == "json":
        logging.getLogger("durableagent.worker").info(line)
    else:
        print(line, file=sys.stderr)


COMMANDS = "agentrun.commands"
"""The entry-point group through which a package adds to agentrun: the terminal UI's package
registers ``tui`` (its ``run_tui``, also what ``demo`` opens) and ``web`` (its ``serve``) there
(pyproject.toml). The core names no module of the UI: it finds them as installed."""


def command(name: str) -> Callable[..., int]:
    """The callable registered as ``name`` in :data:`COMMANDS`, loaded now (never at module
    level: the core must load without the UI). ImportError or AttributeError when what is
    registered cannot be loaded; LookupError when nothing is registered under that name."""
    found = entry_points(group=COMMANDS, name=name)
    if not found:
        raise LookupError(f"nothing registers {name!r} under the {COMMANDS} entry points")
    loaded = next(iter(found)).load()
    if not callable(loaded):
        raise AttributeError(f"{COMMANDS} {name!r} is {type(loaded).__name__}, not a function")
    return loaded  # type: ignore[no-any-return]


def _run_tui() -> Callable[..., int]:
    try:
        return command("tui")
    except (ImportError, AttributeError, LookupError) as e:
        raise Refused(
            f"the terminal UI is not available ({e}); reinstall durableagent with its "
            "dependencies, or use 'agentrun ls' and 'agentrun show'"
        ) from None


def cmd_tui(args: argparse.Namespace) -> int:
    """Open the terminal UI on the store."""
    store = store_of(args)
    run_tui = _run_tui()
    return int(run_tui(store, read_only=args.read_only, poll=args.poll))


def cmd_web(args: argparse.Namespace) -> int:
    """Serve the terminal UI to browsers (textual-serve), behind a token."""
    store = store_of(args)  # refuses a missing store before anything is served
    spec = str(store.directory.resolve()) if store.directory is not None else str(args.store)
    # Loaded here: textual-serve is an extra, and the core must load without the UI.
    try:
        serve = command("web")
    except (ImportError, AttributeError, LookupError) as e:
        raise Refused(
            f"agentrun web needs the web extra ({e}): pip install 'durableagent[web]'"
        ) from None
    if not 0 <= args.port <= 65535:
        raise Usage(f"--port wants 0..65535 (0 picks a free port), not {args.port}")
    # What it cannot serve (the address is taken, ...) it raises as a DurableAgentError,
    # said in one line by main.
    return int(
        serve(
            spec,
            host=args.host,
            port=args.port,
            read_only=args.read_only,
            poll=args.poll,
            allow_hosts=args.allow_host or (),
        )
    )


def cmd_demo(args: argparse.Namespace) -> int:
    """Build (or reuse) the demo store, start a worker for it and open the TUI."""
    from ..demo import build_demo_store, demo_agent, demo_hints, is_demo_store
    from ..worker import Worker, WorkerThread

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
    store = open_store(root, create=False)
    if args.no_tui:
        args.status = None
        args.json = False
        args.store = str(root)
        return cmd_ls(args)
    run_tui = _run_tui()
    # The TUI owns the terminal: the worker's log (and the demo's, and the MCP client's)
    # must not write over it.
    for name in ("durableagent.worker", "durableagent.demo", "durableagent.mcp", "mcp"):
        quiet = logging.getLogger(name)
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
    # A function making the agent: the worker enters it (starting the demo's MCP ticket
    # server) on its own loop, and again should the server's connection be lost.
    agent = functools.partial(demo_agent, root)
    telling = _demo_notices(store, root)
    thread = WorkerThread(Worker(agent, store, backoff=2.0, grace=5.0, rescan=2.0)).start()
    try:
        return int(run_tui(store, hints=demo_hints(root)))
    finally:
        if telling is not None:
            telling[1].stop()
            telling[0].close()
        if not thread.stop():
            print("agentrun demo: the worker did not stop in time", file=sys.stderr)


def _demo_notices(store: Store, root: Path) -> Any:
    """The demo's notifier, to a local webhook writing ``.demo/notices.log`` (SPEC §11):
    said before the TUI starts; None, said too, without the notify extra."""
    from ..notify import BadTargetError
    from ..notify.local import demo_notices

    path = root / ".demo" / "notices.log"
    logging.getLogger("durableagent.notify").addHandler(logging.NullHandler())
    logging.getLogger("durableagent.notify").propagate = False
    try:
        telling = demo_notices(store, path)
    except BadTargetError as e:
        print(f"no notices in this demo: {e}")
        return None
    print(f"notices (a run asking for approval, ...) go to {path}: tail -f it in another terminal")
    return telling


def register(sub: Any, parents: Parents) -> None:
    """Add worker, tui, web and demo to the subcommands."""
    common = parents.store
    s = sub.add_parser(
        "worker",
        parents=[common],
        help="resume ready runs until stopped",
        description=(
            "Resume every ready run of the store and retry failed ones, watching the store "
            "for submissions and signals. MODULE:ATTR names a durableagent.Agent, or a "
            "function returning one (called with the store's path when it takes an "
            "argument) or returning an async context manager that yields one (entered for as "
            "long as the worker serves: how an agent holds its MCP connections); the current "
            "directory is searched first. SIGINT/SIGTERM stop it "
            "gracefully: no new step starts, steps in flight get --grace seconds."
        ),
    )
    s.add_argument("--agent", required=True, metavar="MODULE:ATTR", help="the Agent to run")
    s.add_argument("--concurrency", type=int, default=4, help="runs at once (default 4)")
    s.add_argument(
        "--pin",
        action="store_true",
        help="resume only the runs this agent's version started (new runs too); leave the "
        "others waiting for a worker of their version (docs/deploys.md)",
    )
    s.add_argument(
        "--max-attempts", type=int, default=DEFAULT_MAX_ATTEMPTS, help="tries of a failing run"
    )
    s.add_argument(
        "--backoff", type=float, default=DEFAULT_BACKOFF, help="first retry delay, seconds"
    )
    s.add_argument(
        "--max-backoff", type=float, default=DEFAULT_MAX_BACKOFF, help="longest retry delay"
    )
    s.add_argument("--grace", type=float, default=10.0, help="seconds for steps in flight")
    s.add_argument("--rescan", type=float, default=5.0, help="look at every run every N seconds")
    s.add_argument(
        "--owner", default=None, help="this worker's name in leases and attempts (default host:pid)"
    )
    s.add_argument(
        "--lease-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long this worker may go without renewing a run's lease before another "
        "worker may take the run over (default 30)",
    )
    s.add_argument(
        "--heartbeat",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="register in the store every N seconds (default 5; see 'agentrun workers')",
    )
    s.add_argument(
        "--notify",
        action="append",
        metavar="URL",
        help="also send notices to this Apprise URL (as 'agentrun notify --to URL')",
    )
    s.add_argument("-v", "--verbose", action="store_true", help="log every decision")
    s.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object per line (fields run, attempt, step, owner)",
    )
    s.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="N",
        help="serve Prometheus metrics at http://HOST:N/metrics (extra: durableagent[metrics])",
    )
    s.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address for --metrics-port (127.0.0.1; 0.0.0.0 for a scraper on another host)",
    )
    s.set_defaults(fn=cmd_worker)

    s = sub.add_parser("tui", parents=[common], help="the terminal supervisor")
    s.add_argument("--read-only", action="store_true", help="no approve/deny/reconcile")
    s.add_argument("--poll", action="store_true", help="poll instead of watching files")
    s.set_defaults(fn=cmd_tui)

    s = sub.add_parser(
        "web",
        parents=[common],
        help="the terminal supervisor in a browser (extra: durableagent[web])",
        description=(
            "Serve 'agentrun tui' to browsers through textual-serve: one app process per "
            "browser tab, ended when the tab closes. Every address needs the random token "
            "printed in the URL at start, localhost included; requests from other sites "
            "(Origin) or under another name (Host) are refused. An address other than "
            "loopback lets anyone with the URL approve writes: prefer --read-only there."
        ),
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    s.add_argument("--port", type=int, default=8000, help="port (8000; 0 picks a free one)")
    s.add_argument("--read-only", action="store_true", help="no approve/deny/reconcile")
    s.add_argument("--poll", action="store_true", help="poll instead of watching files")
    s.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="another name browsers use for this server, e.g. behind a proxy (repeatable)",
    )
    s.set_defaults(fn=cmd_web)

    s = sub.add_parser(
        "demo",
        help="a demo store with runs in every state, a worker and the TUI",
        description=(
            "Build a demo store (default ./agentrun-demo, not ./runs, so your own runs are "
            "never touched), start a worker for the demo helpdesk agent and open the TUI."
        ),
    )
    s.add_argument(
        "--store", default=argparse.SUPPRESS, metavar="DIR", help=f"default {DEFAULT_DEMO_STORE}"
    )
    s.add_argument("--fresh", action="store_true", help="delete and rebuild the demo store")
    s.add_argument("--no-tui", action="store_true", help="build, print 'ls' and exit")
    s.set_defaults(fn=cmd_demo)
