"""``agentrun notify``: a long-running process that tells humans when a run needs one
(SPEC §11), through Apprise URLs; ``agentrun worker --notify URL`` runs one beside the worker.
apprise is imported only here, when a notifier starts."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal as signals
import sys
from typing import Any

from ..durations import HOW, parse_duration
from ..stores import Store
from .common import Parents, Usage, describe, store_of


def notifier_of(
    store: Store,
    to: list[str],
    *,
    on: str | None = None,
    escalate_after: str | None = None,
    escalate_to: list[str] | None = None,
    link: str | None = None,
    claim_ttl: float | None = None,
    flag: str = "--to",
) -> Any:
    """A Notifier from the command's arguments; Usage (naming it, and the ``flag`` that
    gave it) for a URL Apprise cannot use, an unknown kind or a bad duration: nothing
    starts then."""
    from ..notify import BadTargetError, check_targets, parse_kinds
    from ..notify.notifier import CLAIM_TTL, Notifier

    try:
        kinds = parse_kinds(on)
    except ValueError as e:
        raise Usage(f"--on: {e}") from None
    after = None
    if escalate_after is not None:
        try:
            after = parse_duration(escalate_after)
        except ValueError:
            raise Usage(f"--escalate-after {escalate_after!r} is not {HOW}") from None
    if (after is None) != (not escalate_to):
        raise Usage("--escalate-after and --escalate-to go together")
    made = []
    for given, urls in ((flag, to), ("--escalate-to", escalate_to or [])):
        try:
            made.append(check_targets(urls))
        except BadTargetError as e:
            raise Usage(f"{given} {e}" if e.url else str(e)) from None
    targets, escalation = made
    return Notifier(
        store,
        targets,
        kinds=kinds,
        escalate_after=after,
        escalate_to=escalation,
        link=link,
        claim_ttl=CLAIM_TTL if claim_ttl is None else claim_ttl,
    )


def cmd_notify(args: argparse.Namespace) -> int:
    """Follow the store and send notices until SIGINT/SIGTERM."""
    store = store_of(args)
    notifier = notifier_of(
        store,
        args.to,
        on=args.on,
        escalate_after=args.escalate_after,
        escalate_to=args.escalate_to,
        link=args.link,
        claim_ttl=args.claim_ttl,
    )
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    logging.getLogger("watchfiles").setLevel(logging.WARNING)
    logging.getLogger("apprise").setLevel(logging.WARNING)  # "Notifying 1 service(s)" each time

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        names = ", ".join(t.name for t in notifier.targets)
        print(f"agentrun notify: {describe(store)} → {names}", file=sys.stderr, flush=True)
        await notifier.serve(stop)
        print("agentrun notify: stopped", file=sys.stderr)

    asyncio.run(serve())
    return 0


def register(sub: Any, parents: Parents) -> None:
    """Add notify to the subcommands."""
    s = sub.add_parser(
        "notify",
        parents=[parents.store],
        help="tell humans (Slack, email, ntfy, webhooks) when a run needs one",
        description=(
            "Follow the store and send a notice to each --to target when a run needs a human: "
            "it names the run, what it waits on, how long, and the command that acts. URLs "
            "are Apprise URLs (slack://, mailto://, ntfy://, json://, ...; needs the notify "
            "extra). Each notice is claimed in the store before it is sent and marked after, "
            "so several notifiers (or one restarted) never send one twice."
        ),
    )
    s.add_argument("--to", action="append", required=True, metavar="URL", help="a target")
    s.add_argument(
        "--on",
        metavar="KINDS",
        help="approval,indeterminate,failed,over_budget,corrupt,deadline,stalled (default all)",
    )
    s.add_argument("--escalate-after", metavar="DURATION", help="e.g. 30m, with --escalate-to")
    s.add_argument("--escalate-to", action="append", metavar="URL", help="escalation target")
    s.add_argument("--link", metavar="URL", help="added to each notice (e.g. agentrun web's)")
    # How long a claim never marked sent holds off the other notifiers (tests shorten it).
    s.add_argument("--claim-ttl", type=float, default=None, help=argparse.SUPPRESS)
    s.set_defaults(fn=cmd_notify)
