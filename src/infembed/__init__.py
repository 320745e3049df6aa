"""infembed: instruction-following retrieval (InF-IR synthesis, InF-Embed training, p-MRR evaluation, search)."""

import os
from pathlib import Path

__version__ = "0.1.0"

__all__ = ["__version__", "cache_dir"]


def cache_dir() -> Path:
    """Where infembed caches derived files (corpus embeddings, dequantised GGUF checkpoints):
    ``$INFEMBED_CACHE_DIR``, default ``~/.cache/infembed``. Everything there can be deleted at any time."""
    return Path(os.environ.get("INFEMBED_CACHE_DIR", Path.home() / ".cache" / "infembed"))
