"""The core is reachable without the UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core" / "durableagent"


def loaded_after(module: str) -> set[str]:
    """Top-level packages of UI and watch libraries loaded by importing ``module`` afresh."""
    code = (
        f"import sys, {module}\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'textual', 'rich', 'watchfiles', 'durableagent_tui'})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_durableagent_loads_no_ui_and_no_watchfiles():
    assert loaded_after("durableagent") == set()


def test_the_command_line_loads_the_ui_and_the_watch_only_when_asked():
    assert loaded_after("durableagent.cli") == set()


def test_only_the_file_store_imports_watchfiles_and_no_core_module_imports_ui():
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        for ui in ("textual", "rich", "durableagent_tui"):
            assert f"\nimport {ui}" not in text and f"\nfrom {ui}" not in text, path
        if path.relative_to(CORE).as_posix() != "stores/file.py":
            assert "import watchfiles" not in text and "from watchfiles" not in text, path
        else:  # only inside FileStore.changes(), never at import
            assert "\nimport watchfiles" not in text and "\nfrom watchfiles" not in text


def test_every_public_name_is_importable_from_the_package():
    import durableagent

    for name in durableagent.__all__:
        assert getattr(durableagent, name) is not None
    for name in [
        "Message",
        "ToolCall",
        "StepKind",
        "StepRunner",
        "Result",
        "Tool",
        "Model",
        "ScriptedModel",
        "PolicyGate",
        "Pending",
        "marker_for",
        "AgentConfig",
        "LoopOutcome",
        "run_loop",
        "Record",
        "Store",
        "FileStore",
        "Journal",
        "valid_run_id",
        "Config",
        "run",
        "Outcome",
        "Status",
        "signal",
        "Reconcile",
        "view_run",
        "view_store",
        "RunView",
        "RunStatus",
        "DurableAgentError",
    ]:
        assert name in durableagent.__all__, name
