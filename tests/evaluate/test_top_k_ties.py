"""Cutting a run to its top ``k`` (:func:`infembed.evaluate.retrievers.top_k_run`).

Invariant: the kept documents are the first ``k`` of the full ranking in the order every metric uses
(score descending, ties broken by doc id descending, as pytrec_eval and mteb do), so any metric at a cut-off
<= k is the same on the cut run as on the full run, and p-MRR ranks do not depend on which tied document
happened to survive the cut.
"""

from __future__ import annotations

import numpy as np

from infembed.evaluate.metrics import trec_scores
from infembed.evaluate.retrievers import top_k_run

DOC_IDS = [f"d{i}" for i in range(10)]


def test_top_k_without_ties_keeps_the_highest_scores():
    scores = np.array([[0.1, 0.9, 0.3, 0.8, 0.2, 0.0, 0.7, 0.4, 0.6, 0.5]])
    assert set(top_k_run(scores, ["q"], DOC_IDS, 3)["q"]) == {"d1", "d3", "d6"}
    assert top_k_run(scores, ["q"], DOC_IDS, 100)["q"] == dict(zip(DOC_IDS, scores[0].tolist()))


def test_top_k_cut_keeps_the_tie_order_of_the_metrics():
    scores = np.array([[0.5, 0.9, 0.5, 0.5, 0.1, 0.5, 0.5, 0.5, 0.5, 0.5]])  # eight docs tied at 0.5
    full = top_k_run(scores, ["q"], DOC_IDS, 10)
    cut = top_k_run(scores, ["q"], DOC_IDS, 3)
    assert set(cut["q"]) == {"d1", "d9", "d8"}  # d1, then the tied docs by id descending
    qrels = {"q": {"d9": 1}}
    assert trec_scores(qrels, cut, [3]).mean["ndcg_at_3"] == trec_scores(qrels, full, [3]).mean["ndcg_at_3"]
