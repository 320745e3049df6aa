"""The learned decomposer (experimental): a token tagger on the packaged all-MiniLM-L6-v2 that reads an
instruction and marks its exclusion clauses and excluded aspects (:mod:`infembed.instructions.tagging`), meant
for the phrasings no rule knows.

The backbone stays frozen: its token states from a few layers (``feature_layers``) feed a small head (a linear
projection, one transformer encoder layer, a linear layer over the four tags). A decomposer dir holds the head
(``decomposer.safetensors``, float16) and ``decomposer.json`` (the tags, the head's shape, the backbone's
fingerprint, the training data and settings); ``infembed decomposer train`` makes one
(:mod:`infembed.instructions.decomposer_train`). Measured so far (docs/instructions.md), it is well below the
rules splitter on held-out tables, so it is not a splitter name yet and nothing ships: it is loaded by path.

Determinism: inference runs in eval mode with no sampling; a text's split is cached, so it is computed once per
process. Long texts are tagged in windows of at most ``WINDOW`` tokens, cut at sentence ends.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.instructions.instruction import Instruction
from infembed.instructions.tagging import TAGS, decode

CONFIG_FILE = "decomposer.json"
WEIGHTS_FILE = "decomposer.safetensors"
WINDOW = 254  # tokens per window, plus [CLS] and [SEP]
FORMAT = "infembed-decomposer/1"
_SURROGATE = re.compile("[\ud800-\udfff]")


def backbone_fingerprint(path: str | Path) -> str:
    """sha256 of the backbone's config and weights file names and sizes, and its config's text: a different
    backbone is refused rather than silently tagged with another model's adapter."""
    path = Path(path)
    digest = hashlib.sha256((path / "config.json").read_bytes())
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (path / name).exists():
            digest.update(f"{name}:{(path / name).stat().st_size}".encode())
    return digest.hexdigest()[:16]


def token_features(model, input_ids, attention_mask, layers: Sequence[int]):
    """The frozen backbone's token states of ``layers`` (0 = embeddings), concatenated: (batch, tokens, dim)."""
    import torch

    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
    return torch.cat([out.hidden_states[i] for i in layers], dim=-1)


@functools.cache
def _head_class():
    import torch
    from torch import nn

    class TaggingHead(nn.Module):
        """A projection, one transformer encoder layer (self-attention over the instruction's tokens) and a
        linear layer over the tags, on the frozen backbone's states."""

        def __init__(self, inputs: int, projection: int, heads: int, dropout: float = 0.0):
            super().__init__()
            self.projection = nn.Linear(inputs, projection)
            self.layer = nn.TransformerEncoderLayer(
                projection,
                heads,
                dim_feedforward=2 * projection,
                dropout=dropout,
                activation="gelu",
                batch_first=True,
            )
            self.out = nn.Linear(projection, len(TAGS))
            self.dropout = nn.Dropout(dropout)

        @classmethod
        def from_config(cls, config: dict[str, Any], dropout: float = 0.0) -> TaggingHead:
            inputs = int(config["hidden"]) * len(config["feature_layers"])
            return cls(inputs, int(config["projection"]), int(config["heads"]), dropout)

        def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            padding = torch.arange(features.shape[1], device=features.device)[None, :] >= lengths[:, None]
            x = self.dropout(torch.nn.functional.gelu(self.projection(features)))
            return self.out(self.dropout(self.layer(x, src_key_padding_mask=padding)))

    return TaggingHead


def __getattr__(name: str) -> Any:  # TaggingHead without importing torch at module import
    if name == "TaggingHead":
        return _head_class()
    raise AttributeError(name)


