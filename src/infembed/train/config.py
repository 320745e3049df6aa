"""All training settings in one dataclass, readable from flags or a YAML/JSON file, saved beside the model so a
run can be reproduced from its output directory (tevatron's habit)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from infembed.data.errors import SettingsError
from infembed.settings import check_number as _check_number
from infembed.settings import read_settings_file, setting, settings_from_dict


@dataclass
class TrainConfig:
    """Every training setting, with its help text: the flags of ``infembed train``, the keys of a ``--config``
    YAML/JSON file and of the saved ``train_config.json`` all come from these fields (:mod:`infembed.settings`)."""

    # data
    data: list[str] = setting(default_factory=list, help="InF-IR rows: JSONL files/dirs or hub names (NAME[:SPLIT]); repeat to mix, rows are concatenated.")
    limit: int | None = setting(None, "Use at most this many rows (after concatenation).")
    # model
    model: str = setting("default", "Backbone: sentence-transformers dir, transformers checkpoint or hub name ('default': the packaged all-MiniLM-L6-v2).")
    interaction: str = setting("concat", "How instruction and query meet: concat (template) or cross_attention (learned, token level).")
    template: str = setting("{query} {instruction}", "How instruction and query are joined (concat): any string with {query} and {instruction}, or a named template.")
    pooling: str | None = setting(None, "cls | mean | last (default: the backbone's own).")
    separate_passage_encoder: bool = setting(False, "Give passages their own copy of the encoder.")
    query_max_length: int | None = setting(None, "Query token limit (default min(256, the backbone's)).")
    passage_max_length: int | None = setting(None, "Passage token limit (default min(512, the backbone's)).")
    gguf_file: str | None = setting(None, "Load the backbone from this GGUF file inside --model's dir.")
    lora: bool = setting(False, "Train LoRA adapters (peft) instead of all weights; merged into the saved model.")
    lora_r: int = setting(16, "LoRA rank.")
    lora_alpha: int = setting(32, "LoRA scaling alpha.")
    lora_dropout: float = setting(0.05, "LoRA dropout.")
    # loss
    objective: str = setting("multi", "uni (a sum of one softmax per negative set) or multi (one softmax over their union), the paper's names.")
    negatives: str = setting("P,I", "Marginal negative sets: any non-empty subset of P, I, IQ (comma-separated).")
    iq_negatives: str = setting("anchors", "What an IQ negative is: anchors (the paper's appendix and code) or instruction_with_other_queries (its main text).")
    positive_count: str = setting("once", "How often the positive is in the multi denominator: once (the reference code) or per_set (the equations literally).")
    temperature: float = setting(0.05, "Softmax temperature of the contrastive loss.")
    learn_temperature: bool = setting(False, "Learn the temperature (as CLIP's logit scale) instead of keeping it fixed.")
    extra_instruction_negatives: int = setting(0, "Other in-batch instructions joined with each anchor's query as extra I-negatives.")
    mined_negatives: int = setting(0, "Hard negatives mined with BM25 per row from the rows' own passages (other rows' passages that best match its query and instruction), added to its batch as extra P-negatives (0: off).")
    exclusion_training: str = setting("off", "Train for exclusion-aware search: decompose each instruction with this splitter (rules or auto; off: score the whole text) and score rows that exclude as search does, keep score minus a smooth penalty on excluded aspects (docs/losses.md).")
    exclusion_alpha: float = setting(1.0, "Exclusion-aware training: weight of the penalty on a passage that matches an excluded aspect better than the kept part.")
    exclusion_margin: float = setting(0.0, "Exclusion-aware training: how much better (in cosine) an aspect must match a passage than the kept part before the penalty starts.")
    # optimisation
    epochs: float = setting(2.0, "Passes over the rows (fractions allowed).")
    batch_size: int = setting(16, "InF-IR rows per device per step (3 pairs each).")
    gradient_accumulation: int = setting(1, "Optimiser step every N batches.")
    grad_cache_chunk: int = setting(0, "Encode in chunks of this many texts with gradient caching, for large batches in little memory (0: off).")
    learning_rate: float = setting(5e-5, "Peak learning rate (AdamW).")
    interaction_lr_multiplier: float = setting(20.0, "Learning rate of the freshly initialised cross-attention block, as a multiple of learning_rate.")
    weight_decay: float = setting(0.01, "AdamW weight decay.")
    warmup_ratio: float = setting(0.1, "Share of the steps spent warming the learning rate up.")
    scheduler: str = setting("linear", "linear | cosine | constant (after warmup).")
    max_grad_norm: float = setting(1.0, "Gradient clipping norm (0: off).")
    seed: int = setting(42, "Seed of shuffling, sampling and initialisation.")
    # bookkeeping
    output: str = setting("runs/model", "Model dir to write (also holds checkpoints, metrics.jsonl, loss.png).")
    save_steps: int = setting(0, "Checkpoint every N optimiser steps (0: only at the end).")
    keep_checkpoints: int = setting(2, "Checkpoints kept (0: all).")
    eval_benchmark: str | None = setting(None, "Benchmark dir/name to evaluate (p-MRR) every eval_steps.")
    eval_steps: int = setting(0, "Evaluate eval_benchmark every N optimiser steps (0: never).")
    log_steps: int = setting(1, "Log the loss every N optimiser steps.")
    device: str | None = setting(None, "cpu, cuda, cuda:1 ... (default: cuda if available; torchrun: the local rank's GPU).")
    max_steps: int | None = setting(None, "Stop after this many optimiser steps (for tests and quick runs).")

    def __post_init__(self) -> None:
        """Every setting is checked here, before any model or data is loaded, so a bad value fails at once with
        one line naming the setting (the CLI prints it and exits 2)."""
        if isinstance(self.data, str):
            self.data = [self.data]
        _check_choice("interaction", self.interaction, INTERACTIONS)
        _check_choice("pooling", self.pooling, POOLING_MODES, optional=True)
        _check_choice("scheduler", self.scheduler, SCHEDULERS)
        _check_choice("exclusion_training", self.exclusion_training, EXCLUSION_TRAINING)
        from infembed.templates import resolve_template

        resolve_template(self.template)
        _check_number("limit", self.limit, integer=True, minimum=1, optional=True, why="leave it unset for all rows")
        _check_number("query_max_length", self.query_max_length, integer=True, minimum=1, optional=True)
        _check_number("passage_max_length", self.passage_max_length, integer=True, minimum=1, optional=True)
        _check_number("lora_r", self.lora_r, integer=True, minimum=1)
        _check_number("lora_alpha", self.lora_alpha, above=0)
        _check_number("lora_dropout", self.lora_dropout, minimum=0, below=1)
        _check_number("extra_instruction_negatives", self.extra_instruction_negatives, integer=True, minimum=0)
        _check_number("mined_negatives", self.mined_negatives, integer=True, minimum=0, why="0 mines none")
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
            raise SettingsError(f"eval_steps is {self.eval_steps} but no eval_benchmark is set: give the benchmark to evaluate")
        if self.eval_benchmark and not self.eval_steps:
            raise SettingsError(
                f"eval_benchmark is {self.eval_benchmark!r} but eval_steps is 0, so it would never be evaluated: "
                "set eval_steps (evaluate every N steps)"
            )
        from infembed.losses import InFEmbedLoss  # the loss checks its own settings, naming each one

        InFEmbedLoss(**self.loss_settings())

    def loss_settings(self) -> dict[str, Any]:
        """The :class:`~infembed.losses.InFEmbedLoss` arguments this config sets."""
        return {
            "objective": self.objective,
            "negatives": self.negatives,
            "temperature": self.temperature,
            "learn_temperature": self.learn_temperature,
            "iq_negatives": self.iq_negatives,
            "positive_count": self.positive_count,
            "exclusion_alpha": self.exclusion_alpha,
            "exclusion_margin": self.exclusion_margin,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> TrainConfig:
        """From a mapping (a settings file's, a saved train_config.json): unknown keys and wrong types name
        the setting and the file."""
        return settings_from_dict(cls, data, source)

    @classmethod
    def from_file(cls, path: str | Path) -> TrainConfig:
        """From a YAML or JSON file of settings."""
        return cls.from_dict(read_settings_file(path), str(path))


INTERACTIONS = ("concat", "cross_attention")
POOLING_MODES = ("cls", "mean", "last")
SCHEDULERS = ("linear", "cosine", "constant")
#: splitters for exclusion-aware training: deterministic and local (no llm endpoint inside a training step)
EXCLUSION_TRAINING = ("off", "rules", "auto")
def _check_choice(name: str, value: Any, choices: tuple[str, ...], *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value not in choices:
        default = " (or unset for the backbone's own)" if optional else ""
        raise SettingsError(f"{name} must be one of {', '.join(choices)}{default}; got {value!r}")
