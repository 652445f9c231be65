"""Every hint works when pasted (issue 23): the commands the product suggests in its notices,
``show`` and ``plan`` (for a run of each status) are collected as they are built
(durableagent/hints.py builds every one), their placeholders filled, and each is run against
a copy of a real store: it must succeed."""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from durableagent import FileStore, Message, RunStatus, hints, submit
from durableagent.cli.main import main
from durableagent.copying import copy_run
from durableagent.fork import fork_points, plan_fork, write_fork
from durableagent.notify.notices import deadline_denials, notices_for, stalled
from durableagent.signals import signal as send_signal

TESTS = Path(__file__).resolve().parent
FILL = {"NEW": "pasted-fork", "RESULT": "TICKET-1", "WHY": "pasted from a hint"}


@pytest.fixture
def built(demo: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every hint the builders made while the test ran (in the order made)."""
    made: list[str] = []
    for builder in hints.BUILDERS:

        def recording(*a: Any, _b: Callable[..., str] = builder, **kw: Any) -> str:
            text = _b(*a, **kw)
            made.append(text)
            return text

        monkeypatch.setattr(hints, builder.__name__, recording)
    yield made


def run_cli(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def filled(hint: str, store: FileStore, copy: Path, original: Path) -> list[str]:
    """The hint's words with its placeholders filled from the run it names, on ``copy``."""
    words = shlex.split(hint)
    assert words[0] == "agentrun", hint
    run = words[2] if len(words) > 2 else ""
    out = []
    for w in words[1:]:
        if w == str(original):
            w = str(copy)
        elif w == "MARKER":
            w = next(p.marker for p in store.summary(run).pending)  # type: ignore[union-attr]
        elif w == "STEP":
            w = fork_points(store.load(run))[0]
        elif w in FILL:
            w = FILL[w]
        out.append(w)
    if "--store" not in out:
        out += ["--store", str(copy)]
    return out


def test_every_hint_the_product_prints_works_when_pasted(
    demo: Path, built: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store = FileStore(demo)
    # Runs a human stopped: one paused, one cancelled (the demo has none).
    code, paused, _ = run_cli(
        capsys, ["pause", "password-reset", "--reason", "hold on", "--store", str(demo)]
    )
    assert code == 0
    send_signal(store, "access-audit", "cancel", {}, by="ana", reason="not needed")
    submit(store, "printer-toner", [Message("user", "the printer needs toner")])
    # A run moved to another store (copy --move): it lives there now.
    submit(store, "moved-away", [Message("user", "move me")])
    copy_run(store, FileStore(tmp_path / "elsewhere", create=True), "moved-away", move=True)
    # A fork cut short (a crash while copying): corrupt until the same fork is run again.
    records = store.load("shared-drive")
    cut = plan_fork(records, "shared-drive", "half-fork", at_step="llm/2", reason="r")
    write_fork(store, dataclasses.replace(cut, copies=cut.copies[:1]))
    where = str(demo)
    printed: list[str] = [paused]
    # A refusal that says what to do first: a fork past a write nobody has reconciled.
    over_the_write = ["fork", "crm-access", "--at", "llm/3", "--as", "x1", "--reason", "r"]
    code, _, err = run_cli(capsys, [*over_the_write, "--store", where])
    assert code == 1 and "Reconcile it first" in err, err
    printed.append(err)
    now = time.time()
    summaries = store.summaries()
    statuses = {s.status for s in summaries}
    assert statuses >= {
        RunStatus.AWAITING_APPROVAL,
        RunStatus.INDETERMINATE,
        RunStatus.FAILED,
        RunStatus.OVER_BUDGET,
        RunStatus.CANCELLED,
        RunStatus.PAUSED,
        RunStatus.READY,
        RunStatus.COMPLETED,
        RunStatus.CORRUPT,
        RunStatus.MOVED,
    }, statuses
    for s in summaries:
        failures = store.read_failures(s.run_id) or {}
        exhausted = bool(failures.get("exhausted"))
        for n in notices_for(s, now=now, store=where, exhausted=exhausted):
            printed.append(n.body(now))
        for command in (["show", s.run_id], ["plan", s.run_id]):
            code, out, err = run_cli(capsys, [*command, "--store", where])
            if s.status == RunStatus.CORRUPT:  # refused, saying why and what to do
                assert code == 1 and s.error in err, (command, err)
                printed.append(err)
                continue
            assert code == 0, (command, err)
            printed.append(out)
    ready = [s for s in summaries if s.status == RunStatus.READY]
    stall = stalled(ready, now=now + 600, store=where, no_worker_since=now - 3600)
    assert stall is not None
    printed.append(stall.body(now))
    for n in deadline_denials("printer-jam", [(9, "tool/2/0/create_ticket#0", now)], where):
        printed.append(n.body(now))

    text = "\n".join(printed)
    # The hints printed (a builder may also run for text nobody shows, e.g. a summary's).
    hints_made = [h for h in dict.fromkeys(built) if h in text]
    made_by = {h.split()[1] for h in hints_made}
    assert made_by >= {
        "approve",
        "deny",
        "reconcile",
        "retry",
        "show",
        "resume",
        "fork",
        "budget",
        "worker",
        "workers",
    }, made_by
    assert f"agentrun show moved-away --store {tmp_path / 'elsewhere'}" in hints_made
    assert any(
        h.startswith("agentrun fork shared-drive --at llm/2 --as half-fork ") for h in hints_made
    )
    # Every line that suggests a command suggests one built by hints.py.
    for line in text.splitlines():
        if ": agentrun " in line or "(agentrun " in line:
            assert any(h in line for h in hints_made), line

    for i, hint in enumerate(hints_made):
        copy = tmp_path / f"copy{i}"
        shutil.copytree(demo, copy)
        argv = filled(hint, store, copy, demo)
        if argv[0] == "worker":
            assert_worker_serves(argv)
            continue
        code, out, err = run_cli(capsys, argv)
        corrupt = store.summary(argv[1]) if argv[0] == "show" else None
        if corrupt is not None and corrupt.status == RunStatus.CORRUPT:
            # Refused for the reason the notice names: the journal, and how to mend it.
            assert code == 1 and corrupt.error in err, (hint, err)
            continue
        assert code == 0, (hint, argv, out, err)


def assert_worker_serves(argv: list[str]) -> None:
    """``agentrun worker --agent MODULE:ATTR``: with the demo's agent it serves, and stops
    cleanly on SIGTERM."""
    argv = ["durableagent.demo:demo_agent" if w == "MODULE:ATTR" else w for w in argv]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    )
    p = subprocess.Popen(
        [sys.executable, "-m", "durableagent.cli", *argv],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert p.stderr is not None
        deadline = time.monotonic() + 60
        seen = ""
        while "serving" not in seen:
            assert time.monotonic() < deadline and p.poll() is None, seen
            seen += p.stderr.readline()
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0
