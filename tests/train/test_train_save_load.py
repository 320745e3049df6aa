"""Train -> save -> load.

Invariants:
* a trained concatenation model dir is a plain sentence-transformers model: ``SentenceTransformer(path)`` on
  the joined text gives the embeddings ``InFEmbed.load(path).encode_queries(queries, instructions)`` gives;
* ``infembed.json`` records what sentence-transformers cannot hold (interaction, template, pooling, lengths,
  the loss and training settings), so a run is reproducible from its output dir;
* a cross-attention model round-trips exactly (backbone + ``interaction.safetensors``);
* an untrained cross-attention model (gate = 0) gives the concatenation model's embedding (test_cross_attention.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from infembed.model import InFEmbed, ModelConfig
from infembed.train.config import TrainConfig
from infembed.train.trainer import Trainer


def _texts(rows):
    queries = [p.query for row in rows for p in row.pairs()]
    instructions = [p.instruction for row in rows for p in row.pairs()]
    passages = [p.passage for row in rows for p in row.pairs()]
    return queries, instructions, passages


def test_trained_concat_model_loads_in_sentence_transformers(rows, minilm, tmp_path):
    config = TrainConfig(
        batch_size=4, max_steps=2, learning_rate=1e-4, query_max_length=64, passage_max_length=64,
        objective="multi", negatives="P,I", device="cpu", output=str(tmp_path / "model"),
    )  # fmt: skip
    path = Trainer(config, rows=rows[:8]).train()
    queries, instructions, passages = _texts(rows[:8])

    saved = json.loads((path / "infembed.json").read_text())
    assert saved["interaction"] == "concat"
    assert saved["template"] == "{query} {instruction}"
    assert saved["pooling"] == "mean" and saved["normalize"] is True
    assert (saved["query_max_length"], saved["passage_max_length"]) == (64, 64)
    assert saved["training"]["steps"] == 2 and saved["training"]["rows"] == 8
    loss = saved["training"]["loss"]
    assert (loss["objective"], loss["negatives"], loss["temperature"]) == ("multi", ["P", "I"], 0.05)
    assert saved["training"]["extra_instruction_negatives"] == config.extra_instruction_negatives

    model = InFEmbed.load(str(path), device="cpu")
    ours_q = model.encode_queries(queries, instructions)
    ours_p = model.encode_passages(passages)
    st = SentenceTransformer(str(path), device="cpu")
    joined = [f"{q} {i}" for q, i in zip(queries, instructions)]
    np.testing.assert_allclose(st.encode(joined, convert_to_numpy=True), ours_q, atol=1e-5)
    np.testing.assert_allclose(st.encode(passages, convert_to_numpy=True), ours_p, atol=1e-5)
    # the two steps did train: the base model embeds the same texts differently
    assert np.abs(minilm.encode_queries(queries, instructions) - ours_q).max() > 1e-4


def test_cross_attention_model_round_trips(rows, tmp_path):
    config = TrainConfig(
        interaction="cross_attention", batch_size=2, max_steps=1, learning_rate=1e-3, query_max_length=48,
        passage_max_length=48, device="cpu", output=str(tmp_path / "model"),
    )  # fmt: skip
    trainer = Trainer(config, rows=rows[:4])
    path = trainer.train()
    trained = trainer.model
    assert float(trained.interaction.gate) != 0.0  # one step moved the gate: the instruction now matters
    assert (path / "interaction.safetensors").exists()
    saved = json.loads((path / "infembed.json").read_text())
    assert saved["interaction"] == "cross_attention" and saved["cross_attention_heads"] == 4

    loaded = InFEmbed.load(str(path), device="cpu")
    assert loaded.interaction is not None
    queries, instructions, passages = _texts(rows[:4])
    instructions[0] = None  # a query without an instruction goes through the same path
    np.testing.assert_allclose(
        loaded.encode_queries(queries, instructions), trained.encode_queries(queries, instructions), atol=1e-6
    )
    np.testing.assert_allclose(loaded.encode_passages(passages), trained.encode_passages(passages), atol=1e-6)


def test_fresh_cross_attention_model_is_concatenation(rows, minilm):
    model = InFEmbed.from_pretrained(None, config=ModelConfig(interaction="cross_attention"), device="cpu")
    assert float(model.interaction.gate) == 0.0
    queries, instructions, _ = _texts(rows[:3])
    with_instruction = model.encode_queries(queries, instructions)
    concatenated = minilm.encode_queries(queries, instructions)  # the backbone on "{query} {instruction}"
    np.testing.assert_allclose(with_instruction, concatenated, atol=1e-5)


def test_the_fresh_interaction_block_learns_faster_than_the_backbone(rows, tmp_path):
    """The cross-attention block is randomly initialised: its parameters get learning_rate x
    interaction_lr_multiplier (decay and no-decay alike); the backbone keeps learning_rate. After the warmup the
    gate has opened far enough for the instruction to matter (at the backbone's rate it stayed below 1e-4)."""
    config = TrainConfig(
        interaction="cross_attention", batch_size=2, max_steps=3, warmup_ratio=0.0, learning_rate=5e-5,
        interaction_lr_multiplier=20.0, query_max_length=32, passage_max_length=32, device="cpu",
        output=str(tmp_path / "model"),
    )  # fmt: skip
    trainer = Trainer(config, rows=rows[:4])
    optimizer, _ = trainer._make_optimizer(3)
    fresh = {id(p) for p in trainer.model.interaction.parameters()}
    seen = 0
    for group in optimizer.param_groups:
        is_fresh = {id(p) in fresh for p in group["params"]}
        assert len(is_fresh) == 1  # no group mixes the two
        assert group["lr"] == pytest.approx(1e-3 if is_fresh.pop() else 5e-5)
        seen += len(group["params"])
    assert seen == sum(1 for p in trainer.model.parameters() if p.requires_grad)
    trainer.train()
    # at the backbone's rate 3 Adam steps move g by at most 1.5e-4, so |gate| <= tanh(10 * 1.5e-4) = 1.5e-3
    assert abs(trainer.model.interaction.gate_value()) > 3e-3
