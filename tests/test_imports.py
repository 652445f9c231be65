"""The core is reachable without the UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core" / "durableagent"


def test_importing_durableagent_loads_no_ui_and_no_watchfiles():
    code = (
        "import sys, durableagent, durableagent.cli\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'rich', 'watchfiles', 'durableagent_tui'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_only_the_worker_imports_watchfiles_and_no_core_module_imports_ui():
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        for ui in ("textual", "rich", "durableagent_tui"):
            assert f"\nimport {ui}" not in text and f"\nfrom {ui}" not in text, path
        if path.name != "worker.py":
            assert "import watchfiles" not in text and "from watchfiles" not in text, path


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
