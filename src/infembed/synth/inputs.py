"""Seed (query, passage) pairs for the synthesis pipeline, and the pool of distractor passages for the judge.

Three sources, all returning a :class:`SeedData`:

* :func:`read_beir_dir`: a BEIR dir (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``); every
  qrels line with score > 0 is one pair; distractors come from the whole corpus. Corpus, queries and qrels are
  read by the evaluation's readers (:mod:`infembed.data.formats`) and a passage is ``Document.full_text()``,
  title and text joined as evaluation joins them, so the same BEIR dir gives the same passages and judgments
  in synthesis and evaluation.
* :func:`read_pairs_jsonl`: JSONL with ``query`` and ``passage`` (aliases: ``query_positive``, ``document``,
  ``document_positive``, ``pos``), optional ``id``, ``query_id``, ``doc_id`` and ``language`` (code);
  distractors come from the other rows' passages.
* :func:`load_msmarco_hub`: ``microsoft/ms_marco`` from the Hugging Face hub through ``datasets``
  (streamed; ``limit`` pairs); the pair is a query with its selected passage and distractors are the other
  passages shown for the queries read.

:func:`load_seed` picks one by looking at the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from infembed.data.errors import DataError
from infembed.data.formats import iter_qrels_tsv, read_corpus, read_instruction_queries
from infembed.data.jsonl import iter_jsonl, require_str


@dataclass(frozen=True)
class SeedPair:
    id: str
    query: str
    passage: str
    query_id: str | None = None
    doc_id: str | None = None
    language: str | None = None


@dataclass
class SeedData:
    pairs: list[SeedPair]
    distractors: list[str] = field(default_factory=list)
    source: str = ""


def _unique_ids(pairs: list[SeedPair], path: str | Path) -> None:
    seen: set[str] = set()
    for pair in pairs:
        if pair.id in seen:
            raise DataError(f"duplicate pair id '{pair.id}'", path, hint="ids must be unique to resume a run")
        seen.add(pair.id)


def read_beir_dir(path: str | Path, split: str = "test", limit: int | None = None) -> SeedData:
    root = Path(path)
    corpus_path, queries_path = root / "corpus.jsonl", root / "queries.jsonl"
    qrels_path = root / "qrels" / f"{split}.tsv"
    for needed in (corpus_path, queries_path, qrels_path):
        if not needed.exists():
            raise DataError(
                "file not found", needed, hint="a BEIR dir needs corpus.jsonl, queries.jsonl, qrels/"
            )
    corpus = {doc_id: doc.full_text() for doc_id, doc in read_corpus(corpus_path).items()}
    queries = {qid: query.text for qid, query in read_instruction_queries(queries_path).items()}
    # qrels by the evaluation's reader, in file order and with their lines (to name a judgment that points
    # nowhere); several positives of one query give several pairs
    raw: list[tuple[str, str]] = []
    for number, qid, did, score in iter_qrels_tsv(qrels_path):
        if score <= 0:
            continue
        if qid not in queries:
            raise DataError(f"query '{qid}' is not in queries.jsonl", qrels_path, number)
        if did not in corpus:
            raise DataError(f"document '{did}' is not in corpus.jsonl", qrels_path, number)
        raw.append((qid, did))
    per_query: dict[str, int] = {}
    for qid, _ in raw:
        per_query[qid] = per_query.get(qid, 0) + 1
    pairs = [
        SeedPair(qid if per_query[qid] == 1 else f"{qid}-{did}", queries[qid], corpus[did], qid, did)
        for qid, did in raw
        if corpus[did].strip()
    ]
    if limit is not None:
        pairs = pairs[:limit]
    return SeedData(pairs, list(corpus.values()), str(root))


_QUERY_KEYS = ("query", "query_positive", "question")
_PASSAGE_KEYS = ("passage", "document_positive", "document", "pos", "positive", "answer")


def read_pairs_jsonl(path: str | Path, limit: int | None = None) -> SeedData:
    pairs: list[SeedPair] = []
    for line, obj in iter_jsonl(path):
        qkey = next((k for k in _QUERY_KEYS if k in obj), None)
        pkey = next((k for k in _PASSAGE_KEYS if k in obj), None)
        if qkey is None:
            raise DataError("missing", path, line, "query", hint=f"one of {', '.join(_QUERY_KEYS)}")
        if pkey is None:
            raise DataError("missing", path, line, "passage", hint=f"one of {', '.join(_PASSAGE_KEYS)}")
        passage = obj[pkey]
        if isinstance(passage, list):  # {query, pos: [...]} rows: the first positive
            if not passage or not isinstance(passage[0], str):
                raise DataError("expected a non-empty list of strings", path, line, pkey)
            passage = passage[0]
            obj = {**obj, pkey: passage}
        query = require_str(obj, qkey, path, line)
        passage = require_str(obj, pkey, path, line)
        query_id = str(obj["query_id"]) if obj.get("query_id") is not None else None
        doc_id = str(obj["doc_id"]) if obj.get("doc_id") is not None else None
        pair_id = str(obj["id"]) if obj.get("id") is not None else (query_id or str(line))
        language = obj.get("language")
        if language is not None and not isinstance(language, str):
            raise DataError("expected a string", path, line, "language")
        pairs.append(SeedPair(pair_id, query, passage, query_id, doc_id, language))
        if limit is not None and len(pairs) >= limit:
            break
    _unique_ids(pairs, path)
    return SeedData(pairs, [p.passage for p in pairs], str(path))


def load_msmarco_hub(
    limit: int, name: str = "microsoft/ms_marco", config: str = "v2.1", split: str = "train"
) -> SeedData:
    """Stream the first ``limit`` usable queries of MS MARCO (one selected passage each) from the hub."""
    try:
        import datasets  # lazy: optional dependency (infembed[hub])
    except ImportError:
        raise DataError(
            "reading MS MARCO from the hub needs the 'datasets' package", hint="pip install 'infembed[hub]'"
        ) from None
    stream = datasets.load_dataset(name, config, split=split, streaming=True)
    pairs: list[SeedPair] = []
    distractors: list[str] = []
    for row in stream:
        passages = row.get("passages") or {}
        texts = passages.get("passage_text") or []
        selected = passages.get("is_selected") or []
        chosen = [t for t, s in zip(texts, selected, strict=False) if s]
        distractors.extend(t for t, s in zip(texts, selected, strict=False) if not s)
        if len(chosen) != 1 or not str(row.get("query") or "").strip():
            continue  # no or several selected passages: the pair would be ambiguous
        qid = str(row.get("query_id"))
        pairs.append(SeedPair(qid, row["query"], chosen[0], qid, None))
        if len(pairs) >= limit:
            break
    return SeedData(pairs, distractors, f"hf:{name}/{config}/{split}")


def load_seed(source: str, limit: int | None = None, split: str = "test") -> SeedData:
    """A BEIR dir, a pairs JSONL file, or ``msmarco`` / ``hf:microsoft/ms_marco`` (needs ``limit``)."""
    if source in ("msmarco", "ms_marco") or source.startswith("hf:"):
        if limit is None:
            raise DataError("reading from the hub needs --limit", source)
        name = source[3:] if source.startswith("hf:") else "microsoft/ms_marco"
        return load_msmarco_hub(limit, name=name)
    path = Path(source)
    if path.is_dir():
        return read_beir_dir(path, split=split, limit=limit)
    if path.exists():
        return read_pairs_jsonl(path, limit=limit)
    raise DataError("not found", source, hint="give a BEIR dir, a JSONL of pairs, or 'msmarco' with --limit")
