"""A text encoder: a transformers backbone held in a sentence-transformers model, with our own fast
tokenise -> forward -> pool path.

Why our own forward path: training needs gradients through pooled *and* token-level outputs (for the
cross-attention interaction), decoders need left padding and an EOS token for last-token pooling, and
inference is faster when the whole list is tokenised once and batched by token length (bench/encode.py).
The sentence-transformers model is still the storage format, so a saved concatenation model loads with
``SentenceTransformer(path)`` and gives the same embeddings (tested).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from infembed.data.errors import DataError, SettingsError
from infembed.model import gguf, names

POOLING_MODES = ("cls", "mean", "last")
_ST_POOLING = {"cls": "cls", "mean": "mean", "last": "lasttoken"}
_FROM_ST_POOLING = {"cls": "cls", "mean": "mean", "lasttoken": "last"}


def resolve_device(device: str | None = None) -> torch.device:
    if device:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _check_model_dir(path: str, gguf_file: str | None) -> None:
    """A local directory given as a model must hold one: a sentence-transformers dir (modules.json), a transformers
    checkpoint (config.json) or a GGUF file. Anything else is one line naming it, not transformers' traceback."""
    if gguf_file is not None or not os.path.isdir(path):
        return
    names = set(os.listdir(path))
    if "config.json" in names or any(n.endswith(".gguf") for n in names):
        return
    if {"train_config.json", "checkpoints"} & names:
        raise DataError(
            "a training run that has saved no model yet",
            path,
            hint="rerun `infembed train` with the same settings to resume it, or give a finished model dir",
        )
    raise DataError(
        "not a model directory (no modules.json, config.json or .gguf file)",
        path,
        hint="give a dir written by `infembed train` or sentence-transformers, or a hub name",
    )


class _HarmlessLoadReport(logging.Filter):
    """Drops transformers' load report when all it reports is an unexpected ``position_ids`` buffer (a constant
    that checkpoints written by older transformers, the packaged MiniLM's among them, still hold): transformers
    5.5 (the version the openvino extra pins) prints a six-line table for it on every load. Any other report
    (a missing or mismatched weight) is shown as transformers writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "LOAD REPORT" not in message:
            return True
        rows = [line for line in message.splitlines() if "|" in line and not line.startswith(("Key", "-"))]
        return not rows or not all("position_ids" in row and "UNEXPECTED" in row for row in rows)


logging.getLogger("transformers.modeling_utils").addFilter(_HarmlessLoadReport())


def load_sentence_transformer(
    name_or_path: str,
    *,
    pooling: str | None = None,
    max_length: int | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    gguf_file: str | None = None,
):
    """Load a sentence-transformers model dir or hub name; a plain transformers checkpoint (or a GGUF file)
    gets a Transformer + Pooling + Normalize stack. ``pooling`` overrides the stored pooling."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    device = str(device) if device is not None else None
    name_or_path = str(name_or_path)
    model_kwargs: dict[str, Any] = {}
    if dtype is not None:
        model_kwargs["dtype"] = dtype
    is_st = os.path.exists(os.path.join(name_or_path, "modules.json"))
    if gguf_file is None and (is_st or not os.path.exists(name_or_path)):
        if not is_st and names.looks_like_path(name_or_path):  # a missing dir, not a hub id
            raise names.missing_directory(name_or_path)
        try:
            st = SentenceTransformer(name_or_path, device=device, model_kwargs=model_kwargs or None)
        except OSError as error:  # not on the hub / offline / no network
            raise names.unloadable_hub_name(name_or_path, error) from None
        if pooling is not None and _pooling_of(st) != pooling:
            dim = st[0].get_embedding_dimension()
            st = SentenceTransformer(
                modules=[st[0], Pooling(dim, pooling_mode=_ST_POOLING[pooling]), Normalize()], device=device
            )
    else:
        _check_model_dir(name_or_path, gguf_file)
        name_or_path, gguf_file, save_to = gguf.resolve(name_or_path, gguf_file, dtype, kind="base")
        extra: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file is not None else {}
        try:
            transformer = Transformer(
                name_or_path,
                model_kwargs={**model_kwargs, **extra},
                processor_kwargs=dict(extra),
                config_kwargs=dict(extra),
            )
        except (
            OSError,
            ValueError,
        ) as error:  # a local dir transformers cannot read (a broken or partial save)
            if not os.path.isdir(name_or_path):
                raise
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DataError(f"cannot load a model from this directory ({reason})", name_or_path) from None
        if gguf_file is not None:
            gguf.save_if_dequantised(transformer.model, transformer.tokenizer, save_to)
        _pad_with_eos(transformer.tokenizer)
        mode = pooling or "mean"
        st = SentenceTransformer(
            modules=[
                transformer,
                Pooling(transformer.get_embedding_dimension(), pooling_mode=_ST_POOLING[mode]),
                Normalize(),
            ],
            device=device,
        )
    if max_length is not None:
        st.max_seq_length = max_length
    return st


