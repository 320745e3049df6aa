"""The optimiser and learning-rate schedule of a training run: AdamW in four parameter groups and a
transformers schedule (linear, cosine or constant) with warmup."""

from __future__ import annotations

from typing import Any

import torch

from infembed.train.config import TrainConfig

#: TrainConfig.scheduler -> the name transformers.get_scheduler knows it by
SCHEDULES = {"linear": "linear", "cosine": "cosine", "constant": "constant_with_warmup"}


def build_optimizer(
    model: torch.nn.Module, loss_fn: torch.nn.Module, config: TrainConfig, total_steps: int
) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW over the trainable parameters of ``model`` and ``loss_fn`` (a learned temperature), and its
    schedule over ``total_steps`` optimiser steps; returns ``(optimizer, scheduler)``."""
    from transformers import get_scheduler

    # Four groups: (backbone | fresh interaction block) x (weight decay | none). The interaction block is
    # randomly initialised, so it gets a larger learning rate, as new heads usually do.
    cfg = config
    groups: dict[tuple[bool, bool], list[torch.nn.Parameter]] = {}
    for name, p in list(model.named_parameters()) + list(loss_fn.named_parameters()):
        if not p.requires_grad:
            continue
        no_decay = p.ndim < 2 or "norm" in name.lower() or name.endswith("bias")
        groups.setdefault((name.startswith("interaction."), no_decay), []).append(p)
    params = [p for group in groups.values() for p in group]
    # The fused kernel (CPU and CUDA) updates all tensors in one call; the default on CPU loops over them in
    # Python, ~0.3 s a step for MiniLM on one core (transformers' Trainer uses the fused one too).
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
    optimizer = torch.optim.AdamW(
        [
            {
                "params": group,
                "weight_decay": 0.0 if no_decay else cfg.weight_decay,
                "lr": cfg.learning_rate * (cfg.interaction_lr_multiplier if fresh else 1.0),
            }
            for (fresh, no_decay), group in sorted(groups.items())
        ],
        lr=cfg.learning_rate,
        fused=fused or None,
    )
    scheduler = get_scheduler(
        SCHEDULES[cfg.scheduler],
        optimizer,
        num_warmup_steps=int(cfg.warmup_ratio * total_steps),
        num_training_steps=total_steps,
    )
    return optimizer, scheduler
