from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durableagent import FileStore
from durableagent.demo import build_demo_store

sys.path.insert(0, str(Path(__file__).parent))

from procs import WorkerProcess

from helpdesk import Side


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's store, built once per test module: copy it (``demo``) before changing it."""
    root = tmp_path_factory.mktemp("template") / "store"
    build_demo_store(root)
    return root


@pytest.fixture
def demo(demo_template: Path, tmp_path: Path) -> Path:
    """A fresh copy of the demo's store for one test."""
    root = tmp_path / "demo"
    shutil.copytree(demo_template, root)
    return root


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
