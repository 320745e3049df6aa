"""All training settings in one dataclass, readable from flags or a YAML/JSON file, saved beside the model so a
run can be reproduced from its output directory (tevatron's habit)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError


@dataclass
class TrainConfig:
    # data
    data: list[str] = field(default_factory=list, metadata={"help": "InF-IR JSONL files/dirs or hub names; rows are concatenated."})
    limit: int | None = field(default=None, metadata={"help": "Use at most this many rows (after concatenation)."})
    # model
    model: str = field(default="default", metadata={"help": "Backbone: sentence-transformers dir, transformers checkpoint or hub name."})
    interaction: str = field(default="concat", metadata={"help": "concat (template) or cross_attention (learned, token level)."})
    template: str = field(default="{query} {instruction}", metadata={"help": "How instruction and query are joined (concat)."})
    pooling: str | None = field(default=None, metadata={"help": "cls | mean | last (default: the backbone's own)."})
    separate_passage_encoder: bool = field(default=False, metadata={"help": "Give passages their own encoder copy."})
    query_max_length: int | None = field(default=None, metadata={"help": "Default min(256, backbone max)."})
    passage_max_length: int | None = field(default=None, metadata={"help": "Default min(512, backbone max)."})
    gguf_file: str | None = field(default=None, metadata={"help": "Load the backbone from this GGUF file inside --model's dir."})
    lora: bool = field(default=False, metadata={"help": "Train LoRA adapters (peft) instead of all weights; merged on save."})
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    # loss
    objective: str = field(default="multi", metadata={"help": "uni (sum of per-set terms) or multi (one softmax over the union), paper naming."})
    negatives: str = field(default="P,I", metadata={"help": "Marginal negative sets: any non-empty subset of P, I, IQ."})
    iq_negatives: str = field(default="anchors", metadata={"help": "anchors (appendix/code) or instruction_with_other_queries (main text)."})
    positive_count: str = "once"
    temperature: float = 0.05
    learn_temperature: bool = False
    extra_instruction_negatives: int = field(default=0, metadata={"help": "Other in-batch instructions joined with each anchor's query."})
    # optimisation
    epochs: float = 2.0
    batch_size: int = field(default=16, metadata={"help": "InF-IR rows per device per step (3 pairs each)."})
    gradient_accumulation: int = 1
    grad_cache_chunk: int = field(default=0, metadata={"help": "Encode in chunks of this many texts with gradient caching (0: off)."})
    learning_rate: float = 5e-5
    interaction_lr_multiplier: float = field(default=20.0, metadata={"help": "Learning rate of the (freshly initialised) cross-attention block, as a multiple of learning_rate."})
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    scheduler: str = field(default="linear", metadata={"help": "linear | cosine | constant (after warmup)."})
    max_grad_norm: float = 1.0
    seed: int = 42
    # bookkeeping
    output: str = "runs/model"
    save_steps: int = field(default=0, metadata={"help": "Checkpoint every N optimiser steps (0: only at the end)."})
    keep_checkpoints: int = 2
    eval_benchmark: str | None = field(default=None, metadata={"help": "Benchmark dir/name to evaluate (p-MRR) every eval_steps."})
    eval_steps: int = 0
    log_steps: int = 1
    device: str | None = None
    max_steps: int | None = field(default=None, metadata={"help": "Stop after this many optimiser steps (for tests and quick runs)."})

    def __post_init__(self) -> None:
        if isinstance(self.data, str):
            self.data = [self.data]
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self.gradient_accumulation < 1:
            raise ValueError("gradient_accumulation must be >= 1")
        if self.scheduler not in ("linear", "cosine", "constant"):
            raise ValueError(f"scheduler must be linear, cosine or constant, got {self.scheduler!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise DataError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}", source)
        for f in fields(cls):
            if f.name in data and data[f.name] is not None:
                _check_type(f.name, str(f.type), data[f.name], source)
        return cls(**data)

    @classmethod
    def from_file(cls, path: str | Path) -> TrainConfig:
        path = Path(path)
        if not path.exists():
            raise DataError("file not found", path)
        text = path.read_text()
        if path.suffix in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.safe_load(text) or {}
            except yaml.YAMLError as error:
                mark = getattr(error, "problem_mark", None)
                raise DataError(f"not valid YAML ({getattr(error, 'problem', error)})", path, mark.line + 1 if mark else None) from None
        else:
            try:
                data = json.loads(text)
            except json.JSONDecodeError as error:
                raise DataError(f"not valid JSON ({error.msg})", path, error.lineno) from None
        if not isinstance(data, dict):
            raise DataError("expected a mapping of settings", path)
        return cls.from_dict(data, str(path))


_SCALARS = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _check_type(name: str, annotation: str, value: Any, source: str | None) -> None:
    """Settings from a file are checked against the field's type, so a typo names the file and the setting."""
    base = annotation.replace(" | None", "").strip()
    if base.startswith("list"):
        ok = isinstance(value, (list, str))
    elif base in _SCALARS:
        ok = isinstance(value, _SCALARS[base]) and not (base in ("int", "float") and isinstance(value, bool))
    else:
        return
    if not ok:
        raise DataError(f"expected {base}, got {type(value).__name__} {value!r}", source, field=name)
