"""All training settings in one dataclass, readable from flags or a YAML/JSON file, saved beside the model so a
run can be reproduced from its output directory (tevatron's habit)."""

from __future__ import annotations

import json
import math
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
        """Every setting is checked here, before any model or data is loaded, so a bad value fails at once with
        one line naming the setting (the CLI prints it and exits 2)."""
        if isinstance(self.data, str):
            self.data = [self.data]
        _check_choice("interaction", self.interaction, INTERACTIONS)
        _check_choice("pooling", self.pooling, POOLING_MODES, optional=True)
        _check_choice("scheduler", self.scheduler, SCHEDULERS)
        from infembed.templates import resolve_template

        resolve_template(self.template)
        _check_number("limit", self.limit, integer=True, minimum=1, optional=True, why="leave it unset for all rows")
        _check_number("query_max_length", self.query_max_length, integer=True, minimum=1, optional=True)
        _check_number("passage_max_length", self.passage_max_length, integer=True, minimum=1, optional=True)
        _check_number("lora_r", self.lora_r, integer=True, minimum=1)
        _check_number("lora_alpha", self.lora_alpha, above=0)
        _check_number("lora_dropout", self.lora_dropout, minimum=0, below=1)
        _check_number("extra_instruction_negatives", self.extra_instruction_negatives, integer=True, minimum=0)
        _check_number("epochs", self.epochs, above=0, why="a run of no epochs trains nothing")
        _check_number("batch_size", self.batch_size, integer=True, minimum=1)
        _check_number("gradient_accumulation", self.gradient_accumulation, integer=True, minimum=1)
        _check_number("grad_cache_chunk", self.grad_cache_chunk, integer=True, minimum=0, why="0 turns gradient caching off")
        _check_number("learning_rate", self.learning_rate, above=0)
        _check_number("interaction_lr_multiplier", self.interaction_lr_multiplier, above=0)
        _check_number("weight_decay", self.weight_decay, minimum=0)
        _check_number("warmup_ratio", self.warmup_ratio, minimum=0, maximum=1, why="a fraction of the steps")
        _check_number("max_grad_norm", self.max_grad_norm, minimum=0, why="0 turns clipping off")
        _check_number("seed", self.seed, integer=True, minimum=0, maximum=2**32 - 1)
        _check_number("save_steps", self.save_steps, integer=True, minimum=0, why="0 saves only at the end")
        _check_number("keep_checkpoints", self.keep_checkpoints, integer=True, minimum=0, why="0 keeps them all")
        _check_number("eval_steps", self.eval_steps, integer=True, minimum=0)
        _check_number("log_steps", self.log_steps, integer=True, minimum=1)
        _check_number("max_steps", self.max_steps, integer=True, minimum=1, optional=True, why="leave it unset to train all epochs")
        if self.eval_steps and not self.eval_benchmark:
            raise ValueError(f"eval_steps is {self.eval_steps} but no eval_benchmark is set: give the benchmark to evaluate")
        if self.eval_benchmark and not self.eval_steps:
            raise ValueError(
                f"eval_benchmark is {self.eval_benchmark!r} but eval_steps is 0, so it would never be evaluated: "
                "set eval_steps (evaluate every N steps)"
            )
        from infembed.losses import InFEmbedLoss  # the loss checks its own settings, naming each one

        InFEmbedLoss(objective=self.objective, negatives=self.negatives, temperature=self.temperature,
                     learn_temperature=self.learn_temperature, iq_negatives=self.iq_negatives,
                     positive_count=self.positive_count)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise DataError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}", source)
        data = dict(data)
        for f in fields(cls):
            if f.name in data and data[f.name] is not None:
                data[f.name] = _check_type(f.name, str(f.type), data[f.name], source)
        if source is None:
            return cls(**data)
        try:
            return cls(**data)
        except ValueError as error:  # a bad value from a file: name the file too
            raise DataError(str(error), source) from None

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


INTERACTIONS = ("concat", "cross_attention")
POOLING_MODES = ("cls", "mean", "last")
SCHEDULERS = ("linear", "cosine", "constant")
_SCALARS = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _check_type(name: str, annotation: str, value: Any, source: str | None) -> Any:
    """Settings from a file are checked against the field's type, so a typo names the file and the setting.
    Returns the value, a numeric string converted for a float setting: YAML 1.1 (PyYAML) reads ``1e-4`` (no dot)
    as the string '1e-4'."""
    base = annotation.replace(" | None", "").strip()
    if base == "float" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if base.startswith("list"):
        ok = isinstance(value, (list, str))
    elif base in _SCALARS:
        ok = isinstance(value, _SCALARS[base]) and not (base in ("int", "float") and isinstance(value, bool))
    else:
        return value
    if not ok:
        raise DataError(f"expected {base}, got {type(value).__name__} {value!r}", source, field=name)
    return value


def _check_choice(name: str, value: Any, choices: tuple[str, ...], *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value not in choices:
        default = " (or unset for the backbone's own)" if optional else ""
        raise ValueError(f"{name} must be one of {', '.join(choices)}{default}; got {value!r}")


def _check_number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
    optional: bool = False,
    integer: bool = False,
    why: str = "",
) -> None:
    """A numeric setting within its range (NaN and infinity are out of every range)."""
    if value is None and optional:
        return
    bounds = []
    if minimum is not None:
        bounds.append(f">= {minimum:g}")
    if above is not None:
        bounds.append(f"> {above:g}")
    if maximum is not None:
        bounds.append(f"<= {maximum:g}")
    if below is not None:
        bounds.append(f"< {below:g}")
    kinds = (int,) if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    ok = ok and (above is None or value > above) and (below is None or value < below)
    if not ok:
        reason = f" ({why})" if why else ""
        kind = "a whole number" if integer else "a number"
        raise ValueError(f"{name} must be {kind} {' and '.join(bounds)}{reason}; got {value!r}")
