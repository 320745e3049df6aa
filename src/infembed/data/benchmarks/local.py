"""Local benchmark dirs: the instruction benchmark dir (FollowIR style, docs/architecture.md) and the BEIR dir,
read into a :class:`~infembed.data.records.Benchmark` and written back (:func:`save_benchmark`).

Each file of a dir is read by its one reader in :mod:`infembed.data.formats`; this module checks that the
files agree (judged queries exist, something is relevant, changed judgments have both instructions).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from infembed.data.benchmarks.registry import VALID_METRICS, is_metric_name
from infembed.data.errors import DataError
from infembed.data.formats import (
    iter_id_lists,
    read_corpus,
    read_id_lists,
    read_instruction_queries,
    read_qrels_tsv,
    write_corpus,
    write_id_lists,
    write_instruction_queries,
    write_qrels_tsv,
)
from infembed.data.jsonl import atomic_write, ensure_dir, json_error_reason
from infembed.data.records import Benchmark, Document, InstructionQuery

logger = logging.getLogger(__name__)


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
    top_ranked = _read_candidates(tfile, corpus) if tfile.exists() else None
    excluded = read_id_lists(root / "excluded.jsonl") if (root / "excluded.jsonl").exists() else None
    # the data set's own changed documents (FollowIR's qrel_diff), kept when a hub benchmark is saved
    changed = read_id_lists(root / "changed.jsonl") if (root / "changed.jsonl").exists() else None
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
        if not is_metric_name(main_score):  # else the headline score is NaN
            raise DataError(
                f"{main_score!r} is not a metric infembed computes; valid: {VALID_METRICS}",
                meta_path,
                field="main_score",
            )
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


def _read_candidates(path: Path, corpus: dict[str, Document]) -> dict[str, list[str]]:
    """``top_ranked.jsonl``: every candidate must be a document of the corpus. mteb fails on an unknown one (a
    KeyError); dropping it would silently score a shorter list than the benchmark's."""
    lists: dict[str, list[str]] = {}
    for line, qid, ids in iter_id_lists(path):
        unknown = [d for d in ids if d not in corpus]
        if unknown:
            more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise DataError(
                f"query {qid!r}: candidate {unknown[0]!r}{more} is not in corpus.jsonl",
                path,
                line,
                "corpus-ids",
            )
        lists[qid] = ids
    return lists


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


def save_benchmark(benchmark: Benchmark, path: str | Path) -> None:
    """Write a benchmark as an instruction benchmark dir (the inverse of :func:`load_instruction_benchmark`),
    e.g. to freeze a hub benchmark for offline use."""
    root = Path(path)
    ensure_dir(root)
    write_corpus(root / "corpus.jsonl", benchmark.corpus)
    write_instruction_queries(root / "queries.jsonl", benchmark.queries)
    write_qrels_tsv(root / "qrels_og.tsv", benchmark.qrels_og)
    if benchmark.qrels_changed is not None:
        write_qrels_tsv(root / "qrels_changed.tsv", benchmark.qrels_changed)
    if benchmark.top_ranked is not None:
        write_id_lists(root / "top_ranked.jsonl", benchmark.top_ranked)
    if benchmark.excluded:
        write_id_lists(root / "excluded.jsonl", benchmark.excluded)
    if benchmark.changed_documents is not None:
        write_id_lists(root / "changed.jsonl", benchmark.changed_documents)
    else:  # a stale list from an earlier save would silently replace the recomputed changed documents
        (root / "changed.jsonl").unlink(missing_ok=True)
    meta = {"name": benchmark.name, "main_score": benchmark.main_score, "source": benchmark.source}
    if benchmark.main_score_source:
        meta["main_score_source"] = benchmark.main_score_source
    with atomic_write(root / "benchmark.json") as handle:
        json.dump(meta, handle)
