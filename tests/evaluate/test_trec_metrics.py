"""MAP@k, nDCG@k, Recall@k (:func:`infembed.evaluate.metrics.trec_scores`) and BRIGHT's excluded ids.

Invariant: per query and averaged, ``trec_scores`` gives exactly what pytrec_eval gives on the same qrels and
run, which on tiny cases is the textbook value written out below (binary and graded relevance, score ties
broken by doc id descending as trec_eval does, relevant docs that were never retrieved), and its means equal
mteb's ``calculate_retrieval_scores`` (rounded by mteb to 5 decimals). :func:`remove_excluded` takes a
query's excluded ids out of the run before scoring, which changes nDCG exactly as if they were never
retrieved.
"""

from __future__ import annotations

import math
import random

import pytest
import pytrec_eval

from infembed.evaluate.metrics import remove_excluded, trec_scores

K = (1, 3, 5, 10, 100, 1000)


def log2(x: float) -> float:
    return math.log(x, 2)


# ------------------------------------------------------------------------------------ hand-computed cases


def test_binary_relevance_hand_computed():
    qrels = {"q": {"a": 1, "b": 1, "c": 0}}
    run = {"q": {"x": 3.0, "a": 2.0, "c": 1.0, "b": 0.5}}  # ranking x, a, c, b: relevant at ranks 2 and 4
    scores = trec_scores(qrels, run, K).per_query["q"]

    # AP = mean over the 2 relevant docs of precision at their rank; map_cut_k counts only ranks <= k but
    # still divides by all 2 relevant docs
    assert scores["map_at_1"] == 0.0
    assert scores["map_at_3"] == pytest.approx((1 / 2) / 2)
    assert scores["map_at_1000"] == pytest.approx((1 / 2 + 2 / 4) / 2)
    # nDCG@k: gain rel / log2(rank + 1), ideal order a, b
    idcg_2 = 1 + 1 / log2(3)
    assert scores["ndcg_at_1"] == 0.0
    assert scores["ndcg_at_3"] == pytest.approx((1 / log2(3)) / idcg_2)
    assert scores["ndcg_at_10"] == pytest.approx((1 / log2(3) + 1 / log2(5)) / idcg_2)
    # Recall@k: share of the relevant docs in the top k
    assert (scores["recall_at_1"], scores["recall_at_3"], scores["recall_at_5"]) == (0.0, 0.5, 1.0)
    assert scores["mrr_at_1"] == 0.0 and scores["mrr_at_3"] == 0.5


def test_graded_relevance_uses_linear_gain():
    qrels = {"q": {"a": 2, "b": 1}}
    run = {"q": {"b": 0.9, "a": 0.8}}
    scores = trec_scores(qrels, run, K).per_query["q"]
    # trec_eval's ndcg gain is the label itself (not 2^rel - 1): DCG = 1 + 2/log2(3), ideal = 2 + 1/log2(3)
    assert scores["ndcg_at_5"] == pytest.approx((1 + 2 / log2(3)) / (2 + 1 / log2(3)))
    assert scores["map_at_1000"] == pytest.approx(1.0)  # both relevant docs on top


def test_ties_are_broken_by_doc_id_descending():
    qrels = {"q": {"a": 1}}
    run = {"q": {"a": 1.0, "b": 1.0}}  # tied: "b" > "a", so "b" is ranked first
    scores = trec_scores(qrels, run, K).per_query["q"]
    assert scores["ndcg_at_1"] == 0.0
    assert scores["map_at_1000"] == pytest.approx(0.5)
    assert scores["ndcg_at_3"] == pytest.approx(1 / log2(3))
    assert scores["mrr_at_10"] == pytest.approx(0.5)


def test_unretrieved_relevant_docs_count_and_means_cover_scored_queries():
    qrels = {"q1": {"a": 1, "b": 1, "c": 1, "d": 1}, "q2": {"e": 1}, "q3": {"f": 1}}
    run = {"q1": {"a": 1.0}, "q2": {"x": 1.0, "e": 0.5}, "unjudged": {"a": 1.0}}
    result = trec_scores(qrels, run, K)
    assert result.per_query["q1"]["recall_at_1000"] == pytest.approx(1 / 4)
    assert result.per_query["q1"]["map_at_1000"] == pytest.approx(1 / 4)
    # as in mteb: averaged over the queries pytrec_eval scores (judged and in the run); q3 and "unjudged" not
    assert set(result.per_query) == {"q1", "q2"}
    assert result.mean["map_at_1000"] == pytest.approx((1 / 4 + 1 / 2) / 2)


