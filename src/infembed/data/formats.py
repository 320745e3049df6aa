"""One reader (and writer) per file format of a benchmark's parts.

* Qrels TSV with a header (``query-id corpus-id score``), BEIR's and FollowIR's: :func:`iter_qrels_tsv`
  (judgments in file order, with their lines), :func:`read_qrels_tsv`, :func:`write_qrels_tsv`.
* TREC qrels and run files: :func:`read_trec_qrels`, :func:`write_trec_run`, :func:`read_trec_run`
  (:func:`iter_trec_run` line by line, :func:`trec_run_tag`).
* ``corpus.jsonl`` {``_id``, ``title``, ``text``}: :func:`read_corpus`, :func:`write_corpus`.
* ``queries.jsonl`` {``_id``, ``text``, ``instruction_og``, ``instruction_changed``}:
  :func:`read_instruction_queries`, :func:`write_instruction_queries`.
* ``{query-id, corpus-ids}`` lists (``top_ranked.jsonl``, ``excluded.jsonl``, ``changed.jsonl``):
  :func:`read_id_lists`, :func:`write_id_lists`.

Relevance labels, wherever they come from (these files or hub tables, :mod:`infembed.data.rows`), pass through
:func:`relevance` and :func:`add_judgment`, so every qrels reader accepts and refuses the same labels.
Every reader raises :class:`~infembed.data.errors.DataError` naming file, line and field on bad input.
Whole benchmarks (dirs and names) are read by :func:`infembed.data.benchmarks.load_benchmark`; InF-IR rows by
:mod:`infembed.data.inf_ir`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.data.jsonl import (
    atomic_write,
    id_text,
    iter_jsonl,
    iter_lines,
    require_id,
    require_str,
    write_jsonl,
)
from infembed.data.records import Document, InstructionQuery

Qrels = dict[str, dict[str, int]]

# --------------------------------------------------------------------------------------------- judgments


def relevance(value: Any, source: str | Path, line: int | None, field: str) -> int:
    """A relevance label as an int: an int, or a float or text holding a whole number (the hub stores labels
    as float64, files as text). A fractional, non-finite or non-numeric label is an error, not something to
    round."""
    if isinstance(value, bool) or value is None:
        raise DataError(f"relevance {value!r} is not an integer", source, line, field)
    if isinstance(value, int):
        return value
    if isinstance(value, (float, str)):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number) and number.is_integer():
            return int(number)
    raise DataError(f"relevance {value!r} is not an integer", source, line, field)


def add_judgment(
    qrels: Qrels, qid: str, did: str, score: int, source: str | Path, line: int | None, field: str
) -> None:
    """Record one judgment; the same document judged twice for a query with two labels is an error."""
    docs = qrels.setdefault(qid, {})
    if docs.get(did, score) != score:
        raise DataError(
            f"document {did!r} of query {qid!r} is judged twice ({docs[did]} and {score})",
            source,
            line,
            field,
        )
    docs[did] = score


# --------------------------------------------------------------------------------------------- qrels TSV


def iter_qrels_tsv(path: str | Path) -> Iterator[tuple[int, str, str, int]]:
    """The judgments of a qrels TSV as ``(line, query-id, corpus-id, score)``, in file order (blank lines and
    the header skipped). For a reader that needs the line of a judgment (e.g. to say which judgment names an
    unknown document); everyone else wants :func:`read_qrels_tsv`."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.rstrip("\r\n").split("\t")
        if number == 1 and _is_qrels_header(parts):
            continue
        if len(parts) != 3:
            raise DataError(f"expected 3 tab-separated columns, got {len(parts)}", path, number)
        qid = id_text(parts[0], path, number, "query-id")
        did = id_text(parts[1], path, number, "corpus-id")
        yield number, qid, did, relevance(parts[2].strip(), path, number, "score")


def read_qrels_tsv(path: str | Path) -> Qrels:
    """BEIR/FollowIR qrels: TSV with a header line (``query-id  corpus-id  score``), as qid -> doc id -> label."""
    qrels: Qrels = {}
    for number, qid, did, score in iter_qrels_tsv(path):
        add_judgment(qrels, qid, did, score, path, number, "score")
    return qrels


