"""How well each splitter finds excluded aspects, on tables it was not trained on, and how fast (docs/instructions.md).

    .venv/bin/python bench/decomposer.py                 # every table, rules vs auto (the shipped decomposer), + latency
    .venv/bin/python bench/decomposer.py --tables bench/decomposer-blind/table-19.jsonl --misses --no-latency
    .venv/bin/infembed decomposer train --holdout writer-C --output runs/decomposer-no-c   # another one, by path:
    .venv/bin/python bench/decomposer.py --decomposer runs/decomposer-no-c --tables data/decomposer/writer-c.jsonl

Tables: the phrasing tables of tests/instructions (the independent one, the implementer's, blind 1-5: written
for and used to tune the rules splitter, never seen by the learned decomposer) and JSONL tables
(``{"text", "aspects"}`` per line; ``aspects: []`` for a plain instruction): by default
``bench/decomposer-blind/*.jsonl``, tables written blind after a shipped decomposer was frozen (``retired/`` holds
the first six, since trained on: ``--tables bench/decomposer-blind/retired/*.jsonl`` to score them). Metric:
infembed.instructions.scoring (recall, precision, plain instructions split). Then the decomposer's latency (the
shipped one, or ``--decomposer``'s): one instruction at a time, uncached (a fresh cache per text) and cached,
p50/p95 over the tables' instructions on ``--threads`` threads, on OpenVINO (the default where it is installed)
and on torch (its peer), taking turns on each text; the ratio of the two.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]


def python_tables() -> dict[str, tuple[list[tuple[str, list[str]]], list[str]]]:
    sys.path.insert(0, str(ROOT / "tests" / "instructions"))
    import phrasings
    import phrasings_blind as blind

    tables = {
        "independent": (
            [(c.instruction, list(c.exclude)) for c in phrasings.POSITIVE],
            list(phrasings.NEGATIVE),
        ),
        "implementer": ([(t, list(e)) for t, e, _ in phrasings.EXCLUDING], list(phrasings.PLAIN)),
    }
    for n in range(1, 6):
        tables[f"blind-{n}"] = (
            [(t, list(a)) for t, a in getattr(blind, f"BLIND_{n}_POSITIVE")],
            list(getattr(blind, f"BLIND_{n}_PLAIN")),
        )
    return tables


def jsonl_table(path: Path, source: str | None = None) -> tuple[list[tuple[str, list[str]]], list[str]]:
    excluding, plain = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if source and row.get("writer", row.get("source")) != source:
                continue
            (excluding.append((row["text"], row["aspects"])) if row["aspects"] else plain.append(row["text"]))
    return excluding, plain


def time_decomposer(
    decomposers: dict[str, object], texts: list[str]
) -> dict[str, tuple[list[float], list[float]]]:
    """Seconds per instruction of each decomposer, one instruction at a time: uncached (its cache entry removed
    first), then cached. The decomposers take turns on each text, so a machine that slows down slows them alike."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in decomposers}
    for decomposer in decomposers.values():
        decomposer.batch(texts[:4])  # warm up
    for text in texts:
        for name, decomposer in decomposers.items():
            uncached, cached = times[name]
            decomposer._cache.pop(text.strip(), None)
            start = time.perf_counter()
            decomposer(text)
            uncached.append(time.perf_counter() - start)
            start = time.perf_counter()
            decomposer(text)
            cached.append(time.perf_counter() - start)
    return times


