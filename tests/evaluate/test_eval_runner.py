"""The evaluation runner (:func:`infembed.evaluate.runner.evaluate`) end to end.

Invariants:
* On the Cranfield dev benchmarks the runner reproduces the published reference numbers (data README):
  BM25 p-MRR +9.6 / og MAP@1000 47.8 (base) and -32.3 (excl); all-MiniLM-L6-v2 +5.7 / 40.9 and -20.8
  (x100, to one decimal), and mteb's ``evaluate_p_mrr_change`` gives the same numbers on the same runs.
  "Reproduces" is a tolerance, not ``round(...) ==``: the measured values sit about 0.01 point from a rounding
  boundary (40.862, 5.662), so a float change anywhere would flip the rounded digit. BM25 (no BLAS) must lie
  within the published rounding (0.05 point); the dense model gets 0.1 point, because its cosines depend on the
  CPU's kernels and thread count, and a near-tie that flips one changed document by one rank moves p-MRR by up
  to about 0.06 point on 40 queries.
* results.json holds the documented keys (docs/architecture.md) and is strict JSON.
* The dense retriever encodes the corpus once for the og and the changed run, and a second evaluation of the
  same model and corpus reads the embeddings from the disk cache (no corpus encoding at all).
* With ``top_ranked`` only each query's candidates are scored (and, for a dense model, only they are encoded).
* A benchmark's excluded ids (BRIGHT) are removed from both runs before any metric.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from tiny_benchmark import CORPUS, QRELS_CHANGED, QRELS_OG

from infembed.data.benchmarks import load_benchmark
from infembed.data.records import Document
from infembed.evaluate.metrics import p_mrr, remove_excluded, trec_scores
from infembed.evaluate.retrievers import BM25Retriever, DenseRetriever
from infembed.evaluate.runner import evaluate

RESULT_KEYS = {"benchmark", "model", "retriever", "template", "p-MRR", "score", "main_score", "og", "changed",
               "per_query", "n_queries", "seconds"}  # fmt: skip


def spy(monkeypatch: pytest.MonkeyPatch, obj, name: str) -> list[SimpleNamespace]:
    """Record every call of ``obj.name`` (arguments and return value); the real method still runs."""
    calls: list[SimpleNamespace] = []
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(SimpleNamespace(args=args, kwargs=kwargs, out=out))
        return out

    monkeypatch.setattr(obj, name, wrapper)
    return calls


def cranfield(data_dir: Path, variant: str):
    path = data_dir / variant
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    return load_benchmark(path)


def check_result_schema(result: dict, bench) -> None:
    assert RESULT_KEYS <= set(result)
    json.dumps(result, allow_nan=False)  # strict JSON: no NaN/inf anywhere
    assert result["benchmark"] == bench.name
    assert result["main_score"] == "map_at_1000"
    assert result["score"] == result["og"]["map_at_1000"]
    for name in ("map_at_1000", "ndcg_at_5", "ndcg_at_10", "recall_at_100"):
        assert 0.0 <= result["og"][name] <= 1.0 and 0.0 <= result["changed"][name] <= 1.0
    assert result["n_queries"] == len(bench.queries) == len(result["per_query"])
    for entry in result["per_query"].values():
        assert {"og", "changed"} <= set(entry)
    values = [entry["p-MRR"] for entry in result["per_query"].values() if "p-MRR" in entry]
    assert result["p-MRR"] == pytest.approx(sum(values) / len(values))


def check_against_mteb(result: dict, bench, run_og: dict, run_changed: dict) -> None:
    """mteb's FollowIR evaluator, given our two runs, reports our p-MRR and og/changed MAP@1000."""
    mteb_metrics = pytest.importorskip("mteb._evaluators.retrieval_metrics")
    qrels = {f"{q}-og": d for q, d in bench.qrels_og.items()}
    qrels |= {f"{q}-changed": d for q, d in bench.qrels_changed.items()}
    changed = {
        q: [d for d, r in docs.items() if r > 0 and bench.qrels_changed.get(q, {}).get(d, 0) <= 0]
        for q, docs in bench.qrels_og.items()
    }
    results = {f"{q}-og": d for q, d in run_og.items()} | {f"{q}-changed": d for q, d in run_changed.items()}
    reference = mteb_metrics.evaluate_p_mrr_change(qrels, results, changed, [1, 5, 10, 1000])
    assert result["p-MRR"] == pytest.approx(reference["p-MRR"], abs=1e-12)
    assert result["og"]["map_at_1000"] == pytest.approx(reference["og"]["map_at_1000"], abs=5e-6)
    assert result["changed"]["ndcg_at_5"] == pytest.approx(reference["changed"]["ndcg_at_5"], abs=5e-6)


