"""Exclusion-aware training (``exclusion_training``): rows whose instruction excludes something are scored as
search scores them (docs/losses.md).

Invariants: a decomposed batch embeds each excluding row's query with what its instruction keeps and each
excluded aspect as a text of its own, with identity ids of the whole instructions; ``TrainingBatch.concat`` of
decomposed rank batches equals the decomposed concatenation (what the all-gather builds); gradient caching
gives the plain batch's loss and gradients; ``off`` is today's training exactly; a model trained this way
records the setting and loads. The two-process torchrun check is in test_train_distributed.py.
"""

from __future__ import annotations

import json

import pytest
import torch
from dist_worker import (
    assert_gradients_close,
    excluding_rows,
    gradients,
    make_config,
    make_trainer,
    rank_batch,
)

from infembed.instructions import split_instruction


@pytest.fixture(scope="module")
def excl_rows(rows):
    return excluding_rows(rows)


def test_a_decomposed_batch_embeds_what_is_kept_and_each_aspect(excl_rows):
    config = make_config(batch_size=2, exclusion_training="rules")
    batch = rank_batch(excl_rows, config, world_size=1, rank=0)
    split = batch.decomposed(lambda text: split_instruction(text, "rules"))
    texts, instructions = split.embedding_inputs()
    assert len(texts) == len(batch.queries) + len(split.aspects) > len(batch.queries)
    for row, instruction in enumerate(batch.instructions):
        parts = split_instruction(instruction, "rules")
        assert instructions[row] == (parts.keep if parts.exclude else instruction)
        assert [a for a, o in zip(split.aspects, split.aspect_owner) if o == row] == parts.exclude
    assert instructions[len(batch.queries) :] == [None] * len(split.aspects)
    assert texts[len(batch.queries) :] == split.aspects
    assert torch.equal(split.instruction_ids, batch.instruction_ids)  # identities of the whole instructions
    assert batch.embedding_inputs() == (batch.queries, batch.instructions)  # not decomposed: as before


def test_concat_of_decomposed_rank_batches_is_the_decomposed_concat(excl_rows):
    config = make_config(batch_size=3, exclusion_training="rules")
    ranks = [rank_batch(excl_rows[:5], config, world_size=2, rank=r) for r in (0, 1)]

    def split(b):
        return b.decomposed(lambda text: split_instruction(text, "rules"))

    joined = type(ranks[0]).concat([split(b) for b in ranks])
    expected = split(type(ranks[0]).concat(ranks))
    assert (
        joined.embedding_inputs()[1][: len(joined.queries)]
        == expected.embedding_inputs()[1][: len(expected.queries)]
    )
    pairs = sorted(zip(joined.aspect_owner, joined.aspects))
    assert pairs == sorted(zip(expected.aspect_owner, expected.aspects)) and pairs


@pytest.mark.parametrize("interaction", ["concat", "cross_attention"])
def test_grad_cache_equals_the_plain_batch(excl_rows, interaction):
    settings = dict(
        interaction=interaction,
        negatives="P,I,IQ",
        batch_size=2,
        exclusion_training="rules",
        exclusion_alpha=2.0,
    )
    results = []
    for chunk in (0, 4):
        trainer = make_trainer(make_config(grad_cache_chunk=chunk, **settings), excl_rows)
        batch = rank_batch(excl_rows, trainer.config, world_size=1, rank=0)
        results.append((trainer.backward_step(batch), gradients(trainer)))
    (plain_loss, plain), (cached_loss, cached) = results
    assert cached_loss == pytest.approx(plain_loss, rel=1e-5)
    assert sum(float(g.abs().sum()) for g in plain.values()) > 0
    assert_gradients_close(cached, plain)


def test_off_is_the_plain_training_and_the_setting_changes_the_loss(excl_rows):
    losses = {}
    for mode in ("off", "rules"):
        trainer = make_trainer(
            make_config(batch_size=2, exclusion_training=mode, exclusion_alpha=5.0), excl_rows
        )
        batch = rank_batch(excl_rows, trainer.config, world_size=1, rank=0)
        losses[mode] = trainer.backward_step(batch)
    plain = make_trainer(make_config(batch_size=2), excl_rows)
    assert losses["off"] == pytest.approx(
        plain.backward_step(rank_batch(excl_rows, plain.config, 1, 0)), rel=1e-6
    )
    assert abs(losses["rules"] - losses["off"]) > 1e-3


def test_bad_setting_is_one_clear_line():
    from infembed.data.errors import SettingsError

    with pytest.raises(SettingsError, match="exclusion_training must be one of off, rules, auto"):
        make_config(exclusion_training="llm")


@pytest.mark.slow
def test_a_model_trained_this_way_records_it_and_loads(excl_rows, tmp_path):
    from infembed.data.inf_ir import write_triplets
    from infembed.model.retriever import InFEmbed
    from infembed.train.trainer import train

    data = tmp_path / "rows.jsonl"
    write_triplets(data, excl_rows[:4])
    config = make_config(
        data=[str(data)], output=str(tmp_path / "model"), batch_size=2, max_steps=2, exclusion_training="auto"
    )
    out = train(config)
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["exclusion_training"] == "auto" and saved["exclusion_alpha"] == 1.0
    model = InFEmbed.load(str(out))
    assert model.encode_queries(["q"], ["Only x. Ignore anything about y."]).shape == (1, model.dim)
