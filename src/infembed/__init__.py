"""infembed: instruction-following retrieval (InF-IR synthesis, InF-Embed training, p-MRR evaluation, search)."""

__version__ = "0.1.0"

__all__ = ["__version__"]