# ------------------------------------------------------------------------------------ Cranfield dev benchmarks


@pytest.mark.parametrize(
    "variant, p_mrr_x100", [("followir-cranfield", 9.6), ("followir-cranfield-excl", -32.3)]
)
def test_bm25_on_cranfield_reproduces_the_reference(data_dir, monkeypatch, variant, p_mrr_x100):
    bench = cranfield(data_dir, variant)
    retriever = BM25Retriever()
    runs = spy(monkeypatch, retriever, "retrieve")
    result = evaluate(bench, retriever)

    assert 100 * result["p-MRR"] == pytest.approx(p_mrr_x100, abs=0.05)
    assert 100 * result["score"] == pytest.approx(47.8, abs=0.05)
    assert result["retriever"] == "bm25" and result["reranking"] is False
    assert result["template"] == "{query} {instruction}"
    check_result_schema(result, bench)
    assert len(runs) == 2  # og, changed
    check_against_mteb(result, bench, runs[0].out, runs[1].out)


@pytest.mark.slow
def test_minilm_on_cranfield_reproduces_the_reference(data_dir, minilm, monkeypatch):
    passages = spy(monkeypatch, minilm, "encode_passages")
    for variant, p_mrr_x100 in (("followir-cranfield", 5.7), ("followir-cranfield-excl", -20.8)):
        bench = cranfield(data_dir, variant)
        retriever = DenseRetriever(minilm, show_progress=False)
        runs = spy(monkeypatch, retriever, "retrieve")
        result = evaluate(bench, retriever)

        assert 100 * result["p-MRR"] == pytest.approx(p_mrr_x100, abs=0.1)  # see the module docstring
        assert 100 * result["score"] == pytest.approx(40.9, abs=0.1)
        assert result["retriever"] == "dense"
        check_result_schema(result, bench)
        check_against_mteb(result, bench, runs[0].out, runs[1].out)
    # both variants share the corpus: the first evaluation encodes it (once, for og and changed alike), the
    # second reads it from the disk cache (another test of this session may already have cached it)
    assert len(passages) <= 1


# ------------------------------------------------------------------------------------ dense: encode once, cache


def test_dense_encodes_corpus_once_and_reuses_the_disk_cache(minilm, make_benchmark, monkeypatch, tmp_path):
    corpus = dict(CORPUS, probe=("cache probe", f"a text no other test has: {tmp_path}"))
    bench = load_benchmark(make_benchmark(corpus=corpus))
    passages = spy(monkeypatch, minilm, "encode_passages")
    queries = spy(monkeypatch, minilm, "encode_queries")

    first = evaluate(bench, DenseRetriever(minilm, show_progress=False))
    assert len(passages) == 1 and len(passages[0].args[0]) == len(corpus)  # once for og and changed
    assert len(queries) == 2  # the og and the changed instructions
    cache = Path(os.environ["INFEMBED_CACHE_DIR"]) / "embeddings"
    assert list(cache.glob("*.npy"))

    second = evaluate(bench, DenseRetriever(minilm, show_progress=False))  # a fresh retriever, same model
    assert len(passages) == 1  # read from disk
    assert second["og"] == first["og"] and second["p-MRR"] == first["p-MRR"]

    DenseRetriever(minilm, cache=False, show_progress=False).index(bench.corpus)
    assert len(passages) == 2  # --no-cache encodes again

    edited = dict(bench.corpus)
    edited["d8"] = Document("Shock tubes", "An edited text is a different cache key.")
    DenseRetriever(minilm, show_progress=False).index(edited)
    assert len(passages) == 3


