"""A local GGUF backbone is parsed and dequantised once, then loaded from a plain checkpoint in the cache.

Invariants: the first load writes ``$INFEMBED_CACHE_DIR/gguf/<stem>-<key>/`` (config, weights, tokenizer) and
the second load reads it and gives the same embeddings; ``INFEMBED_GGUF_CACHE=0`` bypasses it; the key changes
when the file does (size/mtime), so stale weights are never served.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from infembed.model.encoder import load_sentence_transformer
from infembed.model.gguf import cached_checkpoint

TEXTS = ["rain", "why is the sky grey when it rains"]


@pytest.mark.slow
def test_second_load_uses_the_dequantised_checkpoint(smollm2_gguf, tmp_path, monkeypatch):
    monkeypatch.setenv("INFEMBED_CACHE_DIR", str(tmp_path))
    cached = cached_checkpoint(str(smollm2_gguf.parent), smollm2_gguf.name)
    assert cached is not None and cached.parent == tmp_path / "gguf" and not cached.exists()
    start = time.perf_counter()
    first = load_sentence_transformer(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name, pooling="last")
    cold = time.perf_counter() - start
    assert (cached / "config.json").exists() and (cached / "tokenizer.json").exists()
    assert "quantization_config" not in (cached / "config.json").read_text()
    start = time.perf_counter()
    second = load_sentence_transformer(str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name, pooling="last")
    warm = time.perf_counter() - start
    assert second[0].auto_model.name_or_path == str(cached)
    np.testing.assert_allclose(second.encode(TEXTS), first.encode(TEXTS), atol=1e-5)
    print(f"GGUF load: {cold:.1f} s cold, {warm:.1f} s from the cache")


def test_cache_key_follows_the_file_and_can_be_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("INFEMBED_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(16))
    first = cached_checkpoint(str(tmp_path), gguf.name)
    assert first is not None and first.name.startswith("model-base-")
    assert cached_checkpoint(str(tmp_path), gguf.name, kind="causal-lm") != first  # a head is another model
    os.utime(gguf, ns=(0, 10**9))
    assert cached_checkpoint(str(tmp_path), gguf.name) != first  # the file changed
    assert cached_checkpoint(str(tmp_path), "missing.gguf") is None  # a hub GGUF: no cache
    monkeypatch.setenv("INFEMBED_GGUF_CACHE", "0")
    assert cached_checkpoint(str(tmp_path), gguf.name) is None
