"""Readers and writers for the project's file formats (local paths).

* InF-IR rows (JSONL): :func:`read_triplets`, :func:`write_triplets`.
* Instruction benchmark dirs (FollowIR style): :func:`load_instruction_benchmark`, :func:`save_benchmark`.
* BEIR dirs (corpus.jsonl, queries.jsonl, qrels/<split>.tsv): :func:`load_beir`.
* TREC qrels and run files: :func:`read_trec_qrels`, :func:`write_trec_run`, :func:`read_trec_run`.
* Qrels TSV with a header (``query-id corpus-id score``): :func:`read_qrels_tsv`.

Every reader raises :class:`~infembed.data.errors.DataError` naming file, line and field on bad input.
Hub loaders (FollowIR, MAIR, BRIGHT, InF-IR) live in :mod:`infembed.data.hub`; :func:`load_benchmark`
dispatches on a local path or a registered name.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from pathlib import Path

from infembed.data.errors import DataError
from infembed.data.jsonl import (
    atomic_write,
    iter_jsonl,
    iter_lines,
    json_error_reason,
    require_id,
    require_str,
    write_jsonl,
)
from infembed.data.records import (
    OPTIONAL_TRIPLET_FIELDS,
    TRIPLET_ALIASES,
    TRIPLET_FIELDS,
    Benchmark,
    Document,
    InstructionQuery,
    Triplet,
)

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------- InF-IR rows


def parse_triplet(obj: dict, path: str | Path, line: int) -> Triplet:
    obj = dict(obj)
    for alias, name in TRIPLET_ALIASES.items():
        if alias in obj and name not in obj:
            obj[name] = obj.pop(alias)
    values = {key: require_str(obj, key, path, line) for key in TRIPLET_FIELDS}
    optional = {}
    for key in OPTIONAL_TRIPLET_FIELDS:
        if obj.get(key) is not None:
            optional[key] = str(obj[key])
    known = set(TRIPLET_FIELDS) | set(OPTIONAL_TRIPLET_FIELDS)
    extra = {k: v for k, v in obj.items() if k not in known}
    return Triplet(**values, **optional, extra=extra)


def read_triplets(path: str | Path, limit: int | None = None) -> list[Triplet]:
    """Read InF-IR rows from a JSONL file (or every ``*.jsonl`` in a directory, sorted by name)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a whole number >= 0 (None for all rows), got {limit!r}")
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise DataError("no *.jsonl file in this directory", path)
    rows: list[Triplet] = []
    for file in files:
        for line, obj in iter_jsonl(file):
            if limit is not None and len(rows) >= limit:
                return rows
            rows.append(parse_triplet(obj, file, line))
    if not rows and limit != 0:
        raise DataError("no InF-IR rows found", path)
    return rows


def write_triplets(path: str | Path, rows: Iterable[Triplet]) -> int:
    return write_jsonl(path, (row.to_dict() for row in rows))


# --------------------------------------------------------------------------------------------- qrels / runs


def read_qrels_tsv(path: str | Path) -> dict[str, dict[str, int]]:
    """BEIR/FollowIR qrels: TSV with a header line (``query-id  corpus-id  score``)."""
    qrels: dict[str, dict[str, int]] = {}
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.rstrip("\r\n").split("\t")
        if number == 1 and _is_qrels_header(parts):
            continue
        if len(parts) != 3:
            raise DataError(f"expected 3 tab-separated columns, got {len(parts)}", path, number)
        qid, did, score = (part.strip() for part in parts)
        _add_judgment(qrels, qid, did, score, path, number, ("query-id", "corpus-id", "score"))
    return qrels


def _is_qrels_header(parts: list[str]) -> bool:
    """Only a line that names the columns is a header; a first data line with a bad score is an error, not a
    header to skip."""
    names = {part.strip().lower() for part in parts}
    return bool(names & {"query-id", "query_id", "qid", "corpus-id", "corpus_id", "doc_id", "docid", "score"})


