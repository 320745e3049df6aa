"""GGUF checkpoints (llama.cpp's format) as training and generation backbones.

transformers reads a GGUF file by parsing it for the config, again for the tokenizer and again for the weights,
which it dequantises to float (every architecture without a packed-GGUF kernel, e.g. Llama/SmolLM2 on CPU). A
local GGUF file is therefore dequantised once and cached as a plain checkpoint under
``infembed.cache_dir() / "gguf"``; later loads read that (80 s -> 1 s for SmolLM2-135M on 2 cores).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def forget_quantizer(model: Any) -> bool:
    """A GGUF checkpoint that transformers dequantised on load (every architecture without a packed-GGUF kernel,
    e.g. Llama/SmolLM2 on CPU) is a plain float model, but it keeps its GGUF quantizer: ``save_pretrained``
    then refuses to write it ("quantized with gguf and is not serializable") and ``config.json`` would carry a
    ``quantization_config``. Drop both, so the model trains and saves like any other. Packed (still quantized)
    weights keep their quantizer."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None:
        return True
    if getattr(quantizer, "packed_modules", None):
        return False
    quantizer.remove_quantization_config(model)
    return True


def cached_checkpoint(directory: str, gguf_file: str, dtype: Any = None, kind: str = "base") -> Path | None:
    """Where a local GGUF file's dequantised checkpoint is cached (None: not cached, e.g. a hub GGUF or
    ``INFEMBED_GGUF_CACHE=0``). The key covers the file (path, size, mtime), the dtype, the model class
    (``kind``: a bare backbone or a causal LM with its head) and the transformers version, so a changed file or
    library is never served stale weights."""
    path = Path(directory) / gguf_file
    if os.environ.get("INFEMBED_GGUF_CACHE", "1") == "0" or not path.is_file():
        return None
    import hashlib

    import transformers

    from infembed import cache_dir

    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{dtype}|{kind}|{transformers.__version__}"
    return cache_dir() / "gguf" / f"{path.stem}-{kind}-{hashlib.blake2b(key.encode(), digest_size=8).hexdigest()}"


def resolve(directory: str, gguf_file: str | None, dtype: Any = None, kind: str = "base") -> tuple[str, str | None, Path | None]:
    """``(what to load, gguf_file to pass or None, where to save the dequantised model after loading or None)``:
    the cached checkpoint when there is one, else the GGUF file itself (and its future cache dir)."""
    cached = cached_checkpoint(directory, gguf_file, dtype, kind) if gguf_file else None
    if cached is not None and (cached / "config.json").exists():
        return str(cached), None, None
    return directory, gguf_file, cached


def save_if_dequantised(model: Any, tokenizer: Any, target: Path | None) -> None:
    """After a GGUF load: drop the quantizer and, when ``target`` is given, cache the float checkpoint there."""
    if forget_quantizer(model) and target is not None:
        save_checkpoint(model, tokenizer, target)


def save_checkpoint(model: Any, tokenizer: Any, target: Path) -> None:
    """Write a dequantised model and its tokenizer to ``target`` atomically (a temp dir renamed into place)."""
    from infembed.data.jsonl import atomic_dir

    try:
        with atomic_dir(target) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            if not keep_tokenizer_as_saved(tokenizer, tmp):
                raise _NotCached
    except (OSError, _NotCached):  # a race lost, a read-only/full disk, a tokenizer that does not round-trip
        pass


class _NotCached(Exception):
    pass


#: texts whose token ids a cached tokenizer must reproduce (spaces, a leading space, digits, accents, markup)
_PROBE = ["rain sky", " why is the sky grey when it rains?", "Ünïcode 42 <b>x</b>\n\tend"]


def keep_tokenizer_as_saved(tokenizer: Any, directory: str | Path) -> bool:
    """After ``tokenizer`` was saved in ``directory``: make sure it reads back into the same token ids (see
    :func:`_generic_tokenizer_class`); False when even the generic class does not."""
    directory = Path(directory)
    if not (directory / "tokenizer_config.json").exists() or _same_tokens(tokenizer, directory):
        return True
    _generic_tokenizer_class(directory)
    return _same_tokens(tokenizer, directory)


def _generic_tokenizer_class(directory: Path) -> None:
    """A GGUF tokenizer is rebuilt by transformers into a ``tokenizer.json``; its saved config may name a class
    that rebuilds part of it on load (transformers 5.5 names ``CodeLlamaTokenizer`` for SmolLM2's byte-level BPE,
    whose constructor swaps the byte-level pre-tokenizer for a Metaspace one, so every space becomes the unknown
    token). The cache reads ``tokenizer.json`` as it is, through the generic fast tokenizer."""
    import json

    config = directory / "tokenizer_config.json"
    if not (directory / "tokenizer.json").exists() or not config.exists():
        return
    data = json.loads(config.read_text(encoding="utf-8"))
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    config.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def _same_tokens(tokenizer: Any, directory: Path) -> bool:
    """Whether the tokenizer saved in ``directory`` reads the probe texts into the same ids as ``tokenizer``."""
    from transformers import AutoTokenizer

    try:
        saved = AutoTokenizer.from_pretrained(str(directory))
    except (OSError, ValueError):
        return False
    return all(saved(text)["input_ids"] == tokenizer(text)["input_ids"] for text in _PROBE)
