"""BRIGHT: converters from its hub tables, :func:`from_hub`, and :func:`load_bright_topics` for BRIGHT examples
as local JSONL (anserini's ``topics.bright-<domain>-original.jsonl.gz``), with or without TREC qrels and documents.

``excluded_ids``, ``reasoning``, ``gold_answer``}, one split per domain. qrels = ``gold_ids`` at label 1;
``excluded_ids`` (``["N/A"]`` means none) become ``Benchmark.excluded``, removed from runs before scoring.
BRIGHT queries carry no instruction of their own; each query gets its domain's task instruction, the wording
of BRIGHT's own configs for instruction-tuned embedders, word for word ("Given a biology post, retrieve
relevant passages that help answer the post"), so that instruction-aware models see what they were evaluated
with there.
Pass ``instruction=""`` for none, or any string to replace it. There is no changed instruction (no p-MRR).
* **MAIR** (``MAIR-Bench/MAIR-Queries`` and ``MAIR-Docs``; the MAIR README and ``mair.py``): one config per
task; queries {``qid``, ``instruction``, ``query``, ``labels``: [{``id``, ``score``}]}, docs {``id``, ``doc``};
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from infembed.data import hub
from infembed.data.benchmarks.registry import BRIGHT_DOMAINS, BRIGHT_LONG_DOMAINS, BenchmarkSpec
from infembed.data.errors import DataError
from infembed.data.formats import read_trec_qrels
from infembed.data.records import Benchmark, Document, InstructionQuery
from infembed.data.rows import Rows, Table, as_rows, corpus_from_rows, row_id, row_ids, row_text


def bright_instruction(domain: str, long_context: bool = False) -> str:
    """The default instruction of a BRIGHT domain: BRIGHT's own task instruction for instruction-tuned
    embedders (its e5-mistral, SFR, Qwen and GritLM configs) without the model-specific frame
    (``Instruct: ...\\nQuery:``), word for word, the domain spelled as BRIGHT spells it (``earth_science``)."""
    unit = "documents" if long_context else "passages"
    if domain == "pony":
        return f"Given a pony question, retrieve relevant {unit} that help answer the question"
    if domain == "leetcode":
        return "Given a coding problem, retrieve relevant examples that help answer the problem"
    if domain == "theoremqa_theorems":
        return "Given a Math problem, retrieve relevant theorems that help answer the problem"
    # aops: its config is not among those we could read; it is the same task as theoremqa_questions
    # (mteb gives both the same prompt), so it gets the same words.
    if domain in ("aops", "theoremqa_questions"):
        return "Given a Math problem, retrieve relevant examples that help answer the problem"
    return f"Given a {domain} post, retrieve relevant {unit} that help answer the post"


def _bright_queries(
    table: Rows,
    *,
    domain: str,
    long_context: bool,
    instruction: str | None,
) -> tuple[dict[str, InstructionQuery], dict[str, dict[str, int]], dict[str, list[str]]]:
    text_instruction = bright_instruction(domain, long_context) if instruction is None else instruction
    gold_key = "gold_ids_long" if long_context else "gold_ids"
    queries: dict[str, InstructionQuery] = {}
    qrels: dict[str, dict[str, int]] = {}
    excluded: dict[str, list[str]] = {}
    for line, row in table:
        qid = row_id(row, ("id", "_id", "qid"), table, line)
        if qid in queries:
            raise DataError(f"duplicate query id {qid!r}", table.source, line, "id")
        queries[qid] = InstructionQuery(
            text=row_text(row, ("query",), table, line, allow_empty=False), instruction_og=text_instruction
        )
        gold = row_ids(row, gold_key, table, line, required=True)
        drop = [d for d in row_ids(row, "excluded_ids", table, line, required=False) if d != "N/A"]
        overlap = sorted(set(gold) & set(drop))
        if overlap:
            raise DataError(
                f"document {overlap[0]!r} is both gold and excluded", table.source, line, "excluded_ids"
            )
        if gold:
            qrels[qid] = dict.fromkeys(gold, 1)
        if drop:
            excluded[qid] = drop
    if not queries:
        raise DataError("no queries", table.source)
    return queries, qrels, excluded


def bright_from_rows(
    documents: Table,
    examples: Table,
    *,
    domain: str,
    long_context: bool = False,
    instruction: str | None = None,
    name: str | None = None,
    source: str = "",
) -> Benchmark:
    """A BRIGHT domain from its ``documents`` (or ``long_documents``) and ``examples`` rows.

    ``instruction=None`` gives each query :func:`bright_instruction` of the domain; ``""`` gives none.
    With ``long_context`` the qrels come from ``gold_ids_long`` and the main score is ``recall_at_1`` (as in
    BRIGHT's long-document setting and mteb); otherwise ``ndcg_at_10``.
    """
    docs = corpus_from_rows(as_rows(documents, "documents"), ("id", "_id"), ("content", "text"))
    queries, qrels, excluded = _bright_queries(
        as_rows(examples, "examples"), domain=domain, long_context=long_context, instruction=instruction
    )
    return Benchmark(
        name=name or f"bright/{domain}" + ("-long" if long_context else ""),
        corpus=docs,
        queries=queries,
        qrels_og=qrels,
        excluded=excluded,
        main_score="recall_at_1" if long_context else "ndcg_at_10",
        source=source,
    )


def _bright_domain(topics: Path, domain: str | None) -> str:
    """The BRIGHT domain given (BRIGHT's ``earth_science`` or anserini's ``earth-science``) or, when none is,
    read from a file name such as anserini's ``topics.bright-earth-science-original.jsonl.gz``. An unknown or
    unreadable domain is an error: each domain has its own instruction, and a wrong one changes the scores."""
    known = {d.replace("_", "-"): d for d in BRIGHT_DOMAINS}
    if domain is not None:
        if domain.replace("_", "-").lower() in known:
            return known[domain.replace("_", "-").lower()]
        raise DataError(
            f"unknown BRIGHT domain {domain!r}",
            topics,
            field="domain",
            hint=f"one of {', '.join(BRIGHT_DOMAINS)}",
        )
    match = re.search(
        r"bright-([a-z0-9_-]+?)(?:-original|-long|-[a-z0-9]+-reason)?\.jsonl", topics.name.lower()
    )
    if match and match.group(1).replace("_", "-") in known:
        return known[match.group(1).replace("_", "-")]
    raise DataError(
        "no BRIGHT domain in the file name" + (f" ({match.group(1)!r} is none)" if match else ""),
        topics,
        field="domain",
        hint=f"name it topics.bright-<domain>-original.jsonl.gz or pass domain= one of {', '.join(BRIGHT_DOMAINS)}",
    )


def load_bright_topics(
    topics: str | Path,
    *,
    qrels: str | Path | None = None,
    documents: str | Path | None = None,
    domain: str | None = None,
    long_context: bool = False,
    instruction: str | None = None,
    name: str | None = None,
) -> Benchmark:
    """BRIGHT from local files: ``topics`` holds BRIGHT ``examples`` rows as JSONL(.gz) (anserini ships them
    as ``topics.bright-<domain>-original.jsonl.gz``), ``qrels`` optional TREC qrels that replace the
    ``gold_ids``, ``documents`` optional JSONL(.gz) rows {``id``, ``content``}.

    Without documents the corpus is empty: such a benchmark can score runs made elsewhere (an anserini run
    read with :func:`~infembed.data.formats.read_trec_run`) but cannot be searched. The domain (for the default
    instruction) is read from the file name when not given (BRIGHT's ``earth_science`` or anserini's
    ``earth-science``); an unknown domain is a :class:`DataError`.
    """
    topics_path = Path(topics)
    domain = _bright_domain(topics_path, domain)
    table = Rows.from_jsonl(topics_path)
    queries, gold, excluded = _bright_queries(
        table, domain=domain, long_context=long_context, instruction=instruction
    )
    judged = gold
    if qrels is not None:
        judged = read_trec_qrels(qrels)
        for qid, docs in judged.items():
            if qid not in queries:
                raise DataError(f"query id {qid!r} is not in {topics_path.name}", qrels, field="qid")
            clash = sorted(set(docs) & set(excluded.get(qid, ())))
            if clash:
                raise DataError(
                    f"document {clash[0]!r} of query {qid!r} is judged and excluded", qrels, field="docid"
                )
    corpus: dict[str, Document] = {}
    if documents is not None:
        corpus = corpus_from_rows(Rows.from_jsonl(documents), ("id", "_id"), ("content", "text"))
    return Benchmark(
        name=name or f"bright/{domain}",
        corpus=corpus,
        queries=queries,
        qrels_og=judged,
        excluded=excluded,
        main_score="recall_at_1" if long_context else "ndcg_at_10",
        source=str(topics_path),
    )


def from_hub(
    spec: BenchmarkSpec, options: dict[str, Any], revision: str | None, cache_dir: str | None
) -> Benchmark:
    long_context = bool(options.get("long_context", False))
    if long_context and spec.subset not in BRIGHT_LONG_DOMAINS:
        raise DataError(
            f"BRIGHT {spec.subset} has no long documents",
            spec.name,
            field="long_context",
            hint=f"long documents exist for {', '.join(BRIGHT_LONG_DOMAINS)}",
        )
    rev = revision or spec.revision
    reasoning = options.get("reasoning")
    query_config = f"{reasoning}_reason" if reasoning else "examples"
    doc_config = "long_documents" if long_context else "documents"
    documents = hub.fetch_hub_rows(spec.repo, doc_config, spec.subset, revision=rev, cache_dir=cache_dir)[
        spec.subset
    ]
    examples = hub.fetch_hub_rows(spec.repo, query_config, spec.subset, revision=rev, cache_dir=cache_dir)[
        spec.subset
    ]
    bench = bright_from_rows(
        documents,
        examples,
        domain=spec.subset,
        long_context=long_context,
        instruction=options.get("instruction"),
        name=spec.name + ("-long" if long_context else "") + (f"-{reasoning}" if reasoning else ""),
        source=f"hf://datasets/{spec.repo}@{rev or 'main'}",
    )
    bench.main_score_source = spec.main_score_source
    return bench