def _add_judgment(
    qrels: dict[str, dict[str, int]],
    qid: str,
    did: str,
    score: str,
    path: str | Path,
    line: int,
    fields: tuple[str, str, str],
) -> None:
    if not qid:
        raise DataError("is empty", path, line, fields[0])
    if not did:
        raise DataError("is empty", path, line, fields[1])
    if not _is_int(score):
        raise DataError(f"score {score!r} is not an integer", path, line, fields[2])
    value = int(float(score))
    docs = qrels.setdefault(qid, {})
    if docs.get(did, value) != value:
        raise DataError(
            f"document {did!r} of query {qid!r} is judged twice ({docs[did]} and {value})",
            path,
            line,
            fields[2],
        )
    docs[did] = value


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: ``qid iter docid rel`` separated by whitespace."""
    qrels: dict[str, dict[str, int]] = {}
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise DataError(f"expected 4 columns (qid iter docid rel), got {len(parts)}", path, number)
        _add_judgment(qrels, parts[0], parts[2], parts[3], path, number, ("qid", "docid", "rel"))
    return qrels


def write_trec_run(path: str | Path, run: dict[str, dict[str, float]], tag: str = "infembed") -> None:
    """TREC run: ``qid Q0 docid rank score tag``, ranks by descending score."""
    with atomic_write(path) as handle:
        for qid, scores in run.items():
            ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
            for rank, (did, score) in enumerate(ranked, start=1):
                # repr() is the shortest text that reads back to the same float, so ties and order survive
                handle.write(f"{qid} Q0 {did} {rank} {float(score)!r} {tag}\n")


def read_trec_run(path: str | Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise DataError(
                f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}", path, number
            )
        try:
            score = float(parts[4])
        except ValueError:
            raise DataError(f"score {parts[4]!r} is not a number", path, number, "score") from None
        if not math.isfinite(score):
            raise DataError(f"score {parts[4]!r} is not a finite number", path, number, "score")
        docs = run.setdefault(parts[0], {})
        if parts[2] in docs:
            raise DataError(
                f"document {parts[2]!r} appears twice for query {parts[0]!r}", path, number, "docid"
            )
        docs[parts[2]] = score
    return run


def _is_int(text: str) -> bool:
    try:
        return float(text) == int(float(text))
    except (ValueError, OverflowError):  # "nan" and "inf" are not labels either
        return False


# --------------------------------------------------------------------------------------------- corpora


def read_corpus(path: str | Path) -> dict[str, Document]:
    corpus: dict[str, Document] = {}
    for line, obj in iter_jsonl(path):
        did = require_id(obj, "_id", path, line)
        if did in corpus:
            raise DataError(f"duplicate document id {did!r}", path, line, "_id")
        title = require_str(obj, "title", path, line, allow_empty=True) if obj.get("title") is not None else ""
        text = require_str(obj, "text", path, line, allow_empty=True)
        corpus[did] = Document(title=title, text=text)
    if not corpus:
        raise DataError("the corpus is empty", path)
    return corpus


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


def load_instruction_benchmark(path: str | Path, name: str | None = None) -> Benchmark:
    """Read a FollowIR-style instruction benchmark dir (see docs/architecture.md)."""
    root = Path(path)
    if not root.is_dir():
        raise DataError("not a directory", root, hint="give a benchmark dir or a registered name")
    for required in ("corpus.jsonl", "queries.jsonl", "qrels_og.tsv"):
        if not (root / required).exists():
            raise DataError(
                f"missing {required}",
                root,
                hint="an instruction benchmark dir holds corpus.jsonl, queries.jsonl, qrels_og.tsv[, qrels_changed.tsv]",
            )
    corpus = read_corpus(root / "corpus.jsonl")
    qfile = root / "queries.jsonl"
    queries = read_instruction_queries(qfile)
    qrels_og = read_qrels_tsv(root / "qrels_og.tsv")
    qrels_changed = (
        read_qrels_tsv(root / "qrels_changed.tsv") if (root / "qrels_changed.tsv").exists() else None
    )
    _check_ids(qrels_og, queries, root / "qrels_og.tsv")
    _check_judgments(qrels_og, corpus, root / "qrels_og.tsv")
    if qrels_changed is not None:
        _check_ids(qrels_changed, queries, root / "qrels_changed.tsv")
        _check_judgments(qrels_changed, corpus, root / "qrels_changed.tsv")
        _check_instructions(qrels_og, queries, qfile)
    tfile = root / "top_ranked.jsonl"
    top_ranked = _read_id_lists(tfile) if tfile.exists() else None
    excluded = _read_id_lists(root / "excluded.jsonl") if (root / "excluded.jsonl").exists() else None
    # the data set's own changed documents (FollowIR's qrel_diff), kept when a hub benchmark is saved
    changed = _read_id_lists(root / "changed.jsonl") if (root / "changed.jsonl").exists() else None
    main_score, main_score_source = "map_at_1000", ""
    meta_path = root / "benchmark.json"
    if meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8-sig"))
        except json.JSONDecodeError as error:
            raise DataError(json_error_reason(error), meta_path, error.lineno) from None
        except UnicodeDecodeError:
            raise DataError("not valid UTF-8", meta_path, hint="save the file as UTF-8") from None
        if not isinstance(meta, dict) or not isinstance(meta.get("main_score", main_score), str):
            raise DataError("expected an object with a string main_score", meta_path, field="main_score")
        main_score = meta.get("main_score", main_score)
        main_score_source = str(meta.get("main_score_source") or "")
    return Benchmark(
        name=name or root.name,
        corpus=corpus,
        queries=queries,
        qrels_og=qrels_og,
        qrels_changed=qrels_changed,
        top_ranked=top_ranked,
        excluded=excluded,
        main_score=main_score,
        source=str(root),
        main_score_source=main_score_source,
        changed_documents=changed,
    )


def _read_id_lists(path: Path) -> dict[str, list[str]]:
    """``{query-id, corpus-ids}`` rows (top_ranked.jsonl, excluded.jsonl) as qid -> doc ids."""
    out: dict[str, list[str]] = {}
    for line, obj in iter_jsonl(path):
        qid = require_id(obj, "query-id", path, line)
        ids = obj.get("corpus-ids")
        if not isinstance(ids, list) or not all(
            isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids
        ):
            raise DataError("expected a list of document ids", path, line, "corpus-ids")
        out[qid] = [str(i) for i in ids]
    return out


def _check_ids(qrels: dict[str, dict[str, int]], queries: dict[str, InstructionQuery], path: Path) -> None:
    for qid in qrels:
        if qid not in queries:
            raise DataError(f"query id {qid!r} is not in queries.jsonl", path, field="query-id")


def _check_judgments(qrels: dict[str, dict[str, int]], corpus: dict[str, Document], path: Path) -> None:
    """A qrels file must judge at least one document relevant (else every score is undefined), and a judged
    document missing from the corpus can never be retrieved: it lowers recall-based scores, so say how many."""
    if not any(score > 0 for docs in qrels.values() for score in docs.values()):
        raise DataError(
            "no document is judged relevant (score > 0)", path, hint="is the file empty but for its header?"
        )
    missing = {(qid, did) for qid, docs in qrels.items() for did, score in docs.items() if did not in corpus}
    if missing:
        example = sorted(missing)[0][1]
        logger.warning(
            "%s: %d judged document(s) are not in corpus.jsonl (e.g. %r); they count as never retrieved",
            path,
            len(missing),
            example,
        )


def _check_instructions(
    qrels: dict[str, dict[str, int]], queries: dict[str, InstructionQuery], path: Path
) -> None:
    """With changed judgments, every judged query needs both instructions: an empty one would silently turn the
    og/changed comparison into a comparison with the bare query."""
    for qid in qrels:
        query = queries[qid]
        for field, value in (
            ("instruction_og", query.instruction_og),
            ("instruction_changed", query.instruction_changed),
        ):
            if value is None:
                raise DataError(
                    f"query {qid!r} has no {field}, but qrels_changed.tsv judges it", path, field=field
                )
            if not value.strip():
                raise DataError(
                    f"query {qid!r}: is empty, but qrels_changed.tsv judges it", path, field=field
                )


def save_benchmark(benchmark: Benchmark, path: str | Path) -> None:
    """Write a benchmark as an instruction benchmark dir (the inverse of :func:`load_instruction_benchmark`)."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    write_jsonl(
        root / "corpus.jsonl",
        ({"_id": d, "title": doc.title, "text": doc.text} for d, doc in benchmark.corpus.items()),
    )
    rows = []
    for qid, q in benchmark.queries.items():
        row = {"_id": qid, "text": q.text, "instruction_og": q.instruction_og}
        if q.instruction_changed is not None:
            row["instruction_changed"] = q.instruction_changed
        rows.append(row)
    write_jsonl(root / "queries.jsonl", rows)
    _write_qrels_tsv(root / "qrels_og.tsv", benchmark.qrels_og)
    if benchmark.qrels_changed is not None:
        _write_qrels_tsv(root / "qrels_changed.tsv", benchmark.qrels_changed)
    if benchmark.top_ranked is not None:
        write_jsonl(
            root / "top_ranked.jsonl",
            ({"query-id": q, "corpus-ids": ids} for q, ids in benchmark.top_ranked.items()),
        )
    if benchmark.excluded:
        write_jsonl(
            root / "excluded.jsonl",
            ({"query-id": q, "corpus-ids": ids} for q, ids in benchmark.excluded.items()),
        )
    if benchmark.changed_documents is not None:
        write_jsonl(
            root / "changed.jsonl",
            ({"query-id": q, "corpus-ids": ids} for q, ids in benchmark.changed_documents.items()),
        )
    else:  # a stale list from an earlier save would silently replace the recomputed changed documents
        (root / "changed.jsonl").unlink(missing_ok=True)
    meta = {"name": benchmark.name, "main_score": benchmark.main_score, "source": benchmark.source}
    if benchmark.main_score_source:
        meta["main_score_source"] = benchmark.main_score_source
    with atomic_write(root / "benchmark.json") as handle:
        json.dump(meta, handle)