# ------------------------------------------------------------------------------------ reranking top_ranked

TOP_RANKED = {"q1": ["d2", "d5", "d6"], "q2": ["d3", "d4", "d7"]}  # q1 misses relevant d1
# (a candidate missing from the corpus is refused when the dir is read: tests/data/test_benchmark_checks.py)


@pytest.mark.parametrize("kind", ["bm25", "dense"])
def test_reranking_scores_only_the_candidates(kind, request, make_benchmark, monkeypatch):
    bench = load_benchmark(make_benchmark(top_ranked=TOP_RANKED))
    if kind == "bm25":
        retriever = BM25Retriever()
    else:
        minilm = request.getfixturevalue("minilm")
        retriever = DenseRetriever(minilm, cache=False, show_progress=False)
        passages = spy(monkeypatch, minilm, "encode_passages")
    runs = spy(monkeypatch, retriever, "retrieve")
    result = evaluate(bench, retriever)

    assert result["reranking"] is True
    assert len(runs) == 2
    for call in runs:
        assert {q: set(docs) for q, docs in call.out.items()} == {
            "q1": {"d2", "d5", "d6"},
            "q2": {"d3", "d4", "d7"},
        }
    assert result["per_query"]["q1"]["og"]["recall_at_1000"] == 0.5  # d1 was not a candidate
    assert result["per_query"]["q2"]["og"]["recall_at_1000"] == 1.0
    if kind == "dense":  # only the candidates are encoded, once
        assert len(passages) == 1
        encoded = sorted(passages[0].args[0])
        assert encoded == sorted(
            f"{CORPUS[d][0]} {CORPUS[d][1]}" for d in ("d2", "d3", "d4", "d5", "d6", "d7")
        )


# ------------------------------------------------------------------------------------ excluded ids (BRIGHT)


def test_excluded_ids_are_removed_before_scoring(make_benchmark, monkeypatch):
    # "d9" repeats q1's words (not relevant): BM25 ranks it first, but it is excluded for q1 (not for q2)
    corpus = dict(
        CORPUS,
        d9=(
            "Heat conduction in slabs, experimental and theoretical studies",
            "Heat conduction in slabs: a survey.",
        ),
    )
    excluded = {"q1": ["d9"]}
    plain = evaluate(load_benchmark(make_benchmark("plain", corpus=corpus)), BM25Retriever())
    retriever = BM25Retriever()
    runs = spy(monkeypatch, retriever, "retrieve")
    result = evaluate(load_benchmark(make_benchmark("excl", corpus=corpus, excluded=excluded)), retriever)

    run_og, run_changed = runs[0].out, runs[1].out
    assert max(run_og["q1"], key=run_og["q1"].get) == "d9"  # the retriever did rank it first
    assert plain["per_query"]["q1"]["og"]["ndcg_at_1"] == 0.0
    assert result["per_query"]["q1"]["og"]["ndcg_at_1"] == 1.0
    assert result["per_query"]["q2"] == plain["per_query"]["q2"]

    clean_og, clean_changed = remove_excluded(run_og, excluded), remove_excluded(run_changed, excluded)
    assert result["og"] == pytest.approx(trec_scores(QRELS_OG, clean_og, result_ks(result)).mean)
    assert result["changed"] == pytest.approx(
        trec_scores(QRELS_CHANGED, clean_changed, result_ks(result)).mean
    )
    expected = p_mrr(clean_og, clean_changed, QRELS_OG, QRELS_CHANGED).value
    assert not math.isnan(expected) and result["p-MRR"] == pytest.approx(expected)


def result_ks(result: dict) -> list[int]:
    return sorted({int(name.rsplit("_", 1)[1]) for name in result["og"]})
