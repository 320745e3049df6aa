"""What a training run starts from: its InF-IR rows (files or hub names) and its model (backbone, interaction
block, LoRA adapters), both built from a :class:`~infembed.train.config.TrainConfig`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from infembed.data.errors import SettingsError
from infembed.data.records import Triplet
from infembed.model import InFEmbed, ModelConfig
from infembed.train.config import TrainConfig


def load_rows(specs: Sequence[str], limit: int | None = None) -> list[Triplet]:
    """The InF-IR rows of ``--data``: each spec a local file/dir or a hub name, concatenated, the first
    ``limit`` kept."""
    from infembed.data.inf_ir import read_triplets

    rows: list[Triplet] = []
    for spec in specs:
        if Path(spec).exists():
            rows += read_triplets(spec)
        else:
            from infembed.data.inf_ir import load_inf_ir

            rows += load_inf_ir(spec)
    if not rows:
        raise SettingsError("no training rows: give --data")
    return rows[:limit] if limit else rows


def build_model(config: TrainConfig, device: str | None = None) -> InFEmbed:
    """The model a run starts from: the backbone ``config.model`` with the configured interaction, template and
    pooling, in float32, wrapped in LoRA adapters when ``config.lora``."""
    model_config = ModelConfig(
        interaction=config.interaction,
        template=config.template,
        pooling=config.pooling,
        query_max_length=config.query_max_length,
        passage_max_length=config.passage_max_length,
        separate_passage_encoder=config.separate_passage_encoder,
        gguf_file=config.gguf_file,
        base_model=config.model,
    )
    model = InFEmbed.from_pretrained(config.model, config=model_config, device=device, dtype=torch.float32)
    if config.lora:
        apply_lora(model, config)
    return model


def apply_lora(model: InFEmbed, config: TrainConfig) -> None:
    """Wrap the backbone(s) in peft LoRA adapters; only adapter (and interaction) weights stay trainable."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules="all-linear",
        bias="none",
    )
    for enc in (model.encoder, model.passage_encoder):
        if enc is not None:
            enc.backbone = get_peft_model(enc.backbone, lora)