def _is_qrels_header(parts: list[str]) -> bool:
    """Only a line that names the columns is a header; a first data line with a bad score is an error, not a
    header to skip."""
    names = {part.strip().lower() for part in parts}
    return bool(names & {"query-id", "query_id", "qid", "corpus-id", "corpus_id", "doc_id", "docid", "score"})


def write_qrels_tsv(path: str | Path, qrels: Mapping[str, Mapping[str, int]]) -> None:
    with atomic_write(path) as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in qrels.items():
            for did, score in docs.items():
                handle.write(f"{qid}\t{did}\t{score}\n")


# --------------------------------------------------------------------------------------------- TREC


def read_trec_qrels(path: str | Path) -> Qrels:
    """TREC qrels: ``qid iter docid rel`` separated by whitespace."""
    qrels: Qrels = {}
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise DataError(f"expected 4 columns (qid iter docid rel), got {len(parts)}", path, number)
        score = relevance(parts[3], path, number, "rel")
        add_judgment(qrels, parts[0], parts[2], score, path, number, "rel")
    return qrels


def write_trec_run(path: str | Path, run: Mapping[str, Mapping[str, float]], tag: str = "infembed") -> None:
    """TREC run, the 6-column format of trec_eval: ``qid Q0 docid rank score tag``, one line per document.

    Each query's documents are ranked in the order every metric here uses, score then doc id descending (the
    tie rule of trec_eval, pytrec_eval and mteb), so the ranks agree with what the scores mean to any tool.
    Scores are written with ``repr``, the shortest text that reads back to the same float: a run read back
    with :func:`read_trec_run` is the same run, ties included. Ids and the tag must not hold whitespace."""
    if not tag or any(c.isspace() for c in tag):
        raise DataError(f"the run tag {tag!r} must be one word (no whitespace)", path, field="tag")
    for qid, scores in run.items():
        _trec_word(qid, path, "qid")
        for did in scores:
            _trec_word(did, path, "docid")
    with atomic_write(path) as handle:
        for qid, scores in run.items():
            ranked = sorted(scores.items(), key=lambda item: (float(item[1]), item[0]), reverse=True)
            for rank, (did, score) in enumerate(ranked, start=1):
                handle.write(f"{qid} Q0 {did} {rank} {float(score)!r} {tag}\n")


def _trec_word(value: str, path: str | Path, field: str) -> None:
    if not value or any(c.isspace() for c in value):
        raise DataError(
            f"{value!r} cannot be written in a TREC run (empty or holds whitespace)", path, field=field
        )


def iter_trec_run(path: str | Path) -> Iterator[tuple[int, str, str, int, float, str]]:
    """The lines of a TREC run as ``(line, qid, docid, rank, score, tag)`` (blank lines skipped; the ``Q0``
    column is ignored, as trec_eval does). Refused, naming file, line and field: a line without 6 columns, a
    rank that is not a whole number >= 0 (0-based ranks exist in the wild; ranks are checked, never used:
    trec_eval ranks by score), a score that is not a finite number."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DataError(
                f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}", path, number
            )
        qid, _, did, rank_text, score_text, tag = parts
        try:
            rank = int(rank_text)
        except ValueError:
            rank = -1
        if rank < 0:
            raise DataError(f"rank {rank_text!r} is not a whole number >= 0", path, number, "rank")
        try:
            score = float(score_text)
        except ValueError:
            raise DataError(f"score {score_text!r} is not a number", path, number, "score") from None
        if not math.isfinite(score):
            raise DataError(f"score {score_text!r} is not a finite number", path, number, "score")
        yield number, qid, did, rank, score, tag


def read_trec_run(
    path: str | Path, query_ids: Collection[str] | None = None, doc_ids: Collection[str] | None = None
) -> dict[str, dict[str, float]]:
    """A TREC run as ``qid -> docid -> score`` (see :func:`iter_trec_run` for the line checks). A document twice
    for a query is refused (its score would be ambiguous); so are, when given, a query id not in ``query_ids``
    and a document id not in ``doc_ids`` (a run of another collection or topic set, not one to score here);
    and a file without one run line."""
    run: dict[str, dict[str, float]] = {}
    for number, qid, did, _, score, _ in iter_trec_run(path):
        if query_ids is not None and qid not in query_ids:
            raise DataError(f"query {qid!r} is not a query of the benchmark", path, number, "qid")
        if doc_ids is not None and did not in doc_ids:
            raise DataError(f"document {did!r} is not in the benchmark's corpus", path, number, "docid")
        docs = run.setdefault(qid, {})
        if did in docs:
            raise DataError(f"document {did!r} appears twice for query {qid!r}", path, number, "docid")
        docs[did] = score
    if not run:
        raise DataError("holds no run line (qid Q0 docid rank score tag)", path)
    return run


def trec_run_tag(path: str | Path) -> str:
    """The tag (6th column) of a TREC run's first line: the name of the system that made it."""
    for _, _, _, _, _, tag in iter_trec_run(path):
        return tag
    raise DataError("holds no run line (qid Q0 docid rank score tag)", path)


