"""Fixtures for the evaluation tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_benchmark import write_benchmark


@pytest.fixture
def make_benchmark(tmp_path: Path):
    """``make_benchmark(name="bench", corpus=..., top_ranked=..., excluded=...)`` -> the benchmark dir."""

    def make(name: str = "bench", **kwargs) -> Path:
        return write_benchmark(tmp_path / name, **kwargs)

    return make