def _pad_with_eos(tokenizer) -> None:
    """Decoder tokenizers often have no pad token (and transformers 5.5 drops the one a GGUF file names when the
    dequantised checkpoint is saved and read again): batches pad with the end-of-sequence token, which the
    attention mask hides."""
    if tokenizer is not None and tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token


def _pooling_of(st) -> str:
    for module in st:
        config = getattr(module, "get_config_dict", lambda: {})()
        if "pooling_mode" in config:
            mode = config["pooling_mode"]
            if isinstance(mode, (list, tuple)):
                mode = mode[0]
            return _FROM_ST_POOLING.get(mode, "mean")
    return "mean"


class Encoder(nn.Module):
    """Backbone + pooling + optional L2 normalisation around a SentenceTransformer's first module."""

    def __init__(
        self, st, *, pooling: str | None = None, normalize: bool = True, append_eos: bool | None = None
    ):
        super().__init__()
        self.st = st
        self.pooling = pooling or _pooling_of(st)
        if self.pooling not in POOLING_MODES:
            raise SettingsError(f"pooling must be one of {POOLING_MODES}, got {self.pooling!r}")
        self.normalize = normalize
        self.tokenizer = st[0].tokenizer
        _pad_with_eos(self.tokenizer)
        # Last-token pooling reads the final position; left padding puts every text's last token there.
        self.append_eos = (self.pooling == "last") if append_eos is None else append_eos
        if self.pooling == "last":
            self.tokenizer.padding_side = "left"
        #: what runs the backbone at inference: None (the torch backbone) or an exported one
        #: (:class:`~infembed.model.backends.OpenVINOBackbone`, set by ``InFEmbed.use_backend``)
        self.runtime = None

    @property
    def backbone(self) -> nn.Module:
        return self.st[0].auto_model

    @backbone.setter
    def backbone(self, module: nn.Module) -> None:
        # sentence-transformers >= 6 holds the model in ``.model`` (``auto_model`` is a read-only alias that
        # nn.Module would shadow with a second, unused submodule); older versions hold it in ``.auto_model``.
        first = self.st[0]
        setattr(first, "model" if "model" in first._modules else "auto_model", module)

    def __setattr__(self, name: str, value: Any) -> None:
        # nn.Module.__setattr__ registers a module value as a new submodule and never calls a property's
        # setter, so ``encoder.backbone = peft_model`` would silently leave the real backbone in place.
        if name == "backbone":
            type(self).backbone.fset(self, value)
            return
        super().__setattr__(name, value)

    def identity(self) -> dict[str, Any]:
        """What besides its weights decides how this encoder embeds a text: pooling, normalisation, EOS, the
        tokenizer (part of :meth:`InFEmbed.fingerprint <infembed.model.InFEmbed.fingerprint>`)."""
        tokenizer = self.tokenizer
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:
            pipeline = json.loads(backend.to_str())
            # truncation and padding are set per call by the tokenizer wrapper, not properties of the model
            pipeline.pop("truncation", None)
            pipeline.pop("padding", None)
            tokenizer_id = hashlib.sha256(json.dumps(pipeline, sort_keys=True).encode()).hexdigest()
        else:  # a slow (Python) tokenizer: its vocabulary
            tokenizer_id = hashlib.sha256(
                json.dumps(sorted(tokenizer.get_vocab().items())).encode()
            ).hexdigest()
        return {
            "pooling": self.pooling,
            "normalize": self.normalize,
            "append_eos": self.append_eos,
            "tokenizer": tokenizer_id,
            "tokenizer_class": type(tokenizer).__name__,
            "padding_side": tokenizer.padding_side,
            "truncation_side": getattr(tokenizer, "truncation_side", "right"),
            "eos_token": tokenizer.eos_token,
            "pad_token": tokenizer.pad_token,
        }

    @property
    def dim(self) -> int:
        return int(self.st[0].get_embedding_dimension())

    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    def prepare(self, texts: Sequence[str]) -> list[str]:
        if self.append_eos and self.tokenizer.eos_token:
            eos = self.tokenizer.eos_token
            return [t if t.endswith(eos) else t + eos for t in texts]
        return list(texts)

    def tokenize(self, texts: Sequence[str], max_length: int) -> dict[str, torch.Tensor]:
        features = self.tokenizer(
            self.prepare(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt"
        )
        return {k: v.to(self.device) for k, v in features.items()}

    def token_embeddings(self, features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        if self.runtime is not None:
            if torch.is_grad_enabled():
                raise SettingsError("an exported backbone has no gradients: train with the torch backend")
            output = self.runtime(**inputs)
        else:
            output = self.backbone(**inputs, return_dict=True)
        hidden = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
        return hidden, features["attention_mask"]

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "mean":
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        else:  # last non-padding token, whichever side the padding is on
            lengths = mask.sum(1)
            if bool((mask[:, -1] == 1).all()):
                pooled = hidden[:, -1]
            else:
                index = (lengths - 1).clamp(min=0)
                pooled = hidden[torch.arange(hidden.size(0), device=hidden.device), index]
        return pooled

    def finish(self, pooled: torch.Tensor) -> torch.Tensor:
        pooled = pooled.float()
        return nn.functional.normalize(pooled, dim=-1) if self.normalize else pooled

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        hidden, mask = self.token_embeddings(features)
        return self.finish(self.pool(hidden, mask))

    #: Texts per forward pass when :meth:`embed` splits a batch by token length on CPU (``None``: never).
    #: A contrastive batch mixes short and long texts: padded to the longest, 37% of the tokens computed for a
    #: 48-pair InF-IR batch are padding. Sorted by length in buckets of 16, 25% fewer tokens are computed, for
    #: the same embeddings and gradients (padding is masked). On CUDA one large padded pass keeps the device
    #: busier than several small ones, so the batch stays whole there.
    cpu_bucket_size: int | None = 16

    def embed(
        self,
        texts: Sequence[str],
        max_length: int,
        forward: Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Embeddings with gradients (training), in input order. On CPU, long lists run in batches of similar
        length. ``forward(features, rows)`` replaces the plain forward pass (``rows``: the batch's positions in
        ``texts``), for callers that add to it (the cross-attention interaction)."""
        texts = list(texts)
        run = forward or (lambda features, rows: self.forward(features))
        bucket = self.cpu_bucket_size if self.device.type == "cpu" else None
        if not bucket or len(texts) <= bucket:
            return run(self.tokenize(texts, max_length), torch.arange(len(texts)))
        encoded = self.tokenizer(self.prepare(texts), truncation=True, max_length=max_length, padding=False)
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded]
        order = sorted(range(len(texts)), key=lambda i: len(encoded["input_ids"][i]))
        parts = []
        for start in range(0, len(order), bucket):
            chunk = order[start : start + bucket]
            features = self.tokenizer.pad(
                {k: [encoded[k][i] for i in chunk] for k in keys}, return_tensors="pt"
            )
            parts.append(run({k: v.to(self.device) for k, v in features.items()}, torch.tensor(chunk)))
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order)] = torch.arange(len(order))
        return torch.cat(parts)[inverse.to(parts[0].device)]

    @torch.inference_mode()
    def encode(
        self, texts: Sequence[str], *, max_length: int, batch_size: int = 32, progress: str | None = None
    ) -> np.ndarray:
        """Embeddings as float32 numpy, in input order. Tokenises the whole list once, then runs batches of
        similar token length (longest first) to minimise padding."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        was_training = self.training
        self.eval()
        prepared = self.prepare(texts)
        encoded = self.tokenizer(prepared, truncation=True, max_length=max_length, padding=False)
        ids = encoded["input_ids"]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in encoded]
        bar = _progress(len(texts), progress)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch = self.tokenizer.pad({k: [encoded[k][i] for i in chunk] for k in keys}, return_tensors="pt")
            batch = {k: v.to(self.device) for k, v in batch.items()}
            out[chunk] = self.forward(batch).float().cpu().numpy()
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
        self.train(was_training)
        return out


def _progress(total: int, description: str | None):
    if description is None or total < 64:
        return None
    from infembed.progress import bar

    return bar(description, total, unit="texts")
