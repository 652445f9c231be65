"""The core is reachable without the UI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core" / "durableagent"


HEAVY = (
    "textual",
    "rich",
    "watchfiles",
    "durableagent_tui",
    "openai",
    "anthropic",
    "psycopg",
    "psycopg_pool",
    "mcp",
    "pydantic_ai",
    "agents",
)


def loaded_after(module: str, then: str = "") -> set[str]:
    """Top-level packages of UI, watch, model SDK and database libraries loaded by importing
    ``module`` afresh (and running the statement ``then``)."""
    code = (
        f"import sys, {module}\n{then}\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & "
        f"{set(HEAVY)!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_durableagent_loads_no_ui_no_watchfiles_and_no_model_sdk():
    assert loaded_after("durableagent") == set()


def test_importing_durableagent_and_its_integrations_package_loads_no_framework():
    assert loaded_after("durableagent, durableagent.integrations") == set()
    assert "pydantic_ai" in loaded_after("durableagent.integrations.pydantic_ai")
    assert "agents" in loaded_after("durableagent.integrations.openai_agents")
    assert "pydantic_ai" not in loaded_after("durableagent.integrations.openai_agents")


def test_the_models_package_loads_an_sdk_only_when_its_adapter_is_asked_for():
    assert loaded_after("durableagent.models") == set()
    assert loaded_after("durableagent.models", "durableagent.models.OpenAIModel") == {"openai"}
    assert loaded_after("durableagent.models", "durableagent.models.AnthropicModel") == {
        "anthropic"
    }
    assert loaded_after("durableagent.models.openai") == {"openai"}
    assert loaded_after("durableagent.models.anthropic") == {"anthropic"}


def test_only_its_adapter_imports_each_model_sdk():
    # The Agents SDK's items are the openai package's types: its integration names them.
    agents_sdk = CORE / "integrations" / "openai_agents"
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        if path.parent == agents_sdk:
            continue
        for sdk in ("openai", "anthropic"):
            if path != CORE / "models" / f"{sdk}.py":
                assert f"\nimport {sdk}" not in text and f"\nfrom {sdk}" not in text, path


def test_psycopg_loads_only_with_a_postgresql_store():
    assert loaded_after("durableagent, durableagent.stores, durableagent.worker") == set()
    assert loaded_after("durableagent.stores.postgres") >= {"psycopg", "psycopg_pool"}


def test_only_the_postgresql_store_modules_import_psycopg():
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        if not path.relative_to(CORE).as_posix().startswith("stores/postgres/"):
            assert "import psycopg" not in text and "from psycopg" not in text, path


def test_the_mcp_sdk_loads_only_when_mcp_tools_is_asked_for():
    # (The SDK brings watchfiles along with it, through its HTTP server parts.)
    assert "mcp" in loaded_after("durableagent", "durableagent.mcp_tools")
    assert loaded_after("durableagent.demo") == set()  # the demo's agent loads it when entered
    assert "mcp" in loaded_after("durableagent.tools.mcp")


def test_only_the_mcp_adapter_and_the_demo_ticket_server_import_the_mcp_sdk():
    allowed = {CORE / "tools" / "mcp.py", CORE / "demo" / "ticket_server.py"}
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        if path not in allowed:
            assert "\nimport mcp" not in text and "\nfrom mcp" not in text, path


def test_the_command_line_loads_the_ui_and_the_watch_only_when_asked():
    assert loaded_after("durableagent.cli") == set()


def test_only_the_file_store_imports_watchfiles_and_no_core_module_imports_ui():
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        for ui in ("textual", "rich", "durableagent_tui"):
            assert f"\nimport {ui}" not in text and f"\nfrom {ui}" not in text, path
        if path.relative_to(CORE).as_posix() != "stores/file/feed.py":
            assert "import watchfiles" not in text and "from watchfiles" not in text, path
        else:  # only inside the change feed, never at import
            assert "\nimport watchfiles" not in text and "\nfrom watchfiles" not in text


def test_no_core_module_names_the_ui_package():
    """agentrun tui, web and demo reach the UI through the entry points it registers
    (agentrun.commands), not by its name: no importlib string, no comment, nothing."""
    for path in CORE.rglob("*.py"):
        assert "durableagent_tui" not in path.read_text(), path


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
        "ModelError",
        "ModelRetryError",
        "ToolContext",
        "tool",
        "gate_for",
    ]:
        assert name in durableagent.__all__, name
