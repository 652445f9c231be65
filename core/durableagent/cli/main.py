"""agentrun: the command line for durable agent runs.

This module only wires argparse to the command families (one module each: ``runs``,
``decisions``, ``controls``, ``operations``, ``deploys``, ``serve``, ``workers``, ``notify``,
``stores``, ``completion``). Exit
codes: 0 done, 1 refused or failed (one line on stderr saying why and what to do; ``store
unavailable: ...`` when the store's server did not answer), 2 usage (with the command's own
usage line), 130 interrupted (ctrl+c); ``show --follow`` adds 3: the run stopped for a
human, and 4: a human stopped it (cancelled, paused). Read commands never create a store;
``submit`` does. ``--store`` goes before or after the command (after wins).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .. import __version__
from ..errors import DurableAgentError, StoreUnavailableError
from ..people import login_name
from . import (
    completion,
    controls,
    decisions,
    deploys,
    notify,
    operations,
    runs,
    serve,
    stores,
    workers,
)
from .common import STORE_HELP, Refused, Usage, clean, default_store, parents


def build_parser() -> argparse.ArgumentParser:
    """The agentrun argument parser."""
    p = argparse.ArgumentParser(
        prog="agentrun",
        description="Durable AI-agent runs: list, inspect, approve, reconcile, fork, audit, serve.",
        epilog="exit codes: 0 done, 1 refused or failed, 2 usage",
    )
    p.add_argument("--version", action="version", version=f"agentrun {__version__}")
    p.add_argument("--store", default=None, metavar="STORE", help=STORE_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    shared = parents()
    for family in (
        runs,
        decisions,
        controls,
        operations,
        serve,
        stores,
        workers,
        deploys,
        notify,
        completion,
    ):
        family.register(sub, shared)
    # A usage error found after parsing is told with the command's own usage line.
    for command in sub.choices.values():
        command.set_defaults(command_parser=command)
    completion.attach(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run agentrun; returns the exit code."""
    parser = build_parser()
    completion.complete_if_asked(parser)
    args, extra = parser.parse_known_args(argv)
    if extra:  # told with the command's own usage line, not the top level's
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command != "demo" and args.store is None:
        args.store = default_store()
    fn: Callable[[argparse.Namespace], int] = args.fn
    if hasattr(args, "by") and args.by is not None and not args.by.strip():
        args.command_parser.error("--by must name someone (or leave it out: your login name)")
    if hasattr(args, "by"):
        args.by = args.by.strip() if args.by is not None else login_name()
    try:
        return fn(args)
    except Usage as e:
        command: argparse.ArgumentParser = args.command_parser
        command.error(str(e))
    except StoreUnavailableError as e:
        # The server did not answer: nothing is known about the runs, none is corrupt.
        print(f"agentrun {args.command}: store unavailable: {clean(e)}", file=sys.stderr)
        return 1
    except (DurableAgentError, Refused) as e:
        print(f"agentrun {args.command}: {clean(e)}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `agentrun ls | head`: the reader has what it wanted
        return 0
    except OSError as e:
        print(f"agentrun {args.command}: {e.strerror or e}: {e.filename or ''}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
