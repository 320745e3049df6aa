"""Gradient caching (``grad_cache_chunk``) gives the same loss and parameter gradients as the plain batch.

Invariant: encoding the batch in chunks without a graph, taking the loss's gradient with respect to the cached
embeddings and pushing it back through a re-encoding of each chunk is the plain backward pass, reordered. In
eval mode (no dropout) that holds for any chunk size; in train mode the re-encoding replays each chunk's
dropout masks, so with a chunk larger than the batch (one chunk per side, the same random stream as the plain
forward) it holds with dropout on too. Checked for every parameter, for both interactions, with a learnable
temperature (its gradient comes from the loss on the cached embeddings). Likewise the CPU speed-up of encoding a
batch in length-sorted buckets gives the embeddings and gradients of the single padded batch.
"""

from __future__ import annotations

import pytest
import torch
from dist_worker import assert_gradients_close, gradients, make_config, make_trainer, rank_batch


def _loss_and_grads(config, rows, eval_mode):
    trainer = make_trainer(config, rows, eval_mode=eval_mode)
    batch = rank_batch(rows, config, world_size=1, rank=0)
    torch.manual_seed(123)  # the dropout stream of the forward passes
    loss = trainer.backward_step(batch)
    grads = gradients(trainer)
    grads["loss_fn.log_scale"] = trainer.loss_fn.log_scale.grad.detach().clone()
    return loss, grads, batch


@pytest.mark.parametrize(
    ("interaction", "chunk", "eval_mode"),
    [
        ("concat", 4, True),
        ("cross_attention", 4, True),
        ("concat", 1000, False),
        ("cross_attention", 1000, False),
    ],
    ids=["concat-chunk4-eval", "cross-chunk4-eval", "concat-one-chunk-dropout", "cross-one-chunk-dropout"],
)
def test_grad_cache_equals_plain_batch(rows, interaction, chunk, eval_mode):
    settings = dict(interaction=interaction, negatives="P,I,IQ", learn_temperature=True, batch_size=2)
    plain_loss, plain, batch = _loss_and_grads(make_config(grad_cache_chunk=0, **settings), rows, eval_mode)
    cached_loss, cached, _ = _loss_and_grads(make_config(grad_cache_chunk=chunk, **settings), rows, eval_mode)
    if chunk < len(batch.queries):
        assert len(batch.queries) > 2 * chunk and len(batch.passages) > chunk  # really several chunks

    assert cached_loss == pytest.approx(plain_loss, rel=1e-5)
    assert sum(float(g.abs().sum()) for g in plain.values()) > 0
    assert_gradients_close(cached, plain)


def test_grad_cache_with_dropout_differs_from_a_second_plain_draw(rows):
    """Guards the test above: with dropout on, two plain passes on different random streams disagree, so
    equality with one chunk per side really comes from replaying the dropout masks."""
    config = make_config(negatives="P", batch_size=2, extra_instruction_negatives=0)
    batch = rank_batch(rows, config, world_size=1, rank=0)
    losses = []
    for seed in (1, 2):
        trainer = make_trainer(config, rows, eval_mode=False)
        torch.manual_seed(seed)
        losses.append(trainer.backward_step(batch))
    assert losses[0] != pytest.approx(losses[1], rel=1e-6)


def test_length_buckets_equal_one_padded_batch(rows):
    """On CPU ``Encoder.embed`` runs a long list as length-sorted buckets (less padding); the embeddings and the
    parameter gradients must be those of the single padded batch."""
    config = make_config(passage_max_length=64)
    trainer = make_trainer(config, rows)
    encoder = trainer.model.encoder
    texts = [p.passage for row in rows[:8] for p in row.pairs()] + [row.query_positive for row in rows[:12]]
    assert len(texts) > 2 * encoder.cpu_bucket_size
    weights = torch.linspace(-1.0, 1.0, len(texts) * encoder.dim).view(len(texts), encoder.dim)
    results = []
    for bucket in (None, encoder.cpu_bucket_size):
        encoder.cpu_bucket_size = bucket
        trainer.model.zero_grad(set_to_none=True)
        embeddings = encoder.embed(texts, 64)
        (embeddings * weights).sum().backward()
        results.append((embeddings.detach(), gradients(trainer)))
    (whole, whole_grads), (bucketed, bucketed_grads) = results
    # embeddings are unit vectors: an absolute tolerance is scaled to the quantity as a whole
    torch.testing.assert_close(bucketed, whole, rtol=0, atol=1e-5)
    # the float32 summation order differs between the two: tolerance scaled to the whole model's gradient
    assert_gradients_close(bucketed_grads, whole_grads)
