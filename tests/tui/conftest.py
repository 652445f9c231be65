"""Fixtures for the TUI tests: the sample store and a fixed time zone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from durableagent_tui.sample import build_sample_store


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Timeline clock times are local: pin the zone so pictures do not depend on the host."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """The sample store with every state, a corrupt journal and a markup argument."""
    root = tmp_path / "runs"
    build_sample_store(root)
    return root
