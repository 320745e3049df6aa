"""Run a retriever on a benchmark, or take runs made elsewhere: og run, changed run, p-MRR and TREC metrics,
as a results dict.

The results schema (docs/architecture.md): ``{"benchmark", "model", "retriever", "template", "p-MRR", "score",
"main_score", "og": {...}, "changed": {...}, "per_query": {...}, "n_queries", "seconds"}``. Metric values are
fractions (mteb's scale); reports print them x100. ``score`` is the benchmark's headline metric of the og run
scored against the og qrels (mteb v1's FollowIR loader swapped the two qrels files; we do not).

:func:`evaluate` runs a retriever; :func:`evaluate_runs` scores given runs (TREC files from another system).
Both go through one scoring function (:func:`_score`), so a run written by infembed and scored again gives
the same numbers. ``queries_left_out`` counts judged queries that were not scored (no candidates in
``top_ranked``, or missing from a given run); a warning says how many.
"""

from __future__ import annotations

import heapq
import inspect
import logging
import math
import time
from pathlib import Path
from typing import Any

from infembed.data.benchmarks.registry import VALID_METRICS
from infembed.data.errors import DataError, SettingsError
from infembed.data.records import Benchmark
from infembed.evaluate.metrics import DEFAULT_K, p_mrr, remove_excluded, trec_scores
from infembed.evaluate.retrievers import Retriever, Run

logger = logging.getLogger(__name__)


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


def _record_splits(
    result: dict[str, Any], benchmark: Benchmark, retriever: Retriever, qids: list[str]
) -> None:
    """Per query, the keep/exclude split each instruction was scored with (only where something was excluded,
    or an excluded aspect was dropped for holding no searchable word)."""
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
            if split is not None and (split.exclude or split.dropped):  # a dropped aspect is said too
                result["per_query"][q][f"split_{field}"] = split.to_json()


#: documents of each run kept per query in results.json, for the report's per-query explorer
TOP_SHOWN = 10


def _top(scores: dict[str, float], qrels: dict[str, int]) -> list[list]:
    """The run's first TOP_SHOWN documents as ``[doc id, judged relevance]`` (ties broken as :func:`rank_of`)."""
    best = heapq.nlargest(TOP_SHOWN, scores.items(), key=lambda item: (item[1], item[0]))
    return [[doc_id, qrels.get(doc_id, 0)] for doc_id, _ in best]


def _record_explorer(
    result: dict[str, Any], benchmark: Benchmark, run_og: dict, run_changed: dict | None
) -> None:
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


def evaluate(
    benchmark: Benchmark, retriever: Retriever, *, top_k: int = 1000, model_name: str | None = None
) -> dict[str, Any]:
    """Run ``retriever`` on ``benchmark`` (the og run, and the changed run when there are changed judgments) and
    score both: the results dict of the module docstring."""
    return evaluate_with_runs(benchmark, retriever, top_k=top_k, model_name=model_name)[0]


def evaluate_with_runs(
    benchmark: Benchmark, retriever: Retriever, *, top_k: int = 1000, model_name: str | None = None
) -> tuple[dict[str, Any], Run, Run | None]:
    """:func:`evaluate`, also returning the og and changed runs that were scored (to write as TREC runs)."""
    _check_top_k(top_k)
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
    qids, left_out = _queries_with_candidates(benchmark)
    texts = [benchmark.queries[q].text for q in qids]
    run_og = retriever.retrieve(
        qids, texts, [benchmark.queries[q].instruction_og for q in qids], top_k=top_k, candidates=candidates
    )
    run_changed = None
    if benchmark.has_changed:
        changed_qids = [q for q in qids if benchmark.queries[q].instruction_changed is not None]
        run_changed = retriever.retrieve(
            changed_qids,
            [benchmark.queries[q].text for q in changed_qids],
            [benchmark.queries[q].instruction_changed for q in changed_qids],
            top_k=top_k,
            candidates=candidates,
        )
    result, run_og, run_changed = _score(benchmark, run_og, run_changed, qids, top_k)
    result.update(
        model=model_name or retriever.name,
        retriever="bm25" if retriever.name == "bm25" else "dense",
        template=retriever.template,
        exclusions=_exclusions_record(retriever),
        queries_left_out=left_out,
    )
    _record_splits(result, benchmark, retriever, qids)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result, run_og, run_changed


