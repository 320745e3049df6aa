"""LoRA (peft) training, and a decoder backbone with last-token pooling.

Invariants:
* with ``lora=True`` only adapter weights require a gradient, get one, and change in an optimiser step;
* saving merges the adapters into the backbone: the model dir holds plain backbone weights (no ``lora_`` or
  ``base_layer`` keys) and ``InFEmbed.load`` on it gives the embeddings the adapted model gave before saving;
* a decoder (SmolLM2-135M, loaded from its GGUF file) is padded on the left with an EOS token appended, so
  last-token pooling reads each text's final real token, and a text's embedding does not depend on how much
  padding its batch needs.

The MiniLM test is quick; the SmolLM2 ones dequantise a GGUF file to fp32 and are marked slow.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from infembed.model import InFEmbed
from infembed.train.config import TrainConfig
from infembed.train.inputs import build_model
from infembed.train.trainer import Trainer

QUERIES = ["how long does sourdough bread take to rise", "why do suspension bridges sway"]
INSTRUCTIONS = ["Only home kitchens are relevant.", "Explain it with aerodynamics."]
PASSAGES = ["A sourdough loaf needs four to six hours of bulk rise.", "Wind makes the deck oscillate."]


def _digests(model: torch.nn.Module) -> dict[str, str]:
    return {
        name: hashlib.blake2b(p.detach().cpu().numpy().tobytes(), digest_size=16).hexdigest()
        for name, p in model.named_parameters()
    }


def _embeddings(model: InFEmbed) -> np.ndarray:
    return np.concatenate([model.encode_queries(QUERIES, INSTRUCTIONS), model.encode_passages(PASSAGES)])


def _one_lora_step(model: InFEmbed, config: TrainConfig, rows) -> tuple[set[str], set[str]]:
    """One optimiser step of the trainer; returns (parameters that got a gradient, parameters that changed)."""
    before = _digests(model)
    trainer = Trainer(config, model=model, rows=rows)
    optimizer, _ = trainer._make_optimizer(total_steps=1)
    model.train()
    batch = next(iter(trainer._micro_batches(0)))
    trainer.backward_step(batch)
    with_grad = {
        n for n, p in model.named_parameters() if p.grad is not None and bool(p.grad.abs().sum() > 0)
    }
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    after = _digests(model)
    return with_grad, {name for name in before if before[name] != after[name]}


def _assert_merged_and_reloads(model: InFEmbed, path: Path, before: np.ndarray, atol: float) -> InFEmbed:
    model.save(path)
    assert not (path / "adapter_config.json").exists()
    with safe_open(str(path / "model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    assert keys and not [k for k in keys if "lora_" in k or "base_layer" in k]
    reloaded = InFEmbed.load(str(path), device="cpu")
    np.testing.assert_allclose(_embeddings(reloaded), before, atol=atol)
    return reloaded


def _assert_only_adapters_train(model: InFEmbed, with_grad: set[str], changed: set[str]) -> None:
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert sum(p.numel() for n, p in model.named_parameters() if n in trainable) < 0.1 * sum(
        p.numel() for p in model.parameters()
    )
    assert with_grad and with_grad <= trainable
    assert changed and changed <= trainable
    assert any("lora_B" in n for n in changed)  # B starts at zero: it moves first


def test_minilm_lora_trains_only_adapters_and_saves_merged(rows, tmp_path):
    config = TrainConfig(
        lora=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, learning_rate=1e-3, query_max_length=32,
        passage_max_length=32, batch_size=2, negatives="P,I", device="cpu", output=str(tmp_path / "run"),
    )  # fmt: skip
    model = build_model(config, device="cpu")
    initial = _embeddings(model)
    with_grad, changed = _one_lora_step(model, config, rows[:2])
    _assert_only_adapters_train(model, with_grad, changed)
    adapted = _embeddings(model)
    assert np.abs(adapted - initial).max() > 1e-4  # the adapters do change the embeddings
    _assert_merged_and_reloads(model, tmp_path / "model", adapted, atol=1e-5)


# -- decoder: SmolLM2-135M from GGUF, LoRA, last-token pooling ---------------------------------------------------


@pytest.fixture(scope="module")
def smollm2(smollm2_gguf, tmp_path_factory):
    config = TrainConfig(
        model=str(smollm2_gguf.parent), gguf_file=smollm2_gguf.name, pooling="last",
        lora=True, lora_r=4, lora_alpha=8, lora_dropout=0.0, learning_rate=1e-3,
        query_max_length=32, passage_max_length=32, batch_size=1, extra_instruction_negatives=0,
        negatives="P,I", device="cpu",
        output=str(tmp_path_factory.mktemp("smollm2-run")),
    )  # fmt: skip
    return config, build_model(config, device="cpu")


@pytest.mark.slow
def test_decoder_pads_left_and_pools_the_last_real_token(smollm2):
    _, model = smollm2
    encoder = model.encoder
    assert model.config.pooling == "last" and encoder.append_eos
    assert encoder.tokenizer.padding_side == "left"
    eos = encoder.tokenizer.eos_token_id
    texts = ["rain", "why is the sky grey when it rains, and why are storm clouds so dark"]
    features = encoder.tokenize(texts, 32)
    mask = features["attention_mask"]
    assert mask[0, 0] == 0 and bool((mask[:, -1] == 1).all())  # left padding: the last column is real
    assert bool((features["input_ids"][:, -1] == eos).all())  # and it is the appended EOS
    model.eval()
    with torch.no_grad():
        hidden, mask = encoder.token_embeddings(features)
        torch.testing.assert_close(encoder.pool(hidden, mask), hidden[:, -1])
        # with right padding the pooling still finds each row's last real token
        right_mask = torch.flip(mask, dims=[1])
        lengths = right_mask.sum(1)
        expected = hidden[torch.arange(2), lengths - 1]
        torch.testing.assert_close(encoder.pool(hidden, right_mask), expected)
    # padding does not change a text's embedding (masked positions; rotary positions are relative)
    alone = model.encode_passages(texts[:1])
    in_batch = model.encode_passages(texts)[:1]
    np.testing.assert_allclose(in_batch, alone, atol=1e-4)


@pytest.mark.slow
def test_decoder_lora_step_changes_only_adapters_and_save_merges(smollm2, rows, tmp_path):
    config, model = smollm2
    initial = _embeddings(model)
    with_grad, changed = _one_lora_step(model, config, rows[:1])
    _assert_only_adapters_train(model, with_grad, changed)
    adapted = _embeddings(model)
    assert np.abs(adapted - initial).max() > 1e-4
    reloaded = _assert_merged_and_reloads(model, tmp_path / "model", adapted, atol=1e-4)
    assert reloaded.config.pooling == "last" and reloaded.encoder.tokenizer.padding_side == "left"