def runtimes(directory: Path) -> dict[str, object]:
    """The decomposer in ``directory`` on each runtime this machine has: OpenVINO (the default where the openvino
    extra is installed) and torch, its peer."""
    from infembed.instructions.decomposer import Decomposer

    try:
        import openvino  # noqa: F401

        names = ["openvino", "torch"]
    except ImportError:
        names = ["torch"]
    return {name: Decomposer(directory, runtime=name) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tables",
        type=Path,
        nargs="*",
        default=None,
        help="JSONL tables (default: the Python tables and bench/decomposer-blind/*.jsonl)",
    )
    parser.add_argument(
        "--decomposer", type=Path, help="a learned decomposer dir (infembed decomposer train)"
    )
    parser.add_argument(
        "--splitters",
        nargs="+",
        default=None,
        help="default: rules and auto, and learned with --decomposer (auto is always the shipped decomposer with the "
        "rules as its fallback; learned is --decomposer's model alone)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--misses", action="store_true", help="print every miss")
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    parser.add_argument(
        "--no-latency",
        action="store_true",
        help="scores only (the latency pass times every text twice per backend)",
    )
    args = parser.parse_args()
    if "learned" in (args.splitters or []) and not args.decomposer:
        parser.error("--splitters learned needs --decomposer DIR (the model scored alone)")

    import torch

    from infembed.instructions import split_instruction
    from infembed.instructions.decomposer import Decomposer
    from infembed.instructions.scoring import score_table

    torch.set_num_threads(args.threads)

    learned = Decomposer(args.decomposer) if args.decomposer else None
    args.splitters = args.splitters or ["rules", "auto"] + (["learned"] if learned else [])
    split = {
        name: (learned if name == "learned" else (lambda t, s=name: split_instruction(t, s)))
        for name in args.splitters
    }
    tables = {} if args.tables else python_tables()
    for path in args.tables or sorted((ROOT / "bench" / "decomposer-blind").glob("*.jsonl")):
        tables[path.stem] = jsonl_table(path)
    figures: dict[str, dict[str, object]] = {}
    print(
        f"{'table':22s} {'size':>9s}  "
        + "  ".join(f"{s + ' R / P / plain split':>26s}" for s in args.splitters)
    )
    for name, (excluding, plain) in tables.items():
        cells = []
        for splitter in args.splitters:
            r = score_table(split[splitter], excluding, plain)
            figures.setdefault(name, {})[splitter] = {k: v for k, v in r.items() if k != "misses"}
            cells.append(f"{r['recall']:.3f} / {r['precision']:.3f} / {r['false_exclusions']:>2d}")
            if args.misses:
                print(f"  {splitter} misses on {name}:\n    " + "\n    ".join(r["misses"]))
        print(f"{name:22s} {len(excluding):>4d}+{len(plain):<4d}  " + "  ".join(f"{c:>26s}" for c in cells))
    if args.no_latency:
        if args.json:
            args.json.write_text(json.dumps({"tables": figures, "latency": None}, indent=2) + "\n")
        return
    texts = [t for excluding, plain in tables.values() for t in [e for e, _ in excluding] + plain]
    from infembed.instructions.split import SHIPPED_DECOMPOSER

    times = time_decomposer(runtimes(args.decomposer or SHIPPED_DECOMPOSER), texts)

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) > 1 else values[0] * 1000

    latency = {"texts": len(texts), "threads": args.threads}
    print(
        f"\n{'learned' if learned else 'shipped'} decomposer, {len(texts)} instructions one at a time, {args.threads} threads"
    )
    for name, (uncached, cached) in times.items():
        latency[name] = {
            "uncached_p50_ms": pct(uncached, 50),
            "uncached_p95_ms": pct(uncached, 95),
            "cached_p50_ms": pct(cached, 50),
            "cached_p95_ms": pct(cached, 95),
        }
        row = latency[name]
        print(
            f"  {name:9s} uncached p50 {row['uncached_p50_ms']:.1f} ms, p95 {row['uncached_p95_ms']:.1f} ms; "
            f"cached p50 {row['cached_p50_ms'] * 1000:.1f} us, p95 {row['cached_p95_ms'] * 1000:.1f} us"
        )
    if "openvino" in times:
        ratio = latency["torch"]["uncached_p50_ms"] / latency["openvino"]["uncached_p50_ms"]
        latency["openvino_speedup_over_torch"] = ratio
        print(f"  openvino is {ratio:.2f}x torch (uncached p50, interleaved in the same run)")
    if args.json:
        args.json.write_text(json.dumps({"tables": figures, "latency": latency}, indent=2) + "\n")


if __name__ == "__main__":
    main()
