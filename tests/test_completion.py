"""Shell completion, run for real: agentrun answers argcomplete's protocol (COMP_LINE,
COMP_POINT, _ARGCOMPLETE=1, the answer on file descriptor 8) in a subprocess, and bash runs the
registration code that ``agentrun completion bash`` prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from durableagent import FileStore, view_store
from durableagent.demo import build_demo_store

AGENTRUN = str(Path(sys.executable).parent / "agentrun")
RUNS = [
    "access-audit",
    "admin-rights",
    "billing-access",
    "crm-access",
    "laptop-broken",
    "password-reset",
    "printer-jam",
    "report-export",
    "shared-drive",
    "vpn-access",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("completion") / "store"
    build_demo_store(root)
    return root


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "AGENTRUN_STORE"}
    e["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), e.get("PATH", "")])
    e.update(extra)
    return e


def complete(line: str, *, shell: str = "bash", cwd: Path | None = None, **extra: str) -> list[str]:
    """What agentrun offers with the cursor at the end of ``line``, as the shell asks."""
    e = env(
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_SHELL=shell,
        _ARGCOMPLETE_IFS="\v",
        _ARGCOMPLETE_SUPPRESS_SPACE="1",
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        **extra,
    )
    # As the registration code runs it: the answer on fd 8, stdout muted.
    p = subprocess.run(
        ["bash", "-c", 'exec "$@" 8>&1 1>/dev/null', "_", AGENTRUN],
        env=e,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    return [c for c in p.stdout.split("\v") if c]


def markers(root: Path, run_id: str) -> list[str]:
    return [p.marker for p in view_store(FileStore(root), run_id).pending]


def test_completion_prints_the_registration_code_for_bash_and_zsh() -> None:
    bash = subprocess.run([AGENTRUN, "completion", "bash"], capture_output=True, text=True)
    assert bash.returncode == 0
    assert "complete -o nospace -o default -o bashdefault -F _python_argcomplete agentrun" in (
        bash.stdout
    )
    assert subprocess.run(["bash", "-n"], input=bash.stdout, text=True).returncode == 0
    zsh = subprocess.run([AGENTRUN, "completion", "zsh"], capture_output=True, text=True)
    assert zsh.returncode == 0 and "compdef _python_argcomplete agentrun" in zsh.stdout
    fish = subprocess.run([AGENTRUN, "completion", "fish"], capture_output=True, text=True)
    assert fish.returncode == 2 and "usage: agentrun completion" in fish.stderr


def test_commands_complete() -> None:
    assert {"approve", "completion", "ls", "show", "web"} <= set(complete("agentrun "))
    assert complete("agentrun comp") == ["completion"]
    assert complete("agentrun approve --st") == ["--store"]  # options once "-" is typed


def test_run_ids_complete_from_the_store_given_on_the_command_line(demo: Path) -> None:
    assert complete(f"agentrun show --store {demo} ") == RUNS
    assert complete(f"agentrun --store {demo} approve la") == ["laptop-broken"]
    assert complete(f"agentrun deny --store {demo} s") == ["shared-drive"]
    assert complete(f"agentrun retry --store {demo} v") == ["vpn-access"]


def test_run_ids_complete_from_agentrun_store_then_runs(demo: Path, tmp_path: Path) -> None:
    assert complete("agentrun show cr", AGENTRUN_STORE=str(demo)) == ["crm-access"]
    shutil.copytree(demo, tmp_path / "runs")
    assert complete("agentrun show cr", cwd=tmp_path) == ["crm-access"]


def test_markers_complete_from_the_runs_pending_calls(demo: Path) -> None:
    pending = markers(demo, "laptop-broken")
    assert len(pending) == 2
    assert complete(f"agentrun approve --store {demo} laptop-broken ") == sorted(pending)
    assert complete("agentrun deny laptop-broken t", AGENTRUN_STORE=str(demo)) == sorted(pending)
    assert complete(f"agentrun approve --store {demo} billing-access ") == []  # completed


def test_reconcile_completes_the_indeterminate_step(demo: Path) -> None:
    assert complete(f"agentrun reconcile --store {demo} crm-access ") == ["tool/2/1/send_email"]
    assert complete(f"agentrun reconcile --store {demo} shared-drive ") == []


def test_ls_status_completes_the_tui_words_too() -> None:
    assert complete("agentrun ls --status aw") == ["awaiting_approval", "awaiting"]


def test_completion_offers_nothing_rather_than_fail(demo: Path, tmp_path: Path) -> None:
    assert complete(f"agentrun show --store {tmp_path / 'nowhere'} ") == []
    assert complete(f"agentrun approve --store {demo} nosuch ") == []
    corrupt = tmp_path / "corrupt"
    shutil.copytree(demo, corrupt)
    (corrupt / "laptop-broken.jsonl").write_text('{"seq": 1}\nnot json\n')
    assert complete(f"agentrun approve --store {corrupt} laptop-broken ") == []


def test_zsh_gets_the_same_answers(demo: Path) -> None:
    got = complete(f"agentrun approve --store {demo} la", shell="zsh")
    assert [c.split(":")[0] for c in got] == ["laptop-broken"]


def test_the_bash_registration_code_completes_in_bash(demo: Path) -> None:
    """The whole path a user has: eval the printed code, press tab (bash calls the function
    with COMP_WORDS and friends set), read COMPREPLY."""
    line = f"agentrun approve --store {demo} laptop-broken "
    script = (
        'eval "$(agentrun completion bash)"\n'
        f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; COMP_TYPE=9\n"
        "read -ra COMP_WORDS <<< \"$COMP_LINE\"; COMP_WORDS+=(''); "
        "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n"
        "_python_argcomplete agentrun\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    p = subprocess.run(["bash", "-c", script], env=env(), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.split()) == sorted(markers(demo, "laptop-broken"))


def test_importing_the_command_line_loads_neither_argcomplete_nor_the_web_server() -> None:
    code = (
        "import sys, durableagent.cli as cli\n"
        "cli.build_parser()\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'argcomplete', 'aiohttp', 'textual_serve', 'textual', 'durableagent_tui'})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == []
