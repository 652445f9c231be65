from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durableagent import FileStore

sys.path.insert(0, str(Path(__file__).parent))

from procs import WorkerProcess

from helpdesk import Side


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "runs")


@pytest.fixture
def side(tmp_path: Path) -> Side:
    return Side(tmp_path / "side")


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start ``agentrun worker`` children (``_child_agents:NAME``); all killed at the end."""
    started: list[WorkerProcess] = []

    def start(root: Path, agent: str, *args: str, **env: str) -> WorkerProcess:
        w = WorkerProcess(root, agent, tmp_path / f"worker{len(started)}.log", *args, **env)
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()
