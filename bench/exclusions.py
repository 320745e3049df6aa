"""Latency of exclusion-aware search against plain search on the same index, and of the learned decomposer
(docs/instructions.md).

    .venv/bin/python bench/exclusions.py                       # BM25 and flat MiniLM on Cranfield, 300 docs dense
    .venv/bin/python bench/exclusions.py --dense-docs 1400     # the whole collection for the dense index too

The queries are the 40 queries of followir-cranfield-excl with their changed instructions (every one excludes
something), searched one at a time (k=10), as a user of ``infembed search`` or the service would. For each index:
median and p95 latency of ``Index.search(..., exclusions="off")`` (the peer: plain search, the instruction
joined to the query), ``"rules"`` and ``"auto"`` (the default: the learned decomposer), alternating over
``--rounds``; the ratios are each over off (cost of splitting the instruction, scoring the excluded aspects and
guards against the candidates; a split is cached per instruction text, as in search and serve, so after the
first round the split is a cache hit). First, the decomposer alone: p50/p95 of one instruction uncached (its
cache emptied before each) and cached. Data from ``$INFEMBED_DATA_DIR`` (never copied into the repository).
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
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from infembed.data.benchmarks import load_benchmark
    from infembed.search import Index

    torch.set_num_threads(args.threads)
    bench = load_benchmark(args.data / "followir-cranfield-excl")
    qids = [q for q in bench.queries if q in bench.qrels_og]
    queries = [bench.queries[q].text for q in qids]
    instructions = [bench.queries[q].instruction_changed for q in qids]
    dense_corpus = dict(list(bench.corpus.items())[: args.dense_docs])
    p95 = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))] * 1e3  # noqa: E731
    from decomposer import time_decomposer  # bench/decomposer.py, beside this script

    from infembed.instructions.split import shipped_decomposer

    texts = [bench.queries[q].instruction_og for q in qids] + instructions
    decomposer = shipped_decomposer()
    runtime = "torch" if decomposer.runtime is None else "openvino"
    uncached, cached = time_decomposer({runtime: decomposer}, texts)[runtime]
    print(f"decomposer ({runtime}), {len(texts)} Cranfield instructions, {args.threads} threads: uncached p50 "
          f"{statistics.median(uncached) * 1e3:.1f} ms, p95 {p95(uncached):.1f} ms; cached p50 "
          f"{statistics.median(cached) * 1e6:.1f} us, p95 {p95(cached) * 1e3:.1f} us\n")
    with tempfile.TemporaryDirectory() as tmp:
        indexes = {
            f"bm25 ({len(bench.corpus)} docs)": Index.build(None, bench.corpus, Path(tmp) / "bm25", kind="bm25"),
            f"flat MiniLM ({len(dense_corpus)} docs)": Index.build("default", dense_corpus, Path(tmp) / "flat"),
        }
        modes = ("off", "rules", "auto")
        print(f"{'index':28s} " + " ".join(f"{m + ' p50':>9s} {m + ' p95':>9s}" for m in modes)
              + f" {'rules/off':>9s} {'auto/off':>9s}")
        for name, index in indexes.items():
            for mode in modes[1:]:
                timed(index, queries[:3], instructions[:3], mode)  # warm-up (model, caches)
            times: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(args.rounds):
                for mode in modes:
                    times[mode] += timed(index, queries, instructions, mode)
            p50 = {m: statistics.median(times[m]) * 1e3 for m in modes}
            print(f"{name:28s} " + " ".join(f"{p50[m]:9.1f} {p95(times[m]):9.1f}" for m in modes)
                  + f" {p50['rules'] / p50['off']:9.2f} {p50['auto'] / p50['off']:9.2f}")


if __name__ == "__main__":
    main()
