"""MAIR: one split from its hub tables (:func:`mair_from_rows`), a named split (:func:`from_hub`) or every split
of a task (:func:`load_mair_task`).

query split ``queries`` pairs with doc split ``docs``, ``<x>_queries`` with ``<x>_docs`` (e.g.
``CQADupStack_Android_queries`` with ``CQADupStack_Android_docs``), each pair its own corpus. A task with several splits is named ``mair/<task>/<split>``, or read whole with :func:`load_mair_task`;
MAIR averages splits weighted by their query counts.
* **InF-IR** (``InF-IR/InF-IR``; the architecture doc, the reference code's data loaders): rows with the
fields of :data:`~infembed.data.records.TRIPLET_FIELDS`. ``document`` is an older name of
"""

from __future__ import annotations

from collections.abc import Mapping

from infembed.data import hub
from infembed.data.benchmarks.registry import MAIR_DOCS_REPO, BenchmarkSpec, get_spec
from infembed.data.errors import DataError
from infembed.data.formats import relevance
from infembed.data.jsonl import id_text
from infembed.data.records import Benchmark, InstructionQuery
from infembed.data.rows import Rows, Table, as_rows, corpus_from_rows, row_id, row_text


def mair_from_rows(
    queries: Table,
    docs: Table,
    *,
    name: str = "mair",
    source: str = "",
) -> Benchmark:
    """One MAIR split from its query rows {qid, instruction, query, labels: [{id, score}]} and doc rows
    {id, doc}. Each query keeps its own instruction (og); there is no changed one."""
    corpus = corpus_from_rows(as_rows(docs, "docs"), ("id", "_id"), ("doc", "text", "content"))
    table = as_rows(queries, "queries")
    parsed: dict[str, InstructionQuery] = {}
    qrels: dict[str, dict[str, int]] = {}
    for line, row in table:
        qid = row_id(row, ("qid", "id", "_id"), table, line)
        if qid in parsed:
            raise DataError(f"duplicate query id {qid!r}", table.source, line, "qid")
        parsed[qid] = InstructionQuery(
            text=row_text(row, ("query", "text"), table, line, allow_empty=False),
            instruction_og=row_text(row, ("instruction",), table, line, allow_empty=True),
        )
        labels = row.get("labels")
        if not isinstance(labels, (list, tuple)):
            what = (
                "missing"
                if labels is None
                else f"expected a list of {{id, score}}, got {type(labels).__name__}"
            )
            raise DataError(what, table.source, line, "labels")
        judged: dict[str, int] = {}
        for position, label in enumerate(labels):
            field = f"labels[{position}]"
            if not isinstance(label, Mapping):
                raise DataError(
                    f"expected {{id, score}}, got {type(label).__name__}", table.source, line, field
                )
            did = id_text(label.get("id"), table.source, line, f"{field}.id")
            judged[did] = relevance(label.get("score", 1), table.source, line, f"{field}.score")
        if judged:
            qrels[qid] = judged
    if not parsed:
        raise DataError("no queries", table.source)
    return Benchmark(
        name=name, corpus=corpus, queries=parsed, qrels_og=qrels, main_score="ndcg_at_10", source=source
    )


def _mair_docs_split(query_split: str) -> str:
    """The doc split of a query split, as MAIR's ``mair.py`` pairs them: ``queries`` -> ``docs``,
    ``CQADupStack_Android_queries`` -> ``CQADupStack_Android_docs``."""
    if query_split == "queries":
        return "docs"
    if query_split.endswith("_queries"):
        return query_split[: -len("_queries")] + "_docs"
    return query_split


def load_mair_task(
    task: str,
    *,
    revision: str | None = None,
    docs_revision: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Benchmark]:
    """Every split of a MAIR task, as ``{split: Benchmark}`` (MAIR averages them weighted by query count).
    ``revision`` pins ``MAIR-Queries`` and ``docs_revision`` ``MAIR-Docs`` (two repos, two histories)."""
    spec = get_spec(f"mair/{task}")
    query_tables = hub.fetch_hub_rows(spec.repo, spec.subset, revision=revision, cache_dir=cache_dir)
    return {
        split: _mair_split(spec, split, table, docs_revision, cache_dir)
        for split, table in query_tables.items()
    }


def _mair_split(
    spec: BenchmarkSpec, split: str, table: Rows, docs_revision: str | None, cache_dir: str | None
) -> Benchmark:
    doc_split = _mair_docs_split(split)
    tables = hub.fetch_hub_rows(
        MAIR_DOCS_REPO, spec.subset, doc_split, revision=docs_revision, cache_dir=cache_dir
    )
    name = spec.name if split == "queries" else f"{spec.name}/{split}"
    bench = mair_from_rows(
        table, tables[doc_split], name=name, source=f"hf://datasets/{spec.repo}/{spec.subset}/{split}"
    )
    bench.main_score_source = spec.main_score_source
    return bench


def from_hub(
    spec: BenchmarkSpec,
    split: str | None,
    revision: str | None,
    docs_revision: str | None,
    cache_dir: str | None,
) -> Benchmark:
    query_tables = hub.fetch_hub_rows(spec.repo, spec.subset, revision=revision, cache_dir=cache_dir)
    if split is None:
        if len(query_tables) != 1:
            choices = ", ".join(f"{spec.name}/{s}" for s in sorted(query_tables))
            raise DataError(
                f"MAIR task {spec.subset} has {len(query_tables)} splits, each with its own corpus",
                spec.name,
                hint=f"name one: {choices}; or load all with infembed.data.benchmarks.mair.load_mair_task",
            )
        split = next(iter(query_tables))
    if split not in query_tables:  # names are case-insensitive (cqadupstack_android_queries)
        split = {s.lower(): s for s in query_tables}.get(split.lower(), split)
    if split not in query_tables:
        raise DataError(f"no split {split!r}", spec.name, hint=f"splits: {', '.join(sorted(query_tables))}")
    bench = _mair_split(spec, split, query_tables[split], docs_revision, cache_dir)
    bench.source = f"hf://datasets/{spec.repo}@{revision or 'main'}/{spec.subset}/{split}"
    return bench