# ------------------------------------------------------------------------------------ random runs


def _random_qrels_run(seed: int):
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(rng.randint(3, 40))]
    qrels, run = {}, {}
    for q in range(rng.randint(1, 8)):
        qid = f"q{q}"
        judged = rng.sample(pool, rng.randint(1, len(pool)))
        qrels[qid] = {d: rng.choice([0, 0, 1, 2]) for d in judged}
        qrels[qid][rng.choice(judged)] = rng.choice([1, 2])  # at least one relevant doc
        retrieved = rng.sample(pool, rng.randint(1, len(pool)))
        run[qid] = {d: rng.randint(0, 5) / 5 for d in retrieved}  # coarse scores: many ties
    return qrels, run


@pytest.mark.parametrize("seed", range(40))
def test_trec_scores_equal_pytrec_eval(seed):
    qrels, run = _random_qrels_run(seed)
    ks = (1, 5, 10, 20)
    ours = trec_scores(qrels, run, ks)
    measures = {"map_cut.1,5,10,20", "ndcg_cut.1,5,10,20", "recall.1,5,10,20"}
    raw = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    assert set(ours.per_query) == set(raw)
    for qid, values in raw.items():
        for k in ks:
            assert ours.per_query[qid][f"map_at_{k}"] == values[f"map_cut_{k}"]
            assert ours.per_query[qid][f"ndcg_at_{k}"] == values[f"ndcg_cut_{k}"]
            assert ours.per_query[qid][f"recall_at_{k}"] == values[f"recall_{k}"]


@pytest.mark.parametrize("seed", range(40))
def test_trec_scores_equal_mteb_calculate_retrieval_scores(seed):
    mteb_metrics = pytest.importorskip("mteb._evaluators.retrieval_metrics")
    qrels, run = _random_qrels_run(seed)
    ks = [1, 3, 5, 10, 20]
    ours = trec_scores(qrels, run, ks).mean
    reference = mteb_metrics.calculate_retrieval_scores(run, qrels, ks)
    for k in ks:
        # mteb rounds its means to 5 decimals
        assert ours[f"ndcg_at_{k}"] == pytest.approx(reference.ndcg[f"NDCG@{k}"], abs=5e-6)
        assert ours[f"map_at_{k}"] == pytest.approx(reference.map[f"MAP@{k}"], abs=5e-6)
        assert ours[f"recall_at_{k}"] == pytest.approx(reference.recall[f"Recall@{k}"], abs=5e-6)
        assert ours[f"precision_at_{k}"] == pytest.approx(reference.precision[f"P@{k}"], abs=5e-6)
        assert ours[f"mrr_at_{k}"] == pytest.approx(reference.mrr[f"MRR@{k}"], abs=1e-12)  # not rounded


# ------------------------------------------------------------------------------------ BRIGHT excluded ids


def test_remove_excluded_drops_ids_before_scoring():
    qrels = {"q": {"gold": 1}, "r": {"g2": 1}}
    run = {"q": {"excluded-1": 0.9, "gold": 0.8, "other": 0.7}, "r": {"x": 0.9, "g2": 0.8}}
    excluded = {"q": ["excluded-1", "not-retrieved"]}  # "r" has no excluded ids

    before = trec_scores(qrels, run, K).per_query
    assert before["q"]["ndcg_at_10"] == pytest.approx(1 / log2(3))  # gold at rank 2

    cleaned = remove_excluded(run, excluded)
    assert cleaned == {"q": {"gold": 0.8, "other": 0.7}, "r": {"x": 0.9, "g2": 0.8}}
    after = trec_scores(qrels, cleaned, K).per_query
    assert after["q"]["ndcg_at_10"] == 1.0  # gold now at rank 1
    assert after["q"]["ndcg_at_1"] == 1.0 and before["q"]["ndcg_at_1"] == 0.0
    assert after["r"] == before["r"]
    assert "excluded-1" in run["q"]  # the input run is not modified


def test_remove_excluded_without_exclusions_copies():
    run = {"q": {"a": 1.0}}
    for excluded in (None, {}):
        copy = remove_excluded(run, excluded)
        assert copy == run and copy["q"] is not run["q"]
