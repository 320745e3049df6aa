"""Latency of exclusion-aware search against plain search on the same index (docs/instructions.md).

    .venv/bin/python bench/exclusions.py                       # BM25 and flat MiniLM on Cranfield, 300 docs dense
    .venv/bin/python bench/exclusions.py --dense-docs 1400     # the whole collection for the dense index too

The queries are the 40 queries of followir-cranfield-excl with their changed instructions (every one excludes
something), searched one at a time (k=10), as a user of ``infembed search`` or the service would. For each index:
median and p95 latency of ``Index.search(..., exclusions="off")`` (the peer: plain search, the instruction
joined to the query) and ``exclusions="rules"``, alternating over ``--rounds``; the ratio is rules / off (cost
of splitting the instruction, scoring the excluded aspects and guards against the candidates). Data from
``$INFEMBED_DATA_DIR`` (never copied into the repository).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def timed(index, queries, instructions, mode: str) -> list[float]:
    out = []
    for q, i in zip(queries, instructions):
        start = time.perf_counter()
        index.search(q, i, k=10, exclusions=mode)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("INFEMBED_DATA_DIR", "../shared/data")))
    parser.add_argument("--dense-docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import torch

    from infembed.data.benchmarks import load_benchmark
    from infembed.search import Index

    torch.set_num_threads(1)
    bench = load_benchmark(args.data / "followir-cranfield-excl")
    qids = [q for q in bench.queries if q in bench.qrels_og]
    queries = [bench.queries[q].text for q in qids]
    instructions = [bench.queries[q].instruction_changed for q in qids]
    dense_corpus = dict(list(bench.corpus.items())[: args.dense_docs])
    with tempfile.TemporaryDirectory() as tmp:
        indexes = {
            f"bm25 ({len(bench.corpus)} docs)": Index.build(None, bench.corpus, Path(tmp) / "bm25", kind="bm25"),
            f"flat MiniLM ({len(dense_corpus)} docs)": Index.build("default", dense_corpus, Path(tmp) / "flat"),
        }
        print(f"{'index':28s} {'off p50 ms':>10s} {'rules p50 ms':>12s} {'off p95':>8s} {'rules p95':>9s} {'ratio':>6s}")
        for name, index in indexes.items():
            timed(index, queries[:3], instructions[:3], "rules")  # warm-up (model, caches)
            off, rules = [], []
            for _ in range(args.rounds):
                off += timed(index, queries, instructions, "off")
                rules += timed(index, queries, instructions, "rules")
            p50_off, p50_rules = statistics.median(off) * 1e3, statistics.median(rules) * 1e3
            p95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))] * 1e3  # noqa: E731
            print(f"{name:28s} {p50_off:10.1f} {p50_rules:12.1f} {p95(off):8.1f} {p95(rules):9.1f} "
                  f"{p50_rules / p50_off:6.2f}")


if __name__ == "__main__":
    main()
