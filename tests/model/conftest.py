"""Tiny real models for the backend tests: a 2-layer, 32-wide BERT with random weights and the packaged MiniLM's
tokenizer, saved as infembed model dirs (so they load like any trained model). Exporting one to OpenVINO takes a
few seconds; the first export of a session also imports optimum-intel (~10-20 s on 2 cores)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tiny_models import make_tiny_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """A tiny concatenation model (mean pooling), written once per session."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """One thread for torch (and so for OpenVINO, which takes torch's count): tiny batches gain nothing from
    more on a shared 2-core machine."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
