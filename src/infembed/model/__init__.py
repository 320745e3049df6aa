"""Instruction-aware embedding models: backbone + pooling (encoder.py), instruction/query interaction
(interaction.py), the user-facing :class:`InFEmbed` (retriever.py) and the inference backends (backends.py).

The names are imported on first use, so torch-free parts (``infembed.model.backends``' declarations, read by the
CLI's settings) do not load torch."""

from typing import Any

__all__ = ["InFEmbed", "ModelConfig", "default_model_path"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from infembed.model import retriever

        return getattr(retriever, name)
    raise AttributeError(f"module 'infembed.model' has no attribute {name!r}")