def load_backbone(path: str):
    """The backbone's encoder without its pooler (the tagger reads token states), quietly: transformers' report
    of the unused pooler weights is not news to a user."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return AutoModel.from_pretrained(path, add_pooling_layer=False)
    finally:
        hf_logging.set_verbosity(verbosity)


def read_config(directory: Path) -> dict[str, Any]:
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        raise DataError(
            "the decomposer's settings file is missing",
            config_path,
            hint="make one with: infembed decomposer train",
        )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DataError(f"is not valid JSON ({error})", config_path) from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise DataError(f"is not a decomposer settings file (format {FORMAT!r} expected)", config_path)
    for key in ("feature_layers", "projection", "heads", "tags", "hidden"):
        if key not in config:
            raise DataError("is missing", config_path, field=key)
    if list(config["tags"]) != list(TAGS):
        raise DataError(
            f"its tags {config['tags']} are not this version's {list(TAGS)}", config_path, field="tags"
        )
    return config


class Decomposer:
    """``decomposer(text) -> Instruction``; ``decomposer.batch(texts)`` tags many at once. Thread-safe."""

    def __init__(
        self, directory: str | Path | None = None, *, device: str = "cpu", backbone: str | None = None
    ):
        from safetensors.torch import load_file

        TaggingHead = _head_class()
        from transformers import AutoTokenizer

        from infembed.model.retriever import default_model_path

        self.directory = Path(directory)
        self.config = read_config(self.directory)
        weights_path = self.directory / WEIGHTS_FILE
        if not weights_path.is_file():
            raise DataError(
                "the decomposer's weights are missing",
                weights_path,
                hint="make one with: infembed decomposer train",
            )
        try:
            weights = load_file(str(weights_path))
        except Exception as error:  # safetensors raises its own error types for a torn or foreign file
            raise DataError(f"cannot be read as safetensors ({error})", weights_path) from None
        backbone = backbone or default_model_path()
        expected = self.config.get("backbone_fingerprint")
        if expected and Path(backbone).is_dir() and backbone_fingerprint(backbone) != expected:
            raise DataError(
                f"was trained on another backbone than {backbone} (fingerprint {expected})",
                self.directory / CONFIG_FILE,
                field="backbone_fingerprint",
            )
        self.tokenizer = AutoTokenizer.from_pretrained(backbone)
        model = load_backbone(backbone)
        model.eval()
        head = TaggingHead.from_config(self.config)
        try:
            head.load_state_dict({k: v.float() for k, v in weights.items()})
        except RuntimeError as error:
            reason = str(error).strip().splitlines()[0]
            raise DataError(
                f"does not hold the head its settings describe ({reason})", weights_path
            ) from None
        self.model, self.head = model.to(device), head.to(device).eval()
        self.device = device
        self._cache: dict[str, Instruction] = {}
        self._lock = threading.Lock()

    def __call__(self, text: str) -> Instruction:
        return self.batch([text])[0]

    def batch(self, texts: Sequence[str | None], batch_size: int = 32) -> list[Instruction]:
        stripped = [(t or "").strip() for t in texts]
        with self._lock:
            todo = sorted({t for t in stripped if t and t not in self._cache}, key=len)
        for i in range(0, len(todo), batch_size):
            chunk = todo[i : i + batch_size]
            results = self._tag(chunk)
            with self._lock:
                if len(self._cache) > 100_000:
                    self._cache.clear()
                self._cache.update(zip(chunk, results))
        with self._lock:
            return [self._cache[t] if t else Instruction("") for t in stripped]

    # ------------------------------------------------------------------------------------------ tagging
    def _windows(self, text: str) -> list[tuple[list[int], list[tuple[int, int]]]]:
        # a lone UTF-16 surrogate cannot be tokenised: tag the text with U+FFFD in its place (same offsets)
        readable = _SURROGATE.sub("\ufffd", text)
        encoded = self.tokenizer(readable, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = encoded["input_ids"], [tuple(o) for o in encoded["offset_mapping"]]
        windows, start = [], 0
        while start < len(ids) or not windows:
            end = min(start + WINDOW, len(ids))
            if end < len(ids):  # cut after the last sentence end inside the window, if any
                cut = max(
                    (
                        k + 1
                        for k in range(start, end)
                        if text[offsets[k][0] : offsets[k][1]] in (".", "!", "?", ";")
                    ),
                    default=end,
                )
                end = cut if cut > start + WINDOW // 4 else end
            windows.append((ids[start:end], offsets[start:end]))
            start = end
            if start >= len(ids):
                break
        return windows

    def _tag(self, texts: Sequence[str]) -> list[Instruction]:
        import torch

        pieces = [(i, w) for i, text in enumerate(texts) for w in self._windows(text)]
        cls, sep, pad = (
            self.tokenizer.cls_token_id,
            self.tokenizer.sep_token_id,
            self.tokenizer.pad_token_id or 0,
        )
        length = max(len(ids) for _, (ids, _) in pieces) + 2
        input_ids = torch.full((len(pieces), length), pad, dtype=torch.long)
        mask = torch.zeros((len(pieces), length), dtype=torch.long)
        for row, (_, (ids, _)) in enumerate(pieces):
            input_ids[row, : len(ids) + 2] = torch.tensor([cls, *ids, sep])
            mask[row, : len(ids) + 2] = 1
        with torch.inference_mode():
            features = token_features(
                self.model, input_ids.to(self.device), mask.to(self.device), self.config["feature_layers"]
            )
            predicted = self.head(features, mask.sum(1).to(self.device)).argmax(-1).cpu().tolist()
        offsets: list[list[tuple[int, int]]] = [[] for _ in texts]
        tags: list[list[int]] = [[] for _ in texts]
        for row, (owner, (ids, window_offsets)) in enumerate(pieces):
            offsets[owner].extend(window_offsets)
            tags[owner].extend(predicted[row][1 : len(ids) + 1])
        return [decode(text, offsets[i], tags[i]) for i, text in enumerate(texts)]
