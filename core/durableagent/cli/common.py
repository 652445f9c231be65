"""What every agentrun command shares: refusals, opening the store, and how journal text is
made safe and short for a terminal."""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import CorruptJournalError
from ..fold import RunStatus
from ..ids import check_run_id
from ..labels import STATUS_BY_WORD, STATUS_GLYPH
from ..stores import Store, open_store

DEFAULT_STORE = "./runs"
DEFAULT_DEMO_STORE = "./agentrun-demo"
STORE_HELP = "the store: a directory or a postgresql:// URL (default: $AGENTRUN_STORE, else ./runs)"

# The schema version of every --json object; bumped when a field changes meaning or goes.
# New fields may appear without a bump.
JSON_VERSION = 1


class Refused(Exception):
    """A command that cannot do what was asked: exit 1 with this message."""


class Usage(Exception):
    """Bad usage found after parsing: exit 2 with the usage line."""


@dataclass(frozen=True)
class Parents:
    """The option groups several commands share (argparse parent parsers)."""

    store: argparse.ArgumentParser
    json: argparse.ArgumentParser
    by: argparse.ArgumentParser


def parents() -> Parents:
    """Build the shared option groups."""
    store = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: when not given after the command, `agentrun --store DIR COMMAND` stands
    # (argparse would otherwise overwrite it with this parser's default).
    store.add_argument("--store", default=argparse.SUPPRESS, metavar="STORE", help=STORE_HELP)
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON")
    by = argparse.ArgumentParser(add_help=False)
    by.add_argument("--by", default=None, help="who decides (default: your login name)")
    by.add_argument("--reason", default=None, help="why (recorded in the journal)")
    return Parents(store, as_json, by)


def default_store() -> str:
    """``$AGENTRUN_STORE``, else ``./runs``."""
    return os.environ.get("AGENTRUN_STORE") or DEFAULT_STORE


def store_of(
    args: argparse.Namespace, *, create: bool = False, lease_ttl: float | None = None
) -> Store:
    """The store named by --store (a directory or a postgresql:// URL); read commands never
    create one."""
    return open_store(args.store, create=create, lease_ttl=lease_ttl)


def require_run(store: Store, run_id: str) -> None:
    """Refuse an invalid or unknown run id, before any other complaint about the command
    (a malformed marker or step means little when the run does not exist). A journal that
    does not load exists: the command says what is wrong with it."""
    check_run_id(run_id)
    try:
        known = bool(store.load(run_id))
    except CorruptJournalError:
        return
    if not known:
        raise no_run(run_id, store)


def status_arg(word: str) -> RunStatus:
    """``ls --status``: a status's name or the short word the TUI shows (``awaiting``)."""
    status = STATUS_BY_WORD.get(word.strip().lower())
    if status is None:
        raise argparse.ArgumentTypeError(
            f"unknown status {word!r}; use one of: {', '.join(STATUS_BY_WORD)}"
        )
    return status


def iso(at: float | None) -> str | None:
    """Epoch seconds as ISO-8601 UTC (``2026-11-30T09:00:00Z``), None when unknown."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_iso(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``d`` with ``<key>_iso`` placed right after each epoch-seconds ``key``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        out[k] = v
        if k in keys:
            out[f"{k}_iso"] = iso(v)
    return out


def versioned(d: dict[str, Any]) -> dict[str, Any]:
    """A --json object: ``"v"`` (the schema version) first."""
    return {"v": JSON_VERSION, **d}


def clean(text: object) -> str:
    """Journal text made safe for a terminal: control characters (escape sequences could
    restyle or rewrite the screen) are shown escaped, never interpreted."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in s)


def one_line(text: object, width: int = 72) -> str:
    """``text`` on one line, cut to ``width`` characters."""
    if type(text) is str and len(text) <= width and text.isprintable():
        return text
    s = clean(str(text).replace("\n", " "))
    return s if len(s) <= width else s[: width - 1] + "…"


def args_text(arguments: Any) -> str:
    """A tool call's arguments as compact JSON, safe for a terminal."""
    return clean(json.dumps(arguments, ensure_ascii=False, sort_keys=True))


def stamp(at: float | None) -> str:
    """A local date and time, ``-`` when unknown."""
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def dump(value: Any) -> str:
    """JSON for --json output. ensure_ascii: no raw control or bidi characters from a
    journal reach the terminal."""
    return json.dumps(value, sort_keys=False)


def status_word(status: RunStatus) -> str:
    """``▲ awaiting_approval``: a glyph beside every status word."""
    return f"{STATUS_GLYPH[status]} {status}"


def no_run(run_id: str, store: Store) -> Refused:
    """The refusal for a run id the store does not hold."""
    return Refused(f"no run {run_id!r} in {describe(store)}; see 'agentrun ls'")


def describe(store: Store) -> str:
    """Where a store is, for messages (a URL never shows its password)."""
    return str(getattr(store, "description", store))


def hint_store(args: argparse.Namespace, store: Store) -> str | None:
    """The ``--store`` a hint names: none for the default store (a hint pasted in the same
    shell finds it), else the store as messages name it (a URL without its password: the
    server's usual ways of giving one, PGPASSWORD or ~/.pgpass, still apply)."""
    return None if args.store == default_store() else describe(store)
