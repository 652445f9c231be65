"""Shell completion: ``agentrun completion bash|zsh`` prints the code that registers agentrun
with argcomplete, and the completers read run ids, pending markers, indeterminate steps and the
steps a fork may start at from the store named on the command line being completed.

argcomplete is imported only while a shell asks for completions (``_ARGCOMPLETE`` is set) or
when the registration code is printed: ``import durableagent.cli`` stays as light as before.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..fork import fork_points
from ..labels import STATUS_BY_WORD
from ..stores import Store, open_store
from ..view import RunView, view_store
from .common import Parents, Refused, default_store

SHELLS = ("bash", "zsh")
Completer = Callable[..., Iterable[str]]


def complete_if_asked(parser: argparse.ArgumentParser) -> None:
    """When a shell asks for completions, answer and exit; otherwise return at once."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        argcomplete = importlib.import_module("argcomplete")
    except ImportError:  # no completions rather than a traceback in the user's shell
        return
    # Options only once a "-" is typed: a tab after RUN offers markers, not --by and --reason.
    argcomplete.autocomplete(parser, always_complete_options=False)


def cmd_completion(args: argparse.Namespace) -> int:
    """Print the shell code that makes ``agentrun`` complete dynamically."""
    try:
        argcomplete = importlib.import_module("argcomplete")
    except ImportError as e:
        raise Refused(f"completion needs argcomplete ({e}): pip install argcomplete") from None
    print(argcomplete.shellcode(["agentrun"], shell=args.shell), end="")
    return 0


# -- completers: never raise, never print (the shell is reading our output) -------------------


def _store(parsed_args: argparse.Namespace) -> Store:
    spec = getattr(parsed_args, "store", None) or default_store()
    return open_store(os.path.expanduser(spec), create=False)


def _view(parsed_args: argparse.Namespace) -> RunView:
    return view_store(_store(parsed_args), parsed_args.run)


def quietly(fn: Callable[[str, argparse.Namespace], Iterable[str]]) -> Completer:
    """A completer that offers nothing, rather than fail, when the store is missing, the run
    unknown or a journal corrupt."""

    def completer(*, prefix: str = "", parsed_args: Any = None, **_: Any) -> list[str]:
        try:
            return [c for c in fn(prefix, parsed_args) if c.startswith(prefix)]
        except Exception:
            return []

    return completer


@quietly
def complete_runs(prefix: str, parsed_args: argparse.Namespace) -> Iterable[str]:
    """Every run id in the store."""
    return _store(parsed_args).run_ids()


@quietly
def complete_markers(prefix: str, parsed_args: argparse.Namespace) -> Iterable[str]:
    """The markers of the run's pending calls."""
    return [p.marker for p in _view(parsed_args).pending]


@quietly
def complete_steps(prefix: str, parsed_args: argparse.Namespace) -> Iterable[str]:
    """The run's indeterminate step."""
    step = _view(parsed_args).indeterminate
    return [] if step is None else [step.name]


@quietly
def complete_fork_points(prefix: str, parsed_args: argparse.Namespace) -> Iterable[str]:
    """The steps a fork of the run may start at (``fork RUN --at``)."""
    return fork_points(_store(parsed_args).load(parsed_args.run))


@quietly
def complete_statuses(prefix: str, parsed_args: argparse.Namespace) -> Iterable[str]:
    """Every word ``ls --status`` takes."""
    return list(STATUS_BY_WORD)


@quietly
def complete_directories(prefix: str, parsed_args: argparse.Namespace) -> Iterable[str]:
    """Directories, for --store."""
    head, _, _ = prefix.rpartition("/")
    base = Path(os.path.expanduser(head or "."))
    start = f"{head}/" if head else ""
    return [f"{start}{p.name}/" for p in base.iterdir() if p.is_dir()]


COMPLETERS: dict[str, Completer] = {
    "run": complete_runs,
    "marker": complete_markers,
    "step": complete_steps,
    "at": complete_fork_points,
    "status": complete_statuses,
    "store": complete_directories,
}


def attach(parser: argparse.ArgumentParser) -> None:
    """Give every argument named in COMPLETERS, in every command, its completer (a plain
    attribute argcomplete reads; nothing is imported)."""
    for action in parser._actions:
        if action.dest in COMPLETERS:
            action.completer = COMPLETERS[action.dest]  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                attach(sub)


def register(sub: Any, parents: Parents) -> None:
    """Add ``completion`` to the subcommands."""
    s = sub.add_parser(
        "completion",
        help="print the shell code that completes agentrun (bash, zsh)",
        description=(
            "Print the code that registers agentrun's completion with your shell. Run ids, "
            "pending markers and indeterminate steps complete from the store given on the "
            "command line (--store, else $AGENTRUN_STORE, else ./runs). bash: add "
            "'eval \"$(agentrun completion bash)\"' to ~/.bashrc. zsh: add "
            "'eval \"$(agentrun completion zsh)\"' to ~/.zshrc, after compinit."
        ),
    )
    s.add_argument("shell", choices=SHELLS, help="bash or zsh")
    s.set_defaults(fn=cmd_completion)
