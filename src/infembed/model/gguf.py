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
    except OSError:  # another process won the race, or the disk is read-only/full: the cache is optional
        pass
