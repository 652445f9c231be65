"""agentrun: the command line for durable agent runs.

This module only wires argparse to the command families (one module each: ``runs``,
``decisions``, ``serve``). Exit codes: 0 done, 1 refused or failed (one line on stderr saying
why and what to do), 2 usage. Read commands never create a store; ``submit`` does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ..errors import DurableAgentError
from . import decisions, runs, serve
from .common import Refused, Usage, clean, default_store, login_name, parents


def build_parser() -> argparse.ArgumentParser:
    """The agentrun argument parser."""
    p = argparse.ArgumentParser(
        prog="agentrun",
        description="Durable AI-agent runs: list, inspect, approve, reconcile, serve.",
        epilog="exit codes: 0 done, 1 refused or failed, 2 usage",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    shared = parents()
    for family in (runs, decisions, serve):
        family.register(sub, shared)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run agentrun; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command != "demo" and args.store is None:
        args.store = default_store()
    if hasattr(args, "by") and args.by is None:
        args.by = login_name()
    fn: Callable[[argparse.Namespace], int] = args.fn
    try:
        return fn(args)
    except Usage as e:
        parser.error(str(e))
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
