"""The exclusion-aware score inside :class:`~infembed.losses.InFEmbedLoss` (``docs/losses.md``).

Invariant: with excluded aspects in the batch, every setting (uni/multi x P/I/IQ subsets) gives the same loss
and the same gradients w.r.t. the query, passage *and aspect* embeddings as a brute force that scores one
(query row, passage) pair at a time with the equation of docs/losses.md, float64:

    s(r, p) = cos(q_r, p) - alpha * max_j t * log(1 + exp((cos(a_rj, p) - cos(q_r, p) - margin) / t))

Rows without aspects keep the cosine, so a batch without aspects (or alpha = 0) is today's loss exactly; a
passage that matches an excluded aspect better than the kept part loses score (the positive of a row that
excludes what a negative passage is about gains against it).
"""

from __future__ import annotations

import math

import pytest
import torch
from test_losses import SUBSETS, inf_ir_batch

from infembed.losses import EXCLUSION_SHARPNESS, EmbeddedBatch, InFEmbedLoss

# aspects of anchors 1 and 4 (two for anchor 1), of the extra query row 11 and of anchor 9
OWNERS = [1, 1, 4, 11, 9]


def with_aspects(batch: EmbeddedBatch, seed: int = 1) -> EmbeddedBatch:
    generator = torch.Generator().manual_seed(seed)
    dim = batch.queries.shape[1]
    aspects = (torch.randn(len(OWNERS), dim, generator=generator, dtype=torch.float64) * 2).requires_grad_(
        True
    )
    # make one aspect match a passage closely, so the hinge is well inside its linear part somewhere
    with torch.no_grad():
        aspects[0] = batch.passages[2].detach() + 0.1 * aspects[0]
    return EmbeddedBatch(
        queries=batch.queries,
        passages=batch.passages,
        instruction_ids=batch.instruction_ids,
        query_ids=batch.query_ids,
        passage_ids=batch.passage_ids,
        num_anchors=batch.num_anchors,
        aspects=aspects,
        aspect_owner=torch.tensor(OWNERS),
    )


def brute_force(batch: EmbeddedBatch, *, objective, negatives, alpha, margin, scale=20.0):
    """The definitions, one (row, passage) pair at a time, masking duplicates as the loss does by default."""
    q, p, a, n = batch.queries, batch.passages, batch.aspects, batch.anchors
    inst, qid, pid = (t.tolist() for t in (batch.instruction_ids, batch.query_ids, batch.passage_ids))
    owners = batch.aspect_owner.tolist()

    def cos(x, y):
        return torch.dot(x, y) / (x.norm() * y.norm())

    def score(r, m):
        keep = cos(q[r], p[m])
        hinges = [
            EXCLUSION_SHARPNESS
            * torch.log1p(torch.exp((cos(a[j], p[m]) - keep - margin) / EXCLUSION_SHARPNESS))
            for j in range(len(owners))
            if owners[j] == r
        ]
        return scale * (keep - alpha * max(hinges) if hinges else keep)

    total = torch.zeros((), dtype=q.dtype)
    for i in range(n):
        positive = score(i, i)
        sets = []
        if "P" in negatives:
            sets.append([score(i, m) for m in range(len(p)) if m != i and pid[m] != pid[i]])
        if "I" in negatives:
            sets.append(
                [score(r, i) for r in range(len(q)) if r != i and qid[r] == qid[i] and inst[r] != inst[i]]
            )
        if "IQ" in negatives:
            members = [k for k in range(n) if k != i and (inst[k], qid[k]) != (inst[i], qid[i])]
            sets.append([score(r, i) for r in members])
        if objective == "uni":
            for negative_set in sets:
                total = total - positive + torch.logsumexp(torch.stack([positive, *negative_set]), 0)
        else:
            total = (
                total - positive + torch.logsumexp(torch.stack([positive, *[x for s in sets for x in s]]), 0)
            )
    return total / n


@pytest.mark.parametrize("objective", ["uni", "multi"])
@pytest.mark.parametrize("negatives", SUBSETS, ids=lambda s: "+".join(s))
def test_loss_and_gradients_match_the_brute_force(objective, negatives):
    batch = with_aspects(inf_ir_batch())
    settings = dict(objective=objective, negatives=negatives, exclusion_alpha=1.5, exclusion_margin=0.1)
    inputs = [batch.queries, batch.passages, batch.aspects]
    loss = InFEmbedLoss(**settings)(batch)
    grads = torch.autograd.grad(loss, inputs)
    expected = brute_force(batch, objective=objective, negatives=negatives, alpha=1.5, margin=0.1)
    expected_grads = torch.autograd.grad(expected, inputs)
    torch.testing.assert_close(loss, expected)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)
    assert grads[2].abs().sum() > 0  # the aspects are trained too


def test_without_aspects_or_alpha_zero_it_is_the_plain_loss():
    plain = inf_ir_batch()
    loss = float(InFEmbedLoss()(plain))
    assert float(InFEmbedLoss(exclusion_alpha=0.0)(with_aspects(plain))) == pytest.approx(loss, abs=1e-12)
    empty = with_aspects(plain)
    empty.aspects, empty.aspect_owner = empty.aspects[:0], empty.aspect_owner[:0]
    assert float(InFEmbedLoss()(empty)) == pytest.approx(loss, abs=1e-12)


def test_an_excluded_aspect_pushes_its_passage_down():
    """Anchor 0's query (e1 + e2) matches its positive (e1) and passage 1 (e2) equally; its instruction excludes
    e2, so passage 1 loses score, the positive keeps it, and anchor 0's term falls from log 2 to ~0 (anchor 1,
    without aspects, stays at log 2)."""
    e = torch.eye(3, dtype=torch.float64)
    batch = EmbeddedBatch(
        queries=torch.stack([e[0] + e[1], e[2]]),
        passages=torch.stack([e[0], e[1]]),
        instruction_ids=torch.tensor([1, 2]),
        query_ids=torch.tensor([1, 2]),
        passage_ids=torch.tensor([1, 2]),
    )
    plain = float(InFEmbedLoss(negatives="P")(batch))
    assert plain == pytest.approx(math.log(2), abs=1e-9)
    batch.aspects, batch.aspect_owner = e[1:2].clone(), torch.tensor([0])
    assert float(InFEmbedLoss(negatives="P")(batch)) == pytest.approx(math.log(2) / 2, abs=0.01)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"exclusion_alpha": -1.0}, "exclusion_alpha must be >= 0"),
        ({"exclusion_alpha": math.inf}, "exclusion_alpha must be a finite number"),
        ({"exclusion_margin": "0.1"}, "exclusion_margin must be a finite number"),
    ],
)
def test_bad_settings_name_the_setting(kwargs, message):
    from infembed.data.errors import SettingsError

    with pytest.raises(SettingsError, match=message):
        InFEmbedLoss(**kwargs)


def test_a_bad_owner_is_one_clear_error():
    from infembed.data.errors import SettingsError

    batch = with_aspects(inf_ir_batch())
    batch.aspect_owner = torch.tensor([0, 1, 2, 3, 99])
    with pytest.raises(SettingsError, match="aspect_owner must index query rows"):
        InFEmbedLoss()(batch)
    batch.aspect_owner = None
    with pytest.raises(SettingsError, match="come together"):
        InFEmbedLoss()(batch)
