"""InF-Embed training: configuration, the trainer (gradient caching, cross-device negatives, LoRA, resume)."""

from infembed.train.config import TrainConfig

__all__ = ["TrainConfig"]
