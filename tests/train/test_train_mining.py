"""BM25-mined hard negatives (``mined_negatives``): per row, the passages of other rows that BM25 ranks highest
for its query and instruction join its batch as extra P-negatives.

Invariants: mining equals a brute-force BM25 ranking over the pool (own passages left out, order by score);
the batch keeps its anchors and positives and gains each mined passage once; the loss changes (they are
negatives); 0 is today's training exactly; the setting is checked, recorded and reloaded.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from dist_worker import make_config, make_trainer

from infembed.train.batching import iter_batches
from infembed.train.mining import mine_negatives, row_passages


def brute_force(rows, k):
    from infembed.search.bm25 import BM25

    pool = list(dict.fromkeys(t for row in rows for t in row_passages(row)))
    bm25 = BM25().index(pool)
    out = []
    for row in rows:
        scores = bm25.scores([f"{row.query_positive} {row.instruction_positive}"])[0]
        order = sorted(range(len(pool)), key=lambda j: (-scores[j], j))
        own = set(row_passages(row))
        out.append([pool[j] for j in order if scores[j] > 0 and pool[j] not in own][:k])
    return out, pool, bm25


def test_mined_negatives_are_the_best_bm25_matches_among_other_rows(rows):
    mined = mine_negatives(rows, 2)
    expected, pool, bm25 = brute_force(rows, 2)
    assert len(mined) == len(rows)
    assert (
        sum(len(m) == 2 for m in mined) > len(rows) // 2
    )  # a row whose words only its own passages hold gets fewer
    for row, got, want in zip(rows, mined, expected):
        assert len(got) == len(want)
        assert not set(got) & set(row_passages(row))
        scores = bm25.scores([f"{row.query_positive} {row.instruction_positive}"])[0]
        # same scores as the brute force (ties may come in another order)
        assert np.allclose(
            sorted(scores[[pool.index(t) for t in got]]), sorted(scores[[pool.index(t) for t in want]])
        )
    assert mine_negatives(rows, 0) == [[] for _ in rows]
    assert mine_negatives([], 3) == []


def test_a_batch_gains_each_mined_passage_once_after_its_own(rows):
    mined = mine_negatives(rows, 2)
    plain = next(iter_batches(rows, 3, seed=1))
    batch = next(iter_batches(rows, 3, seed=1, mined=mined))
    assert batch.n_anchors == plain.n_anchors and batch.queries == plain.queries
    assert batch.passages[: len(plain.passages)] == plain.passages
    extra = batch.passages[len(plain.passages) :]
    assert extra and len(set(extra)) == len(extra) and not set(extra) & set(plain.passages)
    local = {t for row in rows for t in row_passages(row) if t in plain.passages}
    assert local  # the batch's rows
    assert set(extra) <= {t for m in mined for t in m}


def test_mined_negatives_change_the_loss_and_zero_is_the_plain_training(rows):
    losses = {}
    for k in (0, 2):
        trainer = make_trainer(make_config(batch_size=3, mined_negatives=k), rows)
        batch = next(
            iter_batches(
                rows, 3, seed=trainer.config.seed, extra_instruction_negatives=1, mined=trainer.mined
            )
        )
        losses[k] = trainer.backward_step(batch)
    assert make_trainer(make_config(batch_size=3), rows).mined is None
    assert losses[2] > losses[0]  # more negatives in every anchor's softmax


def test_bad_setting_is_one_clear_line():
    from infembed.data.errors import SettingsError

    with pytest.raises(SettingsError, match="mined_negatives"):
        make_config(mined_negatives=-1)


@pytest.mark.slow
def test_a_model_trained_with_mined_negatives_records_it_and_loads(rows, tmp_path):
    from infembed.data.inf_ir import write_triplets
    from infembed.model.retriever import InFEmbed
    from infembed.train.trainer import train

    data = tmp_path / "rows.jsonl"
    write_triplets(data, rows[:6])
    out = train(
        make_config(
            data=[str(data)], output=str(tmp_path / "m"), batch_size=2, max_steps=2, mined_negatives=1
        )
    )
    assert json.loads((out / "train_config.json").read_text())["mined_negatives"] == 1
    assert InFEmbed.load(str(out)).encode_queries(["q"], ["i"]).shape[0] == 1
