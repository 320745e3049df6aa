"""The learned decomposer: a token tagger on the packaged all-MiniLM-L6-v2 that reads an instruction and marks
its exclusion clauses and excluded aspects (:mod:`infembed.instructions.tagging`). It is what the ``auto``
splitter uses (the default of search and serve), shipped in ``infembed/resources/decomposer``.

The backbone carries a LoRA adapter (rank ``lora.rank`` on every linear layer, merged into the weights when
loaded, so tagging costs one MiniLM forward pass); its token states from a few layers (``feature_layers``) feed a
small head (a linear projection, one transformer encoder layer, a linear layer over the four tags). A decomposer
dir holds the head and the adapter (``decomposer.safetensors``, float16) and ``decomposer.json`` (the tags, the
shapes, the backbone's fingerprint, the training data and settings, and ``members``: one record per member, each
naming its weights file; a decomposer of several members, trained with several seeds, averages their tag
probabilities token by token, and costs one backbone pass per member); ``infembed decomposer train`` makes one
(:mod:`infembed.instructions.decomposer_train`); a dir without an adapter (``lora: null``) reads the frozen
backbone.

Determinism: inference runs in eval mode with no sampling; a text's split is cached, so it is computed once per
process. Long texts are tagged in windows of at most ``WINDOW`` tokens, cut at sentence ends.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError, SettingsError
from infembed.instructions.instruction import Instruction
from infembed.instructions.tagging import BEGIN, CUE, TAGS, decode

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


@functools.cache
def _graph_class():
    import torch
    from torch import nn

    class TaggingGraph(nn.Module):
        """The backbone and the head as one module, ``(input_ids, attention_mask) -> tag probabilities``: what
        inference runs, on torch or exported to OpenVINO. The attention mask reaches the backbone as a square
        boolean mask, which transformers uses as given (its own mask builder cannot be traced)."""

        def __init__(self, backbone, head, layers: Sequence[int]):
            super().__init__()
            self.backbone, self.head, self.layers = backbone, head, list(layers)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            square = attention_mask[:, None, None, :].bool().expand(-1, 1, attention_mask.shape[1], -1)
            features = token_features(self.backbone, input_ids, square, self.layers)
            return self.head(features, attention_mask.sum(1)).float().softmax(-1)

    return TaggingGraph


@functools.cache
def _average_class():
    import torch
    from torch import nn

    class AveragedGraph(nn.Module):
        """Members' ``TaggingGraph`` s as one module: their tag probabilities averaged token by token (one
        export, one runtime call; each member adds one backbone pass)."""

        def __init__(self, graphs: Sequence[nn.Module]):
            super().__init__()
            self.graphs = nn.ModuleList(graphs)
            self.layers = [g.layers for g in graphs]

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return torch.stack([g(input_ids, attention_mask) for g in self.graphs]).mean(0)

    return AveragedGraph


def member_file(index: int) -> str:
    """The weights file of member ``index`` (0: ``decomposer.safetensors``, 1: ``decomposer-2.safetensors``...)."""
    return WEIGHTS_FILE if index == 0 else WEIGHTS_FILE.replace(".safetensors", f"-{index + 1}.safetensors")


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


LORA_TARGETS = ("query", "key", "value", "dense")  # every linear layer of a BERT encoder
LORA_PREFIX = "backbone."


def lora_shape(rank: int) -> dict[str, Any] | None:
    """The adapter's settings as saved in ``decomposer.json`` (None: the backbone is used as it ships)."""
    return {"rank": rank, "alpha": 2 * rank, "targets": list(LORA_TARGETS)} if rank else None


def with_lora(model, rank: int, dropout: float = 0.0):
    """``model`` with a LoRA adapter (peft) on its linear layers; only the adapter's weights train."""
    from peft import LoraConfig, get_peft_model

    shape = lora_shape(rank)
    return get_peft_model(
        model,
        LoraConfig(
            r=shape["rank"],
            lora_alpha=shape["alpha"],
            target_modules=shape["targets"],
            lora_dropout=dropout,
        ),
    )


