"""Hard negatives mined with BM25 from the training rows' own passage pool (``--mined-negatives K``).

Every row's passages (P+, P1-, P2-) form the pool; for each row, the query is the anchor's text as search reads
it (``Q+`` and ``I+``), and the ``K`` best BM25 matches that are not the row's own passages (by text) become
extra P-negatives of the row's batch. InF-IR's own negatives are written to differ from P+ in one aspect; mined
ones are other rows' passages on a similar topic, the lexical near-misses a first-stage retriever returns. No
benchmark text is involved: the pool is the training data.

Mining is deterministic (BM25 scores, ties broken by pool order) and runs once per training run, before the
first step, in every process alike (the rows are the same in every rank).
"""

from __future__ import annotations

from collections.abc import Sequence

from infembed.data.records import Triplet


def row_passages(row: Triplet) -> tuple[str, str, str]:
    return (row.document_positive, row.hard_negative_document_1, row.hard_negative_document_2)


def mine_negatives(rows: Sequence[Triplet], k: int) -> list[list[str]]:
    """Per row, up to ``k`` passages of *other* rows that BM25 ranks highest for ``Q+ I+`` (none equal to one
    of the row's own passages, no duplicates). ``k = 0`` gives empty lists."""
    if k <= 0 or not rows:
        return [[] for _ in rows]
    from infembed.search.bm25 import BM25

    pool = list(dict.fromkeys(text for row in rows for text in row_passages(row) if text))
    bm25 = BM25().index(pool)
    queries = [f"{row.query_positive} {row.instruction_positive}" for row in rows]
    # enough candidates to skip the row's own three passages and still find k
    _, found = bm25.top_k(queries, k + 3)
    mined = []
    for row, candidates in zip(rows, found):
        own = set(row_passages(row))
        picked = [pool[j] for j in candidates if j >= 0 and pool[j] not in own][:k]
        mined.append(picked)
    return mined