def evaluate_runs(
    benchmark: Benchmark,
    run_og: Run,
    run_changed: Run | None = None,
    *,
    name: str,
    top_k: int = 1000,
    sources: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Score runs made elsewhere (e.g. TREC run files) exactly as :func:`evaluate` scores a retriever's runs:
    the same excluded ids removed, the same metrics and tie rule (score, then doc id, descending), the same
    results dict. Runs are scored as given (``top_k`` only chooses the cut-offs, as for a retriever's run).
    Judged queries missing from the og run are left out of every mean (as trec_eval and mteb do), with a
    warning that counts them."""
    _check_top_k(top_k)
    start = time.perf_counter()
    judged = [q for q in benchmark.queries if q in benchmark.qrels_og]
    qids = [q for q in judged if q in run_og]
    left_out = len(judged) - len(qids)
    if not qids:
        raise SettingsError(
            f"the og run ({name}) holds none of the {len(judged)} judged queries of {benchmark.name}"
        )
    if left_out:
        missing = [q for q in judged if q not in run_og]
        logger.warning(
            "%s: the og run holds %d of the %d judged queries (%s missing, e.g. %r); they are left out "
            "of every score",
            benchmark.name,
            len(qids),
            len(judged),
            left_out,
            missing[0],
        )
    if run_changed is not None and not benchmark.has_changed:
        raise SettingsError(
            f"{benchmark.name} has no changed judgments (qrels_changed.tsv) to score a changed run with"
        )
    run_og = {q: run_og[q] for q in qids}
    if run_changed is not None:
        run_changed = {q: docs for q, docs in run_changed.items() if q in benchmark.qrels_og}
        lacking = [
            q for q in qids if benchmark.queries[q].instruction_changed is not None and q not in run_changed
        ]
        if lacking:
            logger.warning(
                "%s: the changed run lacks %d of the %d queries the og run holds (e.g. %r); their p-MRR and "
                "changed metrics are left out",
                benchmark.name,
                len(lacking),
                len(qids),
                lacking[0],
            )
    result, _, _ = _score(benchmark, run_og, run_changed, qids, top_k)
    result.update(
        model=name, retriever="run file", template=None, exclusions="unknown", queries_left_out=left_out
    )
    if sources:
        result["runs"] = dict(sources)
    result["seconds"] = round(time.perf_counter() - start, 3)
    return result


def _check_top_k(top_k: Any) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise SettingsError(f"top_k must be a whole number >= 1, got {top_k!r}")


def _queries_with_candidates(benchmark: Benchmark) -> tuple[list[str], int]:
    """The judged queries to evaluate. When reranking, a judged query without candidates in ``top_ranked`` is
    left out, with a warning counting them: mteb does the same (a warning per query, then skips it), so the
    numbers are comparable; scoring such a query 0 would instead mix a file problem into every metric."""
    judged = [q for q in benchmark.queries if q in benchmark.qrels_og]
    candidates = benchmark.top_ranked
    if candidates is None:
        return judged, 0
    qids = [q for q in judged if candidates.get(q)]
    if not qids:
        raise DataError(
            f"none of the {len(judged)} judged queries has candidates",
            Path(benchmark.source) / "top_ranked.jsonl",
            field="query-id",
        )
    if len(qids) < len(judged):
        missing = [q for q in judged if not candidates.get(q)]
        logger.warning(
            "%s: top_ranked lists candidates for %d of the %d judged queries (%d without, e.g. %r); "
            "those are left out of every score, as mteb does",
            benchmark.name,
            len(qids),
            len(judged),
            len(missing),
            missing[0],
        )
    return qids, len(judged) - len(qids)


def _score(
    benchmark: Benchmark, run_og: Run, run_changed: Run | None, qids: list[str], top_k: int
) -> tuple[dict[str, Any], Run, Run | None]:
    """Everything computed from the runs: the one scoring path for retrievers and run files. Returns the results
    (without the run's identity: model, retriever, template, exclusions) and the runs as scored."""
    run_og = remove_excluded(run_og, benchmark.excluded)
    ks = _k_values(benchmark.main_score, top_k)
    og = trec_scores(benchmark.qrels_og, run_og, ks)
    if benchmark.main_score not in og.mean:  # a Benchmark built in code; files are checked when read
        raise SettingsError(
            f"{benchmark.name}: main score {benchmark.main_score!r} is not a metric infembed "
            f"computes; valid: {VALID_METRICS}"
        )
    result: dict[str, Any] = {
        "benchmark": benchmark.name,
        "model": None,
        "retriever": None,
        "template": None,
        "main_score": benchmark.main_score,
        "main_score_source": benchmark.main_score_source,
        "score": og.mean[benchmark.main_score],
        "p-MRR": None,
        "og": og.mean,
        "changed": None,
        "per_query": {q: {"og": og.per_query.get(q, {})} for q in qids},
        "n_queries": len(qids),
        "top_k": top_k,
        "reranking": benchmark.top_ranked is not None,
        "exclusions": "off",
    }
    if run_changed is not None:
        run_changed = remove_excluded(run_changed, benchmark.excluded)
        changed = trec_scores(benchmark.qrels_changed, run_changed, ks)
        pm = p_mrr(
            run_og, run_changed, benchmark.qrels_og, benchmark.qrels_changed, benchmark.changed_documents
        )
        result["p-MRR"] = None if math.isnan(pm.value) else pm.value
        result["changed"] = changed.mean
        for q in qids:
            entry = result["per_query"][q]
            entry["changed"] = changed.per_query.get(q, {})
            if q in pm.per_query:
                entry["p-MRR"] = pm.per_query[q]
                entry["changed_documents"] = pm.per_document[q]
    _record_explorer(result, benchmark, run_og, run_changed)
    return result, run_og, run_changed
