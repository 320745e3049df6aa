"""Retrieval metrics as pure functions over plain dicts.

Conventions (the same as mteb and pytrec_eval): ``qrels[qid][doc_id] = relevance`` (int, > 0 means relevant),
``run[qid][doc_id] = score`` (higher is better). Scores are fractions (0..1); reports print them x100.

* :func:`p_mrr`: FollowIR's pairwise MRR change, reproducing mteb's ``calculate_pmrr`` exactly (rank ties
  broken by doc id descending, a doc missing from a run ranked ``len(run) + 1``, queries averaged after
  averaging each query's changed docs, queries with no changed doc or missing from a run left out).
* :func:`trec_scores`: MAP@k, nDCG@k, Recall@k, P@k and MRR@k per query and averaged, via pytrec_eval.
* :func:`remove_excluded`: BRIGHT's excluded ids taken out of a run before scoring.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]

DEFAULT_K = (1, 3, 5, 10, 20, 100, 1000)


def changed_documents(qrels_og: Qrels, qrels_changed: Qrels) -> dict[str, list[str]]:
    """The docs whose relevance changed: relevant under the original instruction, not under the changed one."""
    changed: dict[str, list[str]] = {}
    for qid, docs in qrels_og.items():
        now = qrels_changed.get(qid, {})
        lost = [did for did, rel in docs.items() if rel > 0 and now.get(did, 0) <= 0]
        changed[qid] = lost
    return changed


def rank_of(scores: Mapping[str, float], doc_id: str) -> int:
    """1-based rank of ``doc_id`` in a run sorted by (score, doc id) descending; ``len(scores) + 1`` if absent."""
    if doc_id not in scores:
        return len(scores) + 1
    target = (scores[doc_id], doc_id)
    # rank = 1 + number of entries that sort strictly before the target under (score, id) descending
    return 1 + sum(1 for did, score in scores.items() if (score, did) > target)


def rank_change_score(og_rank: int, new_rank: int) -> float:
    """FollowIR's per-document score: in [-1, 0] when the doc stayed or moved up (bad), in (0, 1) when it
    moved down (good)."""
    if og_rank >= new_rank:
        return new_rank / og_rank - 1.0
    return 1.0 - og_rank / new_rank


@dataclass
class PMRRResult:
    value: float
    per_query: dict[str, float] = field(default_factory=dict)
    per_document: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def p_mrr(
    run_og: Run,
    run_changed: Run,
    qrels_og: Qrels,
    qrels_changed: Qrels,
    changed: Mapping[str, Sequence[str]] | None = None,
) -> PMRRResult:
    """p-MRR of a pair of runs (og instruction, changed instruction) over the docs whose relevance changed.

    ``changed`` is the data set's own list of changed docs per query (FollowIR's ``qrel_diff``, which mteb 2
    reads); without it they are recomputed from the qrels by :func:`changed_documents`. The two can differ: a
    doc judged 2 under og and 1 under changed is still relevant, so the recomputation leaves it out."""
    if changed is None:
        changed = changed_documents(qrels_og, qrels_changed)
    return p_mrr_from_changed(run_og, run_changed, changed)


def p_mrr_from_changed(run_og: Run, run_changed: Run, changed: Mapping[str, Sequence[str]]) -> PMRRResult:
    per_query: dict[str, float] = {}
    per_document: dict[str, dict[str, dict[str, int]]] = {}
    for qid, docs in changed.items():
        if qid not in run_og or qid not in run_changed or not docs:
            continue
        og_scores, new_scores = run_og[qid], run_changed[qid]
        values = []
        details = {}
        for did in docs:
            og_rank, new_rank = rank_of(og_scores, did), rank_of(new_scores, did)
            values.append(rank_change_score(og_rank, new_rank))
            details[did] = {"og_rank": og_rank, "new_rank": new_rank}
        per_query[qid] = sum(values) / len(values)
        per_document[qid] = details
    value = sum(per_query.values()) / len(per_query) if per_query else float("nan")
    return PMRRResult(value=value, per_query=per_query, per_document=per_document)


def remove_excluded(run: Run, excluded: Mapping[str, Sequence[str]] | None) -> dict[str, dict[str, float]]:
    """A copy of ``run`` without each query's excluded doc ids (BRIGHT scores only after this)."""
    if not excluded:
        return {qid: dict(docs) for qid, docs in run.items()}
    out = {}
    for qid, docs in run.items():
        drop = set(excluded.get(qid, ()))
        out[qid] = {did: s for did, s in docs.items() if did not in drop}
    return out


@dataclass
class TrecScores:
    mean: dict[str, float]
    per_query: dict[str, dict[str, float]]


def trec_scores(qrels: Qrels, run: Run, k_values: Sequence[int] = DEFAULT_K) -> TrecScores:
    """MAP@k, nDCG@k, Recall@k, P@k (pytrec_eval) and MRR@k, named as in mteb (``map_at_1000``, ``ndcg_at_10``).

    As in mteb, means are over the queries that pytrec_eval scores (those in both qrels and run).
    """
    import pytrec_eval

    ks = sorted(set(int(k) for k in k_values))
    measures = {
        "map_cut." + ",".join(map(str, ks)),
        "ndcg_cut." + ",".join(map(str, ks)),
        "recall." + ",".join(map(str, ks)),
        "P." + ",".join(map(str, ks)),
    }
    qrels_clean = {q: {d: int(r) for d, r in docs.items()} for q, docs in qrels.items()}
    run_clean = {q: {d: float(s) for d, s in docs.items()} for q, docs in run.items() if q in qrels_clean}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels_clean, measures)
    raw = evaluator.evaluate(run_clean)
    per_query: dict[str, dict[str, float]] = {}
    for qid, values in raw.items():
        row = {}
        for k in ks:
            row[f"map_at_{k}"] = values[f"map_cut_{k}"]
            row[f"ndcg_at_{k}"] = values[f"ndcg_cut_{k}"]
            row[f"recall_at_{k}"] = values[f"recall_{k}"]
            row[f"precision_at_{k}"] = values[f"P_{k}"]
        ranked = sorted(run_clean[qid].items(), key=lambda item: (item[1], item[0]), reverse=True)
        relevant = {d for d, r in qrels_clean[qid].items() if r > 0}
        first = next((i for i, (d, _) in enumerate(ranked, start=1) if d in relevant), None)
        for k in ks:
            row[f"mrr_at_{k}"] = 1.0 / first if first is not None and first <= k else 0.0
        per_query[qid] = row
    mean: dict[str, float] = {}
    if per_query:
        for name in next(iter(per_query.values())):
            mean[name] = sum(row[name] for row in per_query.values()) / len(per_query)
    return TrecScores(mean=mean, per_query=per_query)
