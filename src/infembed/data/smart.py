"""SMART-format test collections (the Cranfield 1400 distribution: ``cran.all.1400``, ``cran.qry``,
``cranqrel``), read as a :class:`~infembed.data.records.Benchmark` without instructions.

Records start with ``.I <id>`` and hold fields ``.T`` (title), ``.A`` (authors), ``.B`` (source) and ``.W``
(text), each running until the next field marker. As in ``followir-cranfield`` (its README gives the
details): a document's ``_id`` is its ``.I`` number without leading zeros, ``title`` the ``.T`` field and
``text`` the ``.W`` field, whitespace normalised; a query's id is its position in the query file when the
``.I`` numbers are not 1..n (Cranfield's qrels number queries by position); judgments ``query doc code``
count as relevant (score 1) when the code is 1, 2 or 3 (Cleverdon's complete answer, high relevance,
useful) and not when it is 4 (minimum interest) or -1. A qrels line with two columns is relevant.

Example::

    bench = load_smart("data/raw/cranfield")   # 1,400 documents, 225 queries, qrels of 222 queries
"""

from __future__ import annotations

import re
from pathlib import Path

from infembed.data.errors import DataError
from infembed.data.jsonl import iter_lines
from infembed.data.records import Benchmark, Document, InstructionQuery

#: Cleverdon's relevance codes counted as relevant
RELEVANT_CODES = frozenset({1, 2, 3})
_FIELD = re.compile(r"^\.([A-Z])(?:\s+(.*))?$")


def find_smart_files(path: str | Path) -> tuple[Path, Path, Path] | None:
    """(documents, queries, qrels) of a SMART collection dir, or None when it is not one."""
    root = Path(path)
    if not root.is_dir():
        return None
    docs = sorted(root.glob("*.all*"))
    queries = sorted(root.glob("*.qry"))
    qrels = sorted(p for p in root.glob("*rel*") if p.suffix not in (".readme", ".txt", ".md"))
    if len(docs) == 1 and len(queries) == 1 and len(qrels) == 1:
        return docs[0], queries[0], qrels[0]
    return None


def read_smart_records(path: str | Path) -> list[tuple[str, dict[str, str], int]]:
    """``(id, {field letter: text}, line)`` for every ``.I`` record, in file order."""
    records: list[tuple[str, dict[str, str], int]] = []
    current: dict[str, list[str]] | None = None
    letter: str | None = None
    for number, raw in iter_lines(path):
        line = raw.rstrip("\n")
        match = _FIELD.match(line.strip()) if line.startswith(".") else None
        if match and match.group(1) == "I":
            rid = (match.group(2) or "").strip()
            if not rid.isdigit():
                raise DataError(f"expected a record number after .I, got {rid!r}", path, number, ".I")
            current, letter = {}, None
            records.append((str(int(rid)), current, number))  # type: ignore[arg-type]
        elif match:
            if current is None:
                raise DataError("a field before the first .I record", path, number, f".{match.group(1)}")
            letter = match.group(1)
            current.setdefault(letter, []).append(match.group(2) or "")
        elif current is not None and letter is not None:
            current[letter].append(line)
        elif line.strip():
            raise DataError("text outside a record field", path, number)
    return [
        (rid, {k: " ".join(" ".join(v).split()) for k, v in fields.items()}, n) for rid, fields, n in records
    ]  # type: ignore[union-attr]


def read_smart_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """``query doc [code]`` lines -> qid -> {doc id: 1} for the relevant ones (codes 1-3, or no code)."""
    qrels: dict[str, dict[str, int]] = {}
    for number, line in iter_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2 or not all(re.fullmatch(r"-?\d+", p) for p in parts[:3]):
            raise DataError("expected 'query-number document-number [code]'", path, number)
        qid, did = str(int(parts[0])), str(int(parts[1]))
        if len(parts) >= 3 and int(parts[2]) not in RELEVANT_CODES:
            qrels.setdefault(qid, {})
            continue
        qrels.setdefault(qid, {})[did] = 1
    return qrels


def load_smart(path: str | Path, name: str | None = None) -> Benchmark:
    """A SMART collection dir as a benchmark (og qrels only, no instructions); see the module docstring."""
    root = Path(path)
    files = find_smart_files(root)
    if files is None:
        raise DataError(
            "not a SMART collection (expected one *.all* documents file, one *.qry and one *rel* qrels file)",
            root,
        )
    docs_path, queries_path, qrels_path = files
    corpus: dict[str, Document] = {}
    for did, fields, number in read_smart_records(docs_path):
        if did in corpus:
            raise DataError(f"duplicate document number {did}", docs_path, number, ".I")
        corpus[did] = Document(title=fields.get("T", ""), text=fields.get("W", ""))
    records = read_smart_records(queries_path)
    numbers = [int(rid) for rid, _, _ in records]
    by_position = numbers != list(range(1, len(numbers) + 1))
    queries: dict[str, InstructionQuery] = {}
    for position, (rid, fields, number) in enumerate(records, start=1):
        text = fields.get("W", "")
        if not text:
            raise DataError("the query has no .W text", queries_path, number, ".W")
        queries[str(position) if by_position else rid] = InstructionQuery(text=text)
    qrels = read_smart_qrels(qrels_path)
    unknown = sorted(set(qrels) - set(queries), key=int)
    if unknown:
        raise DataError(
            f"query {unknown[0]} is judged but {queries_path.name} has {len(queries)} queries",
            qrels_path,
            field="query",
        )
    qrels = {q: docs for q, docs in qrels.items() if docs}
    return Benchmark(
        name=name or root.name,
        corpus=corpus,
        queries=queries,
        qrels_og=qrels,
        main_score="map_at_1000",
        source=str(root),
    )