def lora_weights(model) -> dict[str, Any]:
    """The adapter's weights (peft's names, under :data:`LORA_PREFIX`), float16."""
    import torch
    from peft import get_peft_model_state_dict

    return {
        LORA_PREFIX + k: v.detach().to("cpu", torch.float16).contiguous()
        for k, v in get_peft_model_state_dict(model).items()
    }


def merged_backbone(model, lora: dict[str, Any] | None, weights: dict[str, Any], path: Path):
    """The backbone with the saved adapter merged into its weights (as fast as the plain backbone)."""
    if not lora:
        return model
    from peft import set_peft_model_state_dict

    adapter = {k[len(LORA_PREFIX) :]: v.float() for k, v in weights.items() if k.startswith(LORA_PREFIX)}
    if not adapter:
        raise DataError("holds no adapter weights though its settings name one", path)
    wrapped = with_lora(model, int(lora["rank"]))
    result = set_peft_model_state_dict(wrapped, adapter)
    if getattr(result, "unexpected_keys", None):
        raise DataError(f"holds adapter weights this backbone lacks ({result.unexpected_keys[0]})", path)
    return wrapped.merge_and_unload()


RUNTIMES = ("torch", "openvino")


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
    members = config.setdefault("members", [{"weights": WEIGHTS_FILE}])  # one member before session 15
    files = [m.get("weights") if isinstance(m, dict) else None for m in members] if isinstance(members, list) else []
    if not files or not all(isinstance(f, str) and f == Path(f).name and f.endswith(".safetensors") for f in files):
        message = "must list each member's weights file (a .safetensors name in its directory)"
        raise DataError(message, config_path, field="members")
    return config


