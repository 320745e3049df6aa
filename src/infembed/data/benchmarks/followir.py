"""FollowIR from the hub: converters from its tables (pure functions, tested on fixtures) and :func:`from_hub`.

  configs ``corpus`` {``_id``, ``title``, ``text``}, ``queries`` {``_id``, ``text``, ``instruction_og``,
  ``instruction_changed``, ``keywords``, ``short_query``}, ``qrels_og`` and ``qrels_changed`` (split ``test``)
  {``query-id``, ``corpus-id``, ``score`` (float64)}, ``top_ranked`` {``qid``, ``pid``}, one row per candidate.
  mteb 1.x filled its og qrels from ``qrels_changed`` and the reverse (its ``load`` maps each into the other's
  dict), so numbers published with it score the og run against the changed qrels. **We score og against og**;
  p-MRR is unaffected. The mteb 2.x copies (``layout="mteb"``: ``mteb/<Task>InstructionRetrieval`` now,
  ``jhu-clsp/<x>-instructions-mteb`` before; every repo name is also a benchmark name, see
  :data:`~infembed.data.benchmarks.registry.HUB_COPIES`) hold one query per instruction, ids ``<qid>-og`` / ``<qid>-changed``, in configs
  ``corpus``, ``queries`` {``_id``, ``text``}, ``instruction`` {``query-id``, ``instruction``}, ``default``
  (qrels, split ``test``), ``top_ranked`` {``query-id``, ``corpus-ids``} and ``qrel_diff`` {``query-id``,
  ``corpus-ids``}, the changed documents mteb 2 scores p-MRR with (kept as ``Benchmark.changed_documents``;
  the original layout has none, so p-MRR recomputes them from the qrels). Otherwise both layouts give the
  same ``Benchmark``. The headline metric is the FollowIR paper's; mteb's main score is p-MRR
  (``main_score_source`` says so).
  Some ``top_ranked`` candidates are not in the corpus (FollowIR issue #1); they are dropped, with a warning.
* **BRIGHT** (``xlangai/BRIGHT``; repo ``run.py``, mteb ``BrightRetrieval``): config ``documents`` (or
  ``long_documents``) {``id``, ``content``} and ``examples`` {``id``, ``query``, ``gold_ids``, ``gold_ids_long``,
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from infembed.data import hub
from infembed.data.benchmarks.registry import BenchmarkSpec
from infembed.data.errors import DataError
from infembed.data.formats import Qrels
from infembed.data.records import Benchmark, Document, InstructionQuery
from infembed.data.rows import (
    QUERY_ID,
    Rows,
    Table,
    as_rows,
    corpus_from_rows,
    field_of,
    judged_queries_only,
    qrels_from_rows,
    row_id,
    row_ids,
    row_text,
    top_ranked_from_rows,
)

logger = logging.getLogger(__name__)


def followir_from_rows(
    corpus: Table,
    queries: Table,
    qrels_og: Table,
    qrels_changed: Table,
    top_ranked: Table | None = None,
    *,
    name: str = "followir",
    main_score: str = "map_at_1000",
    source: str = "",
) -> Benchmark:
    """A FollowIR benchmark from the tables of ``jhu-clsp/<x>-instructions`` (schema in the module docstring).

    og qrels come from ``qrels_og`` and changed qrels from ``qrels_changed`` (not swapped, unlike mteb 1.x).
    As in mteb, queries without og judgments are dropped.
    """
    corpus_rows = as_rows(corpus, "corpus")
    query_rows = as_rows(queries, "queries")
    docs = corpus_from_rows(corpus_rows, ("_id", "id"), ("text",), ("title",))
    parsed: dict[str, InstructionQuery] = {}
    for line, row in query_rows:
        qid = row_id(row, ("_id", "id"), query_rows, line)
        if qid in parsed:
            raise DataError(
                f"duplicate query id {qid!r}", query_rows.source, line, field_of(row, ("_id", "id"))
            )
        parsed[qid] = InstructionQuery(
            text=row_text(row, ("text", "query"), query_rows, line, allow_empty=False),
            instruction_og=row_text(row, ("instruction_og",), query_rows, line, allow_empty=True),
            instruction_changed=row_text(row, ("instruction_changed",), query_rows, line, allow_empty=True),
        )
    og_rows = as_rows(qrels_og, "qrels_og")
    changed_rows = as_rows(qrels_changed, "qrels_changed")
    og = judged_queries_only(qrels_from_rows(og_rows), parsed, og_rows)
    changed = judged_queries_only(qrels_from_rows(changed_rows), parsed, changed_rows)
    kept = _with_og_judgments(parsed, og, og_rows.source)
    top = None
    if top_ranked is not None:
        table = as_rows(top_ranked, "top_ranked")
        top = top_ranked_from_rows(table, docs, kept)
        without = sorted(set(kept) - set(top))
        if without:
            logger.warning(
                "%s: %d queries have no candidates (e.g. %r)", table.source, len(without), without[0]
            )
    return _benchmark(name, docs, kept, og, changed, top, main_score, source)


def _with_og_judgments(
    parsed: dict[str, InstructionQuery], og: Mapping[str, Any], source: str
) -> dict[str, InstructionQuery]:
    """As in mteb, queries without og judgments are dropped; none left is an error."""
    kept = {qid: q for qid, q in parsed.items() if qid in og}
    if not kept:
        raise DataError("no query has og judgments", source, hint="check that query ids match queries")
    return kept


def _benchmark(
    name: str,
    corpus: dict[str, Document],
    queries: dict[str, InstructionQuery],
    og: Qrels,
    changed: Qrels,
    top: dict[str, list[str]] | None,
    main_score: str,
    source: str,
    changed_documents: dict[str, list[str]] | None = None,
) -> Benchmark:
    """Both layouts end here: the kept queries, og qrels, and the changed qrels of the kept queries only."""
    return Benchmark(
        name=name,
        corpus=corpus,
        queries=queries,
        qrels_og=og,
        qrels_changed={qid: docs for qid, docs in changed.items() if qid in queries},
        top_ranked=top,
        main_score=main_score,
        source=source,
        changed_documents=changed_documents,
    )


_OG, _CHANGED = "-og", "-changed"


def _split_followir_id(qid: str, table: Rows, line: int, key: str) -> tuple[str, str]:
    if qid.endswith(_OG):
        return qid[: -len(_OG)], "og"
    if qid.endswith(_CHANGED):
        return qid[: -len(_CHANGED)], "changed"
    raise DataError(f"query id {qid!r} ends in neither '-og' nor '-changed'", table.source, line, key)


def followir_from_mteb_rows(
    corpus: Table,
    queries: Table,
    qrels: Table,
    instructions: Table | None = None,
    top_ranked: Table | None = None,
    qrel_diff: Table | None = None,
    *,
    name: str = "followir",
    main_score: str = "map_at_1000",
    source: str = "",
) -> Benchmark:
    """A FollowIR benchmark from mteb 2.x's copies (``mteb/<Task>InstructionRetrieval``,
    ``jhu-clsp/<x>-instructions-mteb``), where each topic is two queries ``<qid>-og`` and ``<qid>-changed``.
    The instruction comes from the ``instruction`` table {query-id, instruction} or, where mteb merged it, from
    an ``instruction`` column of the queries. ``qrel_diff`` rows {query-id (without -og), corpus-ids} are the
    data set's own changed documents, which mteb 2 scores p-MRR with; they become
    ``Benchmark.changed_documents`` (without them p-MRR recomputes the changed documents from the qrels)."""
    docs = corpus_from_rows(as_rows(corpus, "corpus"), ("_id", "id"), ("text",), ("title",))
    instruction_rows = as_rows(instructions, "instruction")
    instruction_of: dict[str, str] = {}
    for line, row in instruction_rows:
        qid = row_id(row, QUERY_ID, instruction_rows, line)
        instruction_of[qid] = row_text(row, ("instruction",), instruction_rows, line, allow_empty=True)
    query_rows = as_rows(queries, "queries")
    texts: dict[str, dict[str, str]] = {}
    instr: dict[str, dict[str, str]] = {}
    for line, row in query_rows:
        key = field_of(row, ("_id", "id"))
        full = row_id(row, (key,), query_rows, line)
        base, side = _split_followir_id(full, query_rows, line, key)
        if side in texts.get(base, {}):
            raise DataError(f"duplicate query id {full!r}", query_rows.source, line, key)
        texts.setdefault(base, {})[side] = row_text(row, ("text",), query_rows, line, allow_empty=False)
        if "instruction" in row:
            instruction = row_text(row, ("instruction",), query_rows, line, allow_empty=True)
        elif full in instruction_of:
            instruction = instruction_of[full]
        else:
            raise DataError(
                f"no instruction for query {full!r} (neither an 'instruction' column nor a row in "
                f"{instruction_rows.source})",
                query_rows.source,
                line,
                "instruction",
            )
        instr.setdefault(base, {})[side] = instruction
    parsed: dict[str, InstructionQuery] = {}
    for base, sides in texts.items():
        if "og" not in sides:
            continue  # a changed query without its original cannot be scored
        parsed[base] = InstructionQuery(
            text=sides["og"],
            instruction_og=instr[base]["og"],
            instruction_changed=instr[base].get("changed"),
        )
    qrel_rows = as_rows(qrels, "qrels")
    for line, row in qrel_rows:  # first, every query id names its side (with the row, for the error)
        key = field_of(row, QUERY_ID)
        _split_followir_id(row_id(row, QUERY_ID, qrel_rows, line), qrel_rows, line, key)
    og: dict[str, dict[str, int]] = {}
    changed: dict[str, dict[str, int]] = {}
    for qid, judged in qrels_from_rows(qrel_rows).items():
        base, side = _split_followir_id(qid, qrel_rows, 0, "query-id")
        (og if side == "og" else changed)[base] = judged
    og = judged_queries_only(og, parsed, qrel_rows)
    kept = _with_og_judgments(parsed, og, qrel_rows.source)
    top = None
    if top_ranked is not None:
        table = as_rows(top_ranked, "top_ranked")
        # Both sides rerank the same BM25 candidates; read the og lists, then any side missing them.
        merged: dict[str, list[str]] = {}
        for qid, ids in top_ranked_from_rows(table, docs, _SuffixView(kept)).items():
            base, side = qid.rsplit("-", 1)
            if side == "og" or base not in merged:
                merged[base] = ids
        top = merged
    changed_documents = None if qrel_diff is None else _qrel_diff(as_rows(qrel_diff, "qrel_diff"), kept)
    return _benchmark(name, docs, kept, og, changed, top, main_score, source, changed_documents)


def _qrel_diff(table: Rows, queries: Mapping[str, Any]) -> dict[str, list[str]]:
    """FollowIR's ``qrel_diff`` rows {query-id, corpus-ids} as qid -> changed doc ids (queries not in the
    benchmark are ignored, with a warning; a benchmark query without a row has no changed document)."""
    changed: dict[str, list[str]] = {qid: [] for qid in queries}
    unknown: list[str] = []
    for line, row in table:
        qid = row_id(row, QUERY_ID, table, line)
        ids = row_ids(row, field_of(row, ("corpus-ids", "corpus_ids")), table, line, required=True)
        if qid not in queries:
            unknown.append(qid)
        else:
            changed[qid] = list(dict.fromkeys(changed[qid] + ids))
    if unknown:
        logger.warning(
            "%s: %d query ids are not benchmark queries (e.g. %r); ignored",
            table.source,
            len(unknown),
            unknown[0],
        )
    return changed


class _SuffixView(Mapping[str, Any]):
    """``<qid>-og`` / ``<qid>-changed`` membership over a dict keyed by ``<qid>`` (for mteb top_ranked rows)."""

    def __init__(self, queries: Mapping[str, Any]) -> None:
        self._queries = queries

    def __getitem__(self, key: str) -> Any:
        for suffix in (_OG, _CHANGED):
            if key.endswith(suffix) and key[: -len(suffix)] in self._queries:
                return self._queries[key[: -len(suffix)]]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        for qid in self._queries:
            yield qid + _OG
            yield qid + _CHANGED

    def __len__(self) -> int:
        return 2 * len(self._queries)


def from_hub(
    spec: BenchmarkSpec,
    layout: str,
    revision: str | None,
    cache_dir: str | None,
    copy: tuple[str, str | None] | None = None,
) -> Benchmark:
    """``copy`` (repo, revision) reads that hub repo (one of :data:`~infembed.data.benchmarks.registry.HUB_COPIES`) instead of the layout's
    default one."""
    if layout == "original":
        repo, rev = copy or (spec.repo, spec.revision)
    elif layout == "mteb" and spec.mteb_repo:
        repo, rev = copy or (spec.mteb_repo, spec.mteb_revision)
    else:
        raise DataError(f"unknown layout {layout!r}", spec.name, field="layout", hint="'original' or 'mteb'")
    rev = revision or rev

    def table(config: str, split: str | None = None) -> Rows:
        return hub.only_split(
            hub.fetch_hub_rows(repo, config, revision=rev, cache_dir=cache_dir), split, repo
        )

    def optional_table(config: str) -> Rows | None:
        try:
            return table(config)
        except DataError as error:
            logger.warning("%s: no %s table (%s)", repo, config, error)
            return None

    common = {
        "name": spec.name,
        "main_score": spec.main_score,
        "source": f"hf://datasets/{repo}@{rev or 'main'}",
    }
    if layout == "original":
        bench = followir_from_rows(
            table("corpus"),
            table("queries"),
            table("qrels_og", "test"),
            table("qrels_changed", "test"),
            table("top_ranked"),
            **common,
        )
    else:
        corpus, queries, qrels = table("corpus"), table("queries"), table("default", "test")
        qrel_diff = optional_table("qrel_diff")
        if qrel_diff is None:
            logger.warning("%s: p-MRR's changed documents are recomputed from the qrels instead", repo)
        bench = followir_from_mteb_rows(
            corpus,
            queries,
            qrels,
            optional_table("instruction"),  # some copies hold the instruction as a column of the queries
            table("top_ranked"),
            qrel_diff,
            **common,
        )
    bench.main_score_source = spec.main_score_source
    return bench
