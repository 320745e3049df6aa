"""Run a retriever on a benchmark: og run, changed run, p-MRR and TREC metrics, as a results dict.

The results schema (docs/architecture.md): ``{"benchmark", "model", "retriever", "template", "p-MRR", "score",
"main_score", "og": {...}, "changed": {...}, "per_query": {...}, "n_queries", "seconds"}``. Metric values are
fractions (mteb's scale); reports print them x100. ``score`` is the benchmark's headline metric of the og run
scored against the og qrels (mteb v1's FollowIR loader swapped the two qrels files; we do not).
"""

from __future__ import annotations

import heapq
import inspect
import math
import time
from typing import Any

from infembed.data.errors import SettingsError
from infembed.data.records import Benchmark
from infembed.evaluate.metrics import DEFAULT_K, p_mrr, remove_excluded, trec_scores
from infembed.evaluate.retrievers import Retriever


def _k_values(main_score: str, top_k: int) -> list[int]:
    ks = {k for k in DEFAULT_K if k <= max(top_k, 1)}
    try:
        ks.add(int(main_score.rsplit("_", 1)[1]))
    except (IndexError, ValueError):
        pass
    return sorted(ks)


def _exclusions_record(retriever: Retriever) -> dict[str, Any] | str:
    settings = getattr(retriever, "exclusions", None)
    if settings is None or not settings.enabled:
        return "off"
    record = settings.to_json()
    if retriever.exclusion_splitter is not None:
        record["splitter"] = getattr(retriever.exclusion_splitter, "name", "llm")
    return record


def _record_splits(result: dict[str, Any], benchmark: Benchmark, retriever: Retriever, qids: list[str]) -> None:
    """Per query, the keep/exclude split each instruction was scored with (only where something was excluded)."""
    settings = getattr(retriever, "exclusions", None)
    if settings is None or not settings.enabled:
        return
    from infembed.instructions import split_instruction

    splitter = retriever.exclusion_splitter or settings.splitter
    for q in qids:
        query = benchmark.queries[q]
        for field in ("og", "changed"):
            instruction = getattr(query, f"instruction_{field}", None)
            split = split_instruction(instruction, splitter) if instruction else None
            if split is not None and split.exclude:
                result["per_query"][q][f"split_{field}"] = split.to_json()


#: documents of each run kept per query in results.json, for the report's per-query explorer
TOP_SHOWN = 10


def _top(scores: dict[str, float], qrels: dict[str, int]) -> list[list]:
    """The run's first TOP_SHOWN documents as ``[doc id, judged relevance]`` (ties broken as :func:`rank_of`)."""
    best = heapq.nlargest(TOP_SHOWN, scores.items(), key=lambda item: (item[1], item[0]))
    return [[doc_id, qrels.get(doc_id, 0)] for doc_id, _ in best]


def _record_explorer(result: dict[str, Any], benchmark: Benchmark, run_og: dict, run_changed: dict | None) -> None:
    """Per query, what a reader needs to see what the instruction moved: the texts, each run's top 10 with
    judgments and a short title of every document shown (the changed documents' ranks are already there)."""
    for q, entry in result["per_query"].items():
        query = benchmark.queries[q]
        entry["text"] = query.text
        entry["instruction_og"] = query.instruction_og
        entry["instruction_changed"] = query.instruction_changed
        entry["top_og"] = _top(run_og.get(q, {}), benchmark.qrels_og.get(q, {}))
        shown = [d for d, _ in entry["top_og"]]
        if run_changed is not None and q in run_changed:
            entry["top_changed"] = _top(run_changed[q], (benchmark.qrels_changed or {}).get(q, {}))
            shown += [d for d, _ in entry["top_changed"]]
        shown += list(entry.get("changed_documents", {}))
        entry["titles"] = {d: _title(benchmark, d) for d in dict.fromkeys(shown) if d in benchmark.corpus}


def _title(benchmark: Benchmark, doc_id: str, length: int = 70) -> str:
    doc = benchmark.corpus[doc_id]
    text = " ".join((doc.title or doc.text).split())
    return text if len(text) <= length else text[: length - 1] + "…"


def evaluate(benchmark: Benchmark, retriever: Retriever, *, top_k: int = 1000, model_name: str | None = None) -> dict[str, Any]:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise SettingsError(f"top_k must be a whole number >= 1, got {top_k!r}")
    start = time.perf_counter()
    candidates = benchmark.top_ranked
    if candidates is not None:
        needed = sorted({d for ids in candidates.values() for d in ids if d in benchmark.corpus})
        if "doc_ids" in inspect.signature(retriever.index).parameters:
            retriever.index(benchmark.corpus, doc_ids=needed)  # dense: encode only the candidates
        else:
            retriever.index(benchmark.corpus)
    else:
        retriever.index(benchmark.corpus)
    qids = [q for q in benchmark.queries if q in benchmark.qrels_og]
    texts = [benchmark.queries[q].text for q in qids]
    run_og = retriever.retrieve(qids, texts, [benchmark.queries[q].instruction_og for q in qids], top_k=top_k, candidates=candidates)
    run_og = remove_excluded(run_og, benchmark.excluded)
    ks = _k_values(benchmark.main_score, top_k)
    og = trec_scores(benchmark.qrels_og, run_og, ks)
    result: dict[str, Any] = {
        "benchmark": benchmark.name,
        "model": model_name or retriever.name,
        "retriever": "bm25" if retriever.name == "bm25" else "dense",
        "template": retriever.template,
        "main_score": benchmark.main_score,
        "main_score_source": benchmark.main_score_source,
        "score": og.mean.get(benchmark.main_score, float("nan")),
        "p-MRR": None,
        "og": og.mean,
        "changed": None,
        "per_query": {q: {"og": og.per_query.get(q, {})} for q in qids},
        "n_queries": len(qids),
        "top_k": top_k,
        "reranking": candidates is not None,
        "exclusions": _exclusions_record(retriever),
    }
    run_changed = None
    if benchmark.has_changed:
        changed_qids = [q for q in qids if benchmark.queries[q].instruction_changed is not None]
        run_changed = retriever.retrieve(
            changed_qids, [benchmark.queries[q].text for q in changed_qids],
            [benchmark.queries[q].instruction_changed for q in changed_qids], top_k=top_k, candidates=candidates,
        )
        run_changed = remove_excluded(run_changed, benchmark.excluded)
        changed = trec_scores(benchmark.qrels_changed, run_changed, ks)
        pm = p_mrr(run_og, run_changed, benchmark.qrels_og, benchmark.qrels_changed, benchmark.changed_documents)
        result["p-MRR"] = None if math.isnan(pm.value) else pm.value
        result["changed"] = changed.mean
        for q in qids:
            entry = result["per_query"][q]
            entry["changed"] = changed.per_query.get(q, {})
            if q in pm.per_query:
                entry["p-MRR"] = pm.per_query[q]
                entry["changed_documents"] = pm.per_document[q]
    _record_splits(result, benchmark, retriever, qids)
    _record_explorer(result, benchmark, run_og, run_changed)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result
