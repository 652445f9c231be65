"""scripts/check_mutants.py stays in step with the code: every mutant's original snippet is
in its file exactly once (the script refuses to run a mutant whose snippet drifted)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    "check_mutants", ROOT / "scripts" / "check_mutants.py"
)
assert spec is not None and spec.loader is not None
check_mutants = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_mutants)


@pytest.mark.parametrize("name", sorted(check_mutants.MUTANTS))
def test_each_mutant_still_finds_the_line_it_breaks(name: str) -> None:
    _pitfall, file, original, mutated = check_mutants.MUTANTS[name]
    path = ROOT / file if file.startswith("tui/") else ROOT / "core" / "durableagent" / file
    assert path.read_text().count(original) == 1, f"{name}: its snippet is not in {file} once"
    assert original != mutated
