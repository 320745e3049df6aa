"""Tiny real models for the backend tests: a 2-layer, 32-wide BERT with random weights and the packaged MiniLM's
tokenizer, saved as an infembed model dir (so it loads like any trained model)."""

from __future__ import annotations

from pathlib import Path


def make_tiny_model(
    path: Path, *, seed: int = 0, pooling: str = "mean", interaction: str = "concat", gate: float = 0.0
) -> Path:
    """Write an infembed model dir at ``path``: random tiny BERT weights from ``seed``; a cross-attention model
    gets its gate opened to ``gate`` so the block changes the embeddings."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from infembed.model import InFEmbed, ModelConfig, default_model_path

    base = path.parent / f"{path.name}-base"
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(base)
    tokenizer.save_pretrained(base)
    model = InFEmbed.from_pretrained(
        str(base), config=ModelConfig(pooling=pooling, interaction=interaction), device="cpu"
    )
    if model.interaction is not None:
        with torch.no_grad():
            model.interaction.gate.fill_(gate)
    model.save(path)
    return path
