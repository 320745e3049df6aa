"""The cross-attention interaction built on the concatenated encoding (issue #14).

Invariants:
* an untrained block (gate 0) gives exactly the concatenation model's embeddings, on the training path (same
  tensors, same dropout draws: the RNG after the call is the one concatenation leaves) and at inference;
* exclusion-aware scoring of an untrained block is the concatenation model's;
* training changes them: the gate opens and the embeddings leave the concatenation of the same backbone;
* a model saved before ``cross_attention_base`` existed loads with its query-alone base (its untrained block is
  the backbone's embedding of the query alone); a missing ``interaction.safetensors`` is one clear error.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from infembed.data.errors import SettingsError
from infembed.model import InFEmbed, ModelConfig
from infembed.train.config import TrainConfig
from infembed.train.trainer import Trainer


def _pairs(rows):
    queries = [p.query for row in rows for p in row.pairs()]
    instructions = [p.instruction for row in rows for p in row.pairs()]
    return queries, instructions


def _fresh(interaction: str) -> InFEmbed:
    return InFEmbed.from_pretrained(
        None, config=ModelConfig(interaction=interaction), device="cpu", dtype=torch.float32
    )


def test_an_untrained_block_is_exactly_concatenation(rows, minilm):
    cross, concat = _fresh("cross_attention"), _fresh("concat")
    assert cross.interaction.gate_value() == 0.0 and cross.config.cross_attention_base == "concat"
    queries, instructions = _pairs(rows[:7])  # 21 texts: more than one CPU bucket of 16
    instructions[0] = None
    instructions[4] = ""

    cross.train(), concat.train()  # dropout on: the same draws must be made in the same order
    torch.manual_seed(3)
    ours = cross.embed_queries(queries, instructions)
    after_ours = torch.rand(4)
    torch.manual_seed(3)
    theirs = concat.embed_queries(queries, instructions)
    after_theirs = torch.rand(4)
    assert torch.equal(ours, theirs)
    assert torch.equal(after_ours, after_theirs)

    np.testing.assert_allclose(
        cross.encode_queries(queries, instructions), minilm.encode_queries(queries, instructions), atol=1e-6
    )
    passages = [p.passage for row in rows[:4] for p in row.pairs()]
    excluding = ["Documents about cooking are not relevant."] * len(queries)
    np.testing.assert_allclose(
        cross.score(queries, excluding, passages), minilm.score(queries, excluding, passages), atol=1e-5
    )


def test_training_changes_them(rows, tmp_path):
    config = TrainConfig(
        interaction="cross_attention", batch_size=2, max_steps=3, warmup_ratio=0.0, learning_rate=1e-4,
        query_max_length=48, passage_max_length=48, device="cpu", output=str(tmp_path / "model"),
    )  # fmt: skip
    trainer = Trainer(config, rows=rows[:6])
    path = trainer.train()
    trained = trainer.model
    assert abs(trained.interaction.gate_value()) > 1e-3
    queries, instructions = _pairs(rows[:3])
    ours = trained.encode_queries(queries, instructions)
    with torch.no_grad():
        trained.interaction.gate.zero_()  # the same trained backbone, read by concatenation alone
    assert np.abs(trained.encode_queries(queries, instructions) - ours).max() > 1e-4  # unit vectors

    saved = json.loads((path / "infembed.json").read_text())
    assert saved["cross_attention_base"] == "concat"
    loaded = InFEmbed.load(str(path), device="cpu")
    assert loaded.config.cross_attention_base == "concat"
    np.testing.assert_allclose(loaded.encode_queries(queries, instructions), ours, atol=1e-6)


def test_models_saved_before_the_setting_load_with_the_query_base(rows, minilm, tmp_path):
    path = tmp_path / "old"
    _fresh("cross_attention").save(path)
    config_file = path / "infembed.json"
    saved = json.loads(config_file.read_text())
    del saved["cross_attention_base"]  # the layout every cross-attention model had before issue #14
    config_file.write_text(json.dumps(saved))

    old = InFEmbed.load(str(path), device="cpu")
    assert old.config.cross_attention_base == "query" and old.interaction.base == "query"
    queries, instructions = _pairs(rows[:2])
    # its untrained block (gate 0) is the backbone's embedding of the query alone, as it always was
    np.testing.assert_allclose(
        old.encode_queries(queries, instructions), minilm.encode_queries(queries), atol=1e-5
    )

    (path / "interaction.safetensors").unlink()
    with pytest.raises(SettingsError, match="interaction.safetensors: missing"):
        InFEmbed.load(str(path), device="cpu")


def test_an_unknown_base_is_refused():
    with pytest.raises(SettingsError, match="cross_attention_base"):
        ModelConfig(interaction="cross_attention", cross_attention_base="passage")


def test_length_buckets_do_not_change_the_cross_attention_embeddings(rows):
    """The residual runs inside Encoder.embed's CPU length buckets: each bucket must take its own rows'
    instructions, so bucketed and unbucketed embeddings agree (an open gate makes the residual count)."""
    model = _fresh("cross_attention")
    model.eval()
    with torch.no_grad():
        model.interaction.gate.fill_(0.5)
    queries, instructions = _pairs(rows)
    queries, instructions = (queries * 3)[:40], (instructions * 3)[:40]
    assert len(queries) > 2 * model.encoder.cpu_bucket_size
    with torch.no_grad():
        bucketed = model._concat_cross_attention_embed(queries, instructions)
        model.encoder.cpu_bucket_size = None
        whole = model._concat_cross_attention_embed(queries, instructions)
    assert torch.allclose(bucketed, whole, atol=1e-5)
