"""Fixtures for the synthesis tests: the shared seed pairs (from the root ``data_dir`` fixture; skipped when
absent) and our fake OpenAI server."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from fake_openai_server import FakeOpenAIServer  # noqa: E402


@pytest.fixture(scope="session")
def seed_dir(data_dir: Path) -> Path:
    path = data_dir / "raw" / "msmarco-instructir-seed"
    if not (path / "corpus.jsonl").exists():
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture()
def server():
    with FakeOpenAIServer() as srv:
        yield srv
