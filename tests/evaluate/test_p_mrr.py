"""p-MRR (:func:`infembed.evaluate.metrics.p_mrr`).

Invariant: on any pair of runs, our p-MRR equals mteb's ``calculate_pmrr`` and the "p-MRR" of mteb's
``evaluate_p_mrr_change`` (the reference FollowIR implementation), including score ties (broken by doc id,
descending), changed docs missing from one run or from both (rank ``len(run) + 1``), queries with no changed
doc and queries missing from a run (left out of the mean). Each doc's og/new rank equals mteb's
``get_rank_from_dict``. On tiny hand-made cases: a changed doc that moves down scores > 0, one that moves up
scores < 0, one that stays scores 0.
"""

from __future__ import annotations

import math
import random

import pytest

from infembed.evaluate.metrics import (
    changed_documents,
    p_mrr,
    p_mrr_from_changed,
    rank_change_score,
    rank_of,
)

mteb_metrics = pytest.importorskip("mteb._evaluators.retrieval_metrics")

N_CASES = 250


def _random_run(rng: random.Random, pool: list[str]) -> dict[str, float]:
    docs = rng.sample(pool, rng.randint(0, len(pool)))
    # few distinct score values, so ties are common; sometimes ints, as some retrievers give
    values = (
        [rng.choice([0, 1, 2, 3]) for _ in docs]
        if rng.random() < 0.3
        else [rng.randint(0, 4) / 4 for _ in docs]
    )
    return dict(zip(docs, values))


def _random_case(seed: int):
    """Runs and qrels with ties, missing docs, empty changed lists, queries missing from a run, and changed
    docs that neither run retrieved. At least one query has a changed doc in both runs' query sets, since mteb
    cannot average an empty table."""
    rng = random.Random(seed)
    while True:
        # doc ids that sort differently as strings and as numbers ("10" < "9"), to catch numeric tie-breaks
        pool = [str(i) for i in rng.sample(range(1, 30), rng.randint(1, 12))]
        extra = [f"unretrieved-{i}" for i in range(3)]  # judged, never retrieved by either run
        qids = [f"q{i}" for i in range(rng.randint(1, 6))]
        run_og, run_changed, qrels_og, qrels_changed = {}, {}, {}, {}
        for qid in qids:
            if rng.random() > 0.1:
                run_og[qid] = _random_run(rng, pool)
            if rng.random() > 0.1:
                run_changed[qid] = _random_run(rng, pool)
            judged = rng.sample(pool + extra, rng.randint(0, min(6, len(pool) + len(extra))))
            qrels_og[qid] = {d: rng.choice([0, 1, 1, 2]) for d in judged}
            # the changed instruction is narrower: each relevant doc stays relevant or drops to 0
            qrels_changed[qid] = {d: (r if rng.random() < 0.5 else 0) for d, r in qrels_og[qid].items()}
        changed = {
            q: [d for d, r in qrels_og[q].items() if r > 0 and qrels_changed[q].get(d, 0) <= 0] for q in qids
        }
        if any(changed[q] and q in run_og and q in run_changed for q in qids):
            return run_og, run_changed, qrels_og, qrels_changed, changed


def _mteb_runs(run_og, run_changed):
    return {f"{q}-og": d for q, d in run_og.items()}, {f"{q}-changed": d for q, d in run_changed.items()}


@pytest.mark.parametrize("seed", range(N_CASES))
def test_p_mrr_equals_mteb_calculate_pmrr(seed):
    run_og, run_changed, qrels_og, qrels_changed, changed = _random_case(seed)
    original, new = _mteb_runs(run_og, run_changed)
    expected = mteb_metrics.calculate_pmrr(original, new, changed)

    ours = p_mrr(run_og, run_changed, qrels_og, qrels_changed)
    assert ours.value == pytest.approx(expected, abs=1e-12)
    assert p_mrr_from_changed(run_og, run_changed, changed).value == pytest.approx(expected, abs=1e-12)
    assert changed_documents(qrels_og, qrels_changed) == changed

    for qid, docs in ours.per_document.items():
        for did, ranks in docs.items():
            assert ranks["og_rank"] == mteb_metrics.get_rank_from_dict(run_og[qid], did)[0]
            assert ranks["new_rank"] == mteb_metrics.get_rank_from_dict(run_changed[qid], did)[0]
            expected_doc = mteb_metrics.rank_score(
                {"og_rank": ranks["og_rank"], "new_rank": ranks["new_rank"]}
            )
            assert rank_change_score(ranks["og_rank"], ranks["new_rank"]) == pytest.approx(
                expected_doc, abs=1e-12
            )
    # per-query values are kept for exactly the queries mteb averages over
    assert set(ours.per_query) == {
        q for q, docs in changed.items() if docs and q in run_og and q in run_changed
    }