class Decomposer:
    """``decomposer(text) -> Instruction``; ``decomposer.batch(texts)`` tags many at once. Thread-safe."""

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        device: str = "cpu",
        backbone: str | None = None,
        min_score: float | None = None,
        runtime: str | None = None,
    ):
        from transformers import AutoTokenizer

        from infembed.model.retriever import default_model_path

        self.directory = Path(directory)
        self.config = read_config(self.directory)
        backbone = backbone or default_model_path()
        expected = self.config.get("backbone_fingerprint")
        if expected and Path(backbone).is_dir() and backbone_fingerprint(backbone) != expected:
            raise DataError(
                f"was trained on another backbone than {backbone} (fingerprint {expected})",
                self.directory / CONFIG_FILE,
                field="backbone_fingerprint",
            )
        self.tokenizer = AutoTokenizer.from_pretrained(backbone)
        self.tokenizer.model_max_length = 1 << 30  # texts are cut into windows here: no warning on long ones
        self.device = device
        graphs = [self._member(self.directory / m["weights"], backbone) for m in self.config["members"]]
        #: ``(input_ids, attention_mask) -> tag probabilities``: the member's graph, or the members' averaged
        self.graph = graphs[0] if len(graphs) == 1 else _average_class()(graphs).eval()
        #: the (first) member's backbone, adapter merged, and head
        self.model, self.head = graphs[0].backbone, graphs[0].head
        self.runtime = self._runtime(runtime)
        #: an aspect whose words the model tags as aspect with less probability than this is left kept
        self.min_score = float(min_score if min_score is not None else self.config.get("min_score", 0.0))
        self._cache: dict[str, Instruction] = {}
        self._cues: dict[str, float] = {}
        self._lock = threading.Lock()

    def _member(self, weights_path: Path, backbone: str):
        """One member's ``TaggingGraph`` (backbone with its adapter merged, head) from its weights file."""
        from safetensors.torch import load_file

        TaggingHead = _head_class()
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
        model = merged_backbone(load_backbone(backbone), self.config.get("lora"), weights, weights_path)
        head = TaggingHead.from_config(self.config)
        try:
            head.load_state_dict({k: v.float() for k, v in weights.items() if not k.startswith(LORA_PREFIX)})
        except RuntimeError as error:
            reason = str(error).strip().splitlines()[0]
            raise DataError(
                f"does not hold the head its settings describe ({reason})", weights_path
            ) from None
        graph = _graph_class()(
            model.eval().to(self.device), head.to(self.device).eval(), self.config["feature_layers"]
        )
        return graph.eval()

    def _runtime(self, name: str | None):
        """The OpenVINO graph (None: torch). ``runtime`` None runs OpenVINO where it can (the CPU, the openvino
        extra installed; 2.3x faster per instruction, the same tags) and torch otherwise: an export that fails
        or tags otherwise than torch is one logged warning, not an error."""
        from infembed.model.backends import check_backend

        if name is not None and name not in RUNTIMES:
            raise SettingsError(
                f"the decomposer's runtime must be one of {', '.join(RUNTIMES)}, got {name!r}"
            )
        if name == "torch":
            return None
        if name is None:
            try:
                check_backend("openvino", self.device)
            except SettingsError:
                return None
        else:
            check_backend("openvino", self.device)
        from infembed.instructions.decomposer_openvino import PROBE

        example = self._inputs([self._windows(PROBE)[0]])
        try:
            from infembed.instructions.decomposer_openvino import openvino_graph

            return openvino_graph(self.graph, example)
        except Exception as error:  # an exporter or runtime that cannot take this graph
            if name == "openvino":
                raise SettingsError(f"the decomposer cannot run on OpenVINO ({error})") from None
            logging.getLogger(__name__).warning("the decomposer runs on torch: OpenVINO failed (%s)", error)
            return None

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
                    self._cues.clear()
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

    def _inputs(self, windows: Sequence[tuple[list[int], Any]]):
        """The token ids of ``windows`` with [CLS] and [SEP], padded, and their attention mask."""
        import torch

        cls, sep, pad = (
            self.tokenizer.cls_token_id,
            self.tokenizer.sep_token_id,
            self.tokenizer.pad_token_id or 0,
        )
        length = max(len(ids) for ids, _ in windows) + 2
        input_ids = torch.full((len(windows), length), pad, dtype=torch.long)
        mask = torch.zeros((len(windows), length), dtype=torch.long)
        for row, (ids, _) in enumerate(windows):
            input_ids[row, : len(ids) + 2] = torch.tensor([cls, *ids, sep])
            mask[row, : len(ids) + 2] = 1
        return input_ids, mask

    def _tag(self, texts: Sequence[str]) -> list[Instruction]:
        import torch

        from infembed.instructions.decomposer_openvino import pad_to_step

        pieces = [(i, w) for i, text in enumerate(texts) for w in self._windows(text)]
        input_ids, mask = self._inputs([w for _, w in pieces])
        with torch.inference_mode():
            if self.runtime is not None:
                input_ids, mask = pad_to_step(input_ids, mask, self.tokenizer.pad_token_id or 0)
                inputs = {"input_ids": input_ids.numpy(), "attention_mask": mask.numpy()}
                probabilities = torch.from_numpy(self.runtime.run(inputs))
            else:
                probabilities = self.graph(input_ids.to(self.device), mask.to(self.device))
            predicted = probabilities.argmax(-1).cpu().tolist()
            aspect_scores = probabilities[..., BEGIN:].sum(-1).cpu().tolist()
            cue_scores = probabilities[..., CUE].cpu().tolist()
        offsets: list[list[tuple[int, int]]] = [[] for _ in texts]
        tags: list[list[int]] = [[] for _ in texts]
        scores: list[list[float]] = [[] for _ in texts]
        cues = [0.0] * len(texts)
        for row, (owner, (ids, window_offsets)) in enumerate(pieces):
            offsets[owner].extend(window_offsets)
            tags[owner].extend(predicted[row][1 : len(ids) + 1])
            scores[owner].extend(aspect_scores[row][1 : len(ids) + 1])
            cues[owner] = max([cues[owner], *cue_scores[row][1 : len(ids) + 1]])
        with self._lock:
            self._cues.update(zip(texts, cues))
        return [decode(text, offsets[i], tags[i], scores[i], self.min_score) for i, text in enumerate(texts)]

    def cue_score(self, text: str) -> float:
        """The highest probability the model gave any token of ``text`` of being an exclusion cue (0 for a text
        not tagged yet or empty): high where it reads an exclusion even if it found no aspect in it."""
        with self._lock:
            return self._cues.get((text or "").strip(), 0.0)