def _write_qrels_tsv(path: Path, qrels: dict[str, dict[str, int]]) -> None:
    with atomic_write(path) as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in qrels.items():
            for did, score in docs.items():
                handle.write(f"{qid}\t{did}\t{score}\n")


def load_beir(path: str | Path, split: str = "test", name: str | None = None) -> Benchmark:
    """Read a BEIR dir (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) as a benchmark with no instructions
    (queries may carry an ``instruction`` field, used as the og instruction)."""
    root = Path(path)
    qrels_path = root / "qrels" / f"{split}.tsv"
    if not qrels_path.exists():
        raise DataError(
            f"missing qrels/{split}.tsv",
            root,
            hint="a BEIR dir holds corpus.jsonl, queries.jsonl, qrels/<split>.tsv",
        )
    corpus = read_corpus(root / "corpus.jsonl")
    queries = read_instruction_queries(root / "queries.jsonl")
    qrels = read_qrels_tsv(qrels_path)
    qrels = {q: d for q, d in qrels.items() if q in queries}
    _check_judgments(qrels, corpus, qrels_path)
    # As BEIR does: queries.jsonl holds every split's queries; evaluate only those judged in this split.
    queries = {q: query for q, query in queries.items() if q in qrels}
    if not queries:
        raise DataError(
            f"no query of queries.jsonl is judged in qrels/{split}.tsv", qrels_path, field="query-id"
        )
    return Benchmark(
        name=name or root.name,
        corpus=corpus,
        queries=queries,
        qrels_og=qrels,
        main_score="ndcg_at_10",
        source=str(root),
    )


def load_benchmark(spec: str | Path, **kwargs) -> Benchmark:
    """A benchmark from a local dir (instruction benchmark or BEIR) or a registered name (``followir/core17``,
    ``bright/biology``, ``mair/<task>`` ...; see :mod:`infembed.data.hub`)."""
    path = Path(spec)
    if path.exists():
        if (path / "qrels_og.tsv").exists():
            return load_instruction_benchmark(path)
        if (path / "qrels").is_dir():
            return load_beir(path, **kwargs)
        raise DataError(
            "not a benchmark dir (no qrels_og.tsv and no qrels/ folder)",
            path,
            hint="see docs/architecture.md for the layout",
        )
    from infembed.data import hub

    return hub.load_named_benchmark(str(spec), **kwargs)