@pytest.mark.parametrize("seed", range(0, N_CASES, 5))
def test_p_mrr_equals_mteb_evaluate_p_mrr_change(seed):
    run_og, run_changed, qrels_og, qrels_changed, changed = _random_case(seed)
    original, new = _mteb_runs(run_og, run_changed)
    # mteb's FollowIR evaluator takes one results dict and one qrels dict keyed "<qid>-og" / "<qid>-changed";
    # its retrieval metrics need every run non-empty and every run query judged at least once (an unjudged
    # filler doc, relevance 0, changes no p-MRR)
    original = {q: d or {"filler": 0.0} for q, d in original.items()}
    new = {q: d or {"filler": 0.0} for q, d in new.items()}
    qrels = {f"{q}-og": {"filler": 0, **d} for q, d in qrels_og.items()}
    qrels |= {f"{q}-changed": {"filler": 0, **d} for q, d in qrels_changed.items()}
    scores = mteb_metrics.evaluate_p_mrr_change(qrels, {**original, **new}, changed, [1])

    run_og = {q: d or {"filler": 0.0} for q, d in run_og.items()}
    run_changed = {q: d or {"filler": 0.0} for q, d in run_changed.items()}
    assert p_mrr(run_og, run_changed, qrels_og, qrels_changed).value == pytest.approx(
        scores["p-MRR"], abs=1e-12
    )


def test_ties_are_broken_by_doc_id_descending_as_strings():
    run = {"9": 1.0, "10": 1.0, "a": 1.0, "b": 0.5}
    # (score, id) descending: "a" > "9" > "10" as strings
    assert [rank_of(run, d) for d in ("a", "9", "10", "b")] == [1, 2, 3, 4]
    assert rank_of(run, "missing") == len(run) + 1
    for did in run:
        assert rank_of(run, did) == mteb_metrics.get_rank_from_dict(run, did)[0]


# ------------------------------------------------------------------------------------ hand-computed cases

QRELS_OG = {"q": {"d1": 1, "d2": 1}}
QRELS_CHANGED = {"q": {"d1": 1, "d2": 0}}  # d2 loses relevance under the changed instruction


def test_changed_doc_moved_down_is_positive():
    run_og = {"q": {"d2": 0.9, "d1": 0.8, "d3": 0.7, "d4": 0.6}}  # d2 at rank 1
    run_changed = {"q": {"d1": 0.9, "d3": 0.8, "d4": 0.7, "d2": 0.6}}  # d2 at rank 4
    result = p_mrr(run_og, run_changed, QRELS_OG, QRELS_CHANGED)
    assert result.value == pytest.approx(1 - 1 / 4)  # 1 - R_og / R_new
    assert result.per_document == {"q": {"d2": {"og_rank": 1, "new_rank": 4}}}


def test_changed_doc_moved_up_is_negative():
    run_og = {"q": {"d1": 0.9, "d3": 0.8, "d2": 0.7}}  # d2 at rank 3
    run_changed = {"q": {"d2": 0.9, "d1": 0.8, "d3": 0.7}}  # d2 at rank 1
    assert p_mrr(run_og, run_changed, QRELS_OG, QRELS_CHANGED).value == pytest.approx(
        1 / 3 - 1
    )  # R_new/R_og - 1


def test_changed_doc_unchanged_is_zero():
    run = {"q": {"d1": 0.9, "d2": 0.8, "d3": 0.7}}
    assert p_mrr(run, run, QRELS_OG, QRELS_CHANGED).value == 0.0


def test_missing_doc_gets_rank_len_plus_one_and_queries_average_their_docs():
    run_og = {"q": {"d2": 0.9, "d1": 0.8}, "r": {"e1": 0.5, "e2": 0.4}}  # d2 rank 1; e1 rank 1, e2 rank 2
    run_changed = {"q": {"d1": 0.9, "d3": 0.8}, "r": {"e2": 0.9, "e1": 0.4}}  # d2 missing: rank 3; e1 2, e2 1
    changed = {"q": ["d2"], "r": ["e1", "e2"], "s": []}  # "s" has no changed doc: left out
    result = p_mrr_from_changed(run_og, run_changed, changed)
    q_value = 1 - 1 / 3
    r_value = ((1 - 1 / 2) + (1 / 2 - 1)) / 2  # e1 moved down, e2 moved up by the same ratio: 0
    assert result.per_query == pytest.approx({"q": q_value, "r": r_value})
    assert result.value == pytest.approx((q_value + r_value) / 2)


def test_no_changed_document_anywhere_is_nan():
    assert math.isnan(p_mrr_from_changed({"q": {"a": 1.0}}, {"q": {"a": 1.0}}, {"q": []}).value)
