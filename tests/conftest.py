from __future__ import annotations

import sys
from pathlib import Path

import pytest

from durableagent import FileStore

sys.path.insert(0, str(Path(__file__).parent))

from helpdesk import Side


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "runs")


@pytest.fixture
def side(tmp_path: Path) -> Side:
    return Side(tmp_path / "side")