# --------------------------------------------------------------------------------------------- corpus, queries


def read_corpus(path: str | Path) -> dict[str, Document]:
    """``corpus.jsonl``, ``{_id, title, text}`` per line (title optional); a document's text for retrieval is
    :meth:`~infembed.data.records.Document.full_text`."""
    corpus: dict[str, Document] = {}
    for line, obj in iter_jsonl(path):
        did = require_id(obj, "_id", path, line)
        if did in corpus:
            raise DataError(f"duplicate document id {did!r}", path, line, "_id")
        title = (
            require_str(obj, "title", path, line, allow_empty=True) if obj.get("title") is not None else ""
        )
        text = require_str(obj, "text", path, line, allow_empty=True)
        corpus[did] = Document(title=title, text=text)
    if not corpus:
        raise DataError("the corpus is empty", path)
    return corpus


def write_corpus(path: str | Path, corpus: Mapping[str, Document]) -> int:
    return write_jsonl(path, ({"_id": d, "title": doc.title, "text": doc.text} for d, doc in corpus.items()))


def read_instruction_queries(path: str | Path) -> dict[str, InstructionQuery]:
    """``queries.jsonl`` rows ``{_id, text[, instruction_og | instruction][, instruction_changed]}``."""
    queries: dict[str, InstructionQuery] = {}
    for line, obj in iter_jsonl(path):
        qid = require_id(obj, "_id", path, line)
        if qid in queries:
            raise DataError(f"duplicate query id {qid!r}", path, line, "_id")
        text = require_str(obj, "text", path, line)
        og_field = "instruction_og" if "instruction_og" in obj else "instruction"
        fields = {}
        for key, value in (
            (og_field, obj.get(og_field)),
            ("instruction_changed", obj.get("instruction_changed")),
        ):
            if value is not None and not isinstance(value, str):
                raise DataError(f"expected a string, got {type(value).__name__}", path, line, key)
            fields[key] = value
        queries[qid] = InstructionQuery(
            text=text,
            instruction_og=fields[og_field] or "",
            instruction_changed=fields["instruction_changed"],
        )
    return queries


def write_instruction_queries(path: str | Path, queries: Mapping[str, InstructionQuery]) -> int:
    rows = []
    for qid, query in queries.items():
        row = {"_id": qid, "text": query.text, "instruction_og": query.instruction_og}
        if query.instruction_changed is not None:
            row["instruction_changed"] = query.instruction_changed
        rows.append(row)
    return write_jsonl(path, rows)


def iter_id_lists(path: str | Path) -> Iterator[tuple[int, str, list[str]]]:
    """``{query-id, corpus-ids}`` rows as ``(line, query-id, doc ids)``, in file order (for a reader that checks
    the ids and must say on which line)."""
    for line, obj in iter_jsonl(path):
        qid = require_id(obj, "query-id", path, line)
        ids = obj.get("corpus-ids")
        if not isinstance(ids, list) or not all(
            isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids
        ):
            raise DataError("expected a list of document ids", path, line, "corpus-ids")
        yield line, qid, [str(i) for i in ids]


def read_id_lists(path: str | Path) -> dict[str, list[str]]:
    """``{query-id, corpus-ids}`` rows (top_ranked.jsonl, excluded.jsonl, changed.jsonl) as qid -> doc ids."""
    return {qid: ids for _, qid, ids in iter_id_lists(path)}


def write_id_lists(path: str | Path, lists: Mapping[str, list[str]]) -> int:
    return write_jsonl(path, ({"query-id": q, "corpus-ids": ids} for q, ids in lists.items()))
