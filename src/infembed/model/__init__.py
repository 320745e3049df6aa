"""Instruction-aware embedding models: backbone + pooling (encoder.py), instruction/query interaction
(interaction.py) and the user-facing :class:`InFEmbed` (retriever.py)."""

from infembed.model.retriever import InFEmbed, ModelConfig, default_model_path

__all__ = ["InFEmbed", "ModelConfig", "default_model_path"]
