"""A wrong argument is a usage error (SPEC's exit 2) told with the command's own usage line
and plain words, for every subcommand: an unknown flag after any command, and an argument of
the wrong shape (a marker, a step, a result) once the run is known to exist."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from durableagent import FileStore, Status, ToolCall
from durableagent.cli.main import build_parser, main
from durableagent.testing import JournalWriter

# Each subcommand with the arguments it needs to get past its required ones.
COMMANDS: dict[str, list[str]] = {
    "ls": [],
    "show": ["n1"],
    "plan": ["n1"],
    "audit": [],
    "workers": [],
    "submit": ["n9", "some text"],
    "approve": ["n1", "--all"],
    "deny": ["n1"],
    "reconcile": ["n1", "tool/1/0/x", "--retry"],
    "retry": ["n1"],
    "cancel": ["n1"],
    "pause": ["n1"],
    "resume": ["n1"],
    "budget": ["n1", "--add", "tokens=1"],
    "fork": ["n1", "--at", "llm/1", "--as", "n2", "--reason", "r"],
    "export": ["n1"],
    "copy": ["a", "b"],
    "worker": ["--agent", "m:a"],
    "notify": ["--to", "json://127.0.0.1/h"],
    "tui": [],
    "web": [],
    "demo": [],
    "completion": ["bash"],
    "accept-change": ["n1"],
    "deploy-check": ["--agent", "m:a"],
}


def test_every_subcommand_is_in_the_list() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A store whose run n1 waits for approval of one call."""
    s = FileStore(tmp_path / "runs", create=True)
    j = JournalWriter(s, "n1", time.time() - 60)
    j.start("please file it")
    with j.attempt("host:1"):
        (p,) = j.asks(1, ToolCall("c1", "create_ticket", {"summary": "vpn"}))
        j.outcome(Status.AWAITING_APPROVAL, pending=(p,))
    return str(tmp_path / "runs")


def usage_of(capsys: pytest.CaptureFixture[str], command: str, args: list[str], store: str) -> str:
    """Run it; it must exit 2, on stderr with the command's own usage line and no traceback."""
    with pytest.raises(SystemExit) as e:
        main([command, *args, "--store", store])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: agentrun {command} "), err
    assert "Traceback" not in err and "{" not in err.splitlines()[-1], err
    return err.splitlines()[-1]


@pytest.mark.parametrize(
    ("command", "args", "says"),
    [
        *[(c, [*a, "--bogus"], "unrecognized arguments: --bogus") for c, a in COMMANDS.items()],
        ("show", ["n1", "--follow", "--bogus"], "unrecognized arguments: --bogus"),
        ("ls", ["--status", "sleepy"], "unknown status 'sleepy'"),
        ("approve", ["n1", "garbage"], "'garbage' is not a marker: copy one from"),
        ("deny", ["n1", "garbage", "--reason", "no"], "'garbage' is not a marker"),
        ("reconcile", ["n1", "garbage", "--retry"], "'garbage' is not a step"),
        ("reconcile", ["n1", "tool/1/0/create_ticket", "--done", " "], "--done needs the result"),
        ("approve", ["n1"], "MARKER or --all"),
        ("submit", ["n9", "   "], "the run's text is empty"),
        ("budget", ["n1", "--add", "tokens=lots", "--reason", "r"], "tokens takes"),
    ],
)
def test_a_wrong_argument_is_exit_2_with_the_commands_own_usage(
    capsys: pytest.CaptureFixture[str], store: str, command: str, args: list[str], says: str
) -> None:
    assert says in usage_of(capsys, command, args, store)
