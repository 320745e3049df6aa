"""Hub tables as a format: rows (dicts in a hub schema) and the readers of their fields.

A hub dataset config/split arrives as a list of dicts (:func:`infembed.data.hub.fetch_hub_rows`); so does a
JSONL file in the same schema (:meth:`Rows.from_jsonl`, e.g. anserini's BRIGHT topics). :class:`Rows` keeps
where they came from, and the readers here turn fields into ids, texts, labels, qrels, corpora and candidate
lists with errors that name the table (a file, or ``hf://datasets/<repo>/<config>/<split>``), the 1-based row
(the line, for JSONL) and the field. The hub schemas do not always spell a field one way, so readers take a
tuple of accepted names, the canonical one first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.data.formats import Qrels, add_judgment, relevance
from infembed.data.jsonl import id_text, iter_jsonl, require_str
from infembed.data.records import Document

logger = logging.getLogger(__name__)

QUERY_ID = ("query-id", "query_id", "qid")
CORPUS_ID = ("corpus-id", "corpus_id", "doc_id", "docid", "pid")


@dataclass
class Rows:
    """The rows of one table (a hub config/split, or a JSONL file) and where they came from.

    ``source`` names the table in error messages; ``lines`` are the rows' 1-based line numbers when they were
    read from a file (blank lines skipped), else rows are numbered from 1.
    """

    source: str
    rows: Sequence[Mapping[str, Any]]
    lines: Sequence[int] | None = None

    @classmethod
    def from_jsonl(cls, path: str | Path) -> Rows:
        """Rows of a JSONL(.gz) file, keeping each row's line number for error messages."""
        pairs = list(iter_jsonl(path))
        return cls(str(path), [obj for _, obj in pairs], [line for line, _ in pairs])

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any]]]:
        for index, row in enumerate(self.rows):
            line = self.lines[index] if self.lines is not None else index + 1
            if not isinstance(row, Mapping):
                raise DataError(f"expected an object (a dict), got {type(row).__name__}", self.source, line)
            yield line, row

    def __len__(self) -> int:
        return len(self.rows)


#: What the converters accept for a table: :class:`Rows`, or plain dicts (numbered from 1).
Table = Rows | Sequence[Mapping[str, Any]]


def as_rows(table: Table | None, default_source: str) -> Rows:
    if table is None:
        return Rows(default_source, [])
    if isinstance(table, Rows):
        return table
    return Rows(default_source, list(table))


def field_of(row: Mapping[str, Any], names: Sequence[str]) -> str:
    """The first of ``names`` present in ``row``, else the first name, so a missing field is reported under its
    canonical name."""
    for name in names:
        if name in row:
            return name
    return names[0]


def row_text(
    row: Mapping[str, Any], names: Sequence[str], table: Rows, line: int, *, allow_empty: bool
) -> str:
    key = field_of(row, names)
    if key in row and row[key] is None and allow_empty:
        return ""
    return require_str(row, key, table.source, line, allow_empty=allow_empty)  # type: ignore[arg-type]


def row_id(row: Mapping[str, Any], names: Sequence[str], table: Rows, line: int) -> str:
    key = field_of(row, names)
    if key not in row:
        raise DataError("missing", table.source, line, key)
    return id_text(row[key], table.source, line, key)


def row_ids(row: Mapping[str, Any], key: str, table: Rows, line: int, *, required: bool) -> list[str]:
    """A list of ids (``gold_ids``, ``corpus-ids`` ...); absent or None is ``[]`` unless ``required``."""
    if key not in row or row[key] is None:
        if required:
            raise DataError("missing", table.source, line, key)
        return []
    value = row[key]
    if not isinstance(value, (list, tuple)):
        raise DataError(f"expected a list of ids, got {type(value).__name__}", table.source, line, key)
    return [id_text(item, table.source, line, f"{key}[{position}]") for position, item in enumerate(value)]


def qrels_from_rows(table: Rows) -> Qrels:
    """BEIR-style qrels rows {query-id, corpus-id, score}; conflicting duplicates are an error."""
    qrels: Qrels = {}
    for line, row in table:
        qid = row_id(row, QUERY_ID, table, line)
        did = row_id(row, CORPUS_ID, table, line)
        if "score" not in row:
            raise DataError("missing", table.source, line, "score")
        score = relevance(row["score"], table.source, line, "score")
        add_judgment(qrels, qid, did, score, table.source, line, "score")
    return qrels


def corpus_from_rows(
    table: Rows, id_names: Sequence[str], text_names: Sequence[str], title_names: Sequence[str] = ()
) -> dict[str, Document]:
    corpus: dict[str, Document] = {}
    for line, row in table:
        did = row_id(row, id_names, table, line)
        if did in corpus:
            raise DataError(f"duplicate document id {did!r}", table.source, line, field_of(row, id_names))
        title = row_text(row, title_names, table, line, allow_empty=True) if title_names else ""
        text = row_text(row, text_names, table, line, allow_empty=True)
        corpus[did] = Document(title=title, text=text)
    if not corpus:
        raise DataError("the corpus is empty", table.source)
    return corpus


def top_ranked_from_rows(
    table: Rows, corpus: Mapping[str, Document], queries: Mapping[str, Any]
) -> dict[str, list[str]]:
    """Candidates per query, in the table's order. Accepts one row per candidate ({qid, pid}, FollowIR's
    original layout) or one row per query ({query-id, corpus-ids}, mteb 2.x). Candidates missing from the
    corpus and queries not in the benchmark are dropped, with a warning (FollowIR has both)."""
    top: dict[str, list[str]] = {}
    seen: dict[str, set[str]] = {}
    missing_docs = 0
    unknown_queries: set[str] = set()
    for line, row in table:
        qid = row_id(row, ("qid", "query-id", "query_id"), table, line)
        if "corpus-ids" in row or "corpus_ids" in row:
            ids = row_ids(row, field_of(row, ("corpus-ids", "corpus_ids")), table, line, required=True)
        else:
            ids = [row_id(row, ("pid", "corpus-id", "corpus_id", "doc_id"), table, line)]
        if qid not in queries:
            unknown_queries.add(qid)
            continue
        bucket = top.setdefault(qid, [])
        done = seen.setdefault(qid, set())
        for did in ids:
            if did not in corpus:
                missing_docs += 1
            elif did not in done:
                done.add(did)
                bucket.append(did)
    if missing_docs:
        logger.warning("%s: %d candidate ids are not in the corpus; dropped", table.source, missing_docs)
    if unknown_queries:
        logger.warning(
            "%s: %d query ids are not benchmark queries; ignored", table.source, len(unknown_queries)
        )
    return top


def judged_queries_only(qrels: Qrels, queries: Mapping[str, Any], table: Rows) -> Qrels:
    """The qrels of benchmark queries; judgments of other query ids are dropped with a warning."""
    unknown = sorted(q for q in qrels if q not in queries)
    if unknown:
        logger.warning(
            "%s: qrels for %d query ids not in the queries (e.g. %r); ignored",
            table.source,
            len(unknown),
            unknown[0],
        )
    return {q: d for q, d in qrels.items() if q in queries}
