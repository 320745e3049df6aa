"""Milvus (flat, through MilvusClient on Milvus Lite) vs faiss flat on Cranfield: the same rankings, and what the
store costs at build and search time, in the same run.

    .venv/bin/python bench/search_milvus.py                         # ~5 min on 2 CPU cores (the encoding)
    .venv/bin/python bench/search_milvus.py --work /tmp/cran-bench  # keep the encoded shards for a rerun

Both indexes hold the same shards (the packaged MiniLM encodes the 1,400 passages once; the Milvus build resumes
from the faiss build's shards), so the build figures compare the store only: faiss assembles and writes
vectors.faiss, Milvus upserts vectors and documents into a collection. Search: the 40 queries of
followir-cranfield with their changed instructions, top 100, plain (one search_vectors call, no documents) and
through Index.search with exclusions off and on (documents fetched, the exclusion search reads candidate
vectors back from the store). Equality: ids rank by rank, max |score difference|, and the near-ties that explain
any swapped pair. Ratio = Milvus time / faiss time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def timed(function, repeat: int = 3):
    """(best seconds of ``repeat`` calls, the last result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        default=os.path.join(os.environ.get("INFEMBED_DATA_DIR", "../shared/data"), "followir-cranfield"),
    )
    parser.add_argument(
        "--work", default=None, help="Work dir (default: a temporary one, removed at the end)."
    )
    parser.add_argument("-k", type=int, default=100)
    args = parser.parse_args()

    from infembed.data.benchmarks import load_benchmark
    from infembed.model import InFEmbed
    from infembed.search import Index
    from infembed.search.store import FAISS_NAME, META_NAME

    work = Path(args.work or tempfile.mkdtemp(prefix="milvus-bench-"))
    model = InFEmbed.load(None, device="cpu")
    bench = load_benchmark(args.data)
    started = time.perf_counter()
    faiss_index = Index.build(model, bench.corpus, work / "faiss", batch_size=64)
    print(f"encoding + faiss build: {time.perf_counter() - started:.1f} s ({len(bench.corpus)} passages)")
    # the store alone: rebuild both from the same shards
    faiss_build, faiss_index = timed(lambda: Index.build(model, bench.corpus, work / "faiss"), repeat=1)
    milvus_root = work / "milvus"
    shutil.rmtree(milvus_root, ignore_errors=True)
    shutil.copytree(work / "faiss", milvus_root, ignore=shutil.ignore_patterns(FAISS_NAME, META_NAME))
    uri = work / "milvus.db"
    shutil.rmtree(uri, ignore_errors=True)
    milvus_build, milvus_index = timed(
        lambda: Index.build(
            model, bench.corpus, milvus_root, store="milvus", uri=str(uri), collection="cranfield"
        ),
        repeat=1,
    )
    print(
        f"store build: faiss {faiss_build:.2f} s, milvus {milvus_build:.2f} s "
        f"(ratio {milvus_build / faiss_build:.1f})"
    )

    queries = [q.text for q in bench.queries.values()]
    instructions = [q.instruction_changed for q in bench.queries.values()]
    vectors = model.encode_queries(queries, instructions)
    f_time, (f_scores, f_rows) = timed(lambda: faiss_index.search_vectors(vectors, args.k))
    m_time, (m_scores, m_rows) = timed(lambda: milvus_index.search_vectors(vectors, args.k))
    differ = np.argwhere(f_rows != m_rows)
    print(
        f"search_vectors, {len(queries)} queries, k={args.k}: faiss {f_time * 1e3:.1f} ms, milvus "
        f"{m_time * 1e3:.1f} ms (ratio {m_time / f_time:.1f}); ids equal at {f_rows.size - len(differ)}/"
        f"{f_rows.size} positions; max |score diff| {np.abs(f_scores - m_scores).max():.2e}"
    )
    for q, j in differ:
        print(
            f"  query {q} rank {j + 1}: faiss row {f_rows[q, j]} ({f_scores[q, j]:.8f}), milvus row "
            f"{m_rows[q, j]} ({m_scores[q, j]:.8f})"
        )
    for exclusions in ("off", "rules"):
        f_time, f_hits = timed(
            lambda e=exclusions: faiss_index.search(queries, instructions, k=args.k, exclusions=e)
        )
        m_time, m_hits = timed(
            lambda e=exclusions: milvus_index.search(queries, instructions, k=args.k, exclusions=e)
        )
        same = sum(a.id == b.id for fa, ma in zip(f_hits, m_hits) for a, b in zip(fa, ma))
        total = sum(len(row) for row in f_hits)
        gap = max(abs(a.score - b.score) for fa, ma in zip(f_hits, m_hits) for a, b in zip(fa, ma))
        print(
            f"Index.search exclusions={exclusions}: faiss {f_time:.2f} s, milvus {m_time:.2f} s "
            f"(ratio {m_time / f_time:.1f}; includes query encoding); ids equal at {same}/{total} positions; "
            f"max |score diff| {gap:.2e}"
        )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
