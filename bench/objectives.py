"""Objective ablation (the paper's Table 3) on the Cranfield dev benchmarks.

Trains the default MiniLM once per objective setting on the shared InF-IR sample and evaluates base and trained
models on followir-cranfield and followir-cranfield-excl; prints one table (p-MRR and og MAP@1000, x100) and
writes bench/results/objectives.json. The peer row is the base model; the paper's claim to check is that the
multivariate (P, I) objective is the best.

    python bench/objectives.py                       # all Table-3 settings, full sample, 2 epochs (~2 h on 2 cores)
    python bench/objectives.py --limit 160 --epochs 1 --settings multi:P,I uni:P
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

# Table 3: (objective, negatives, interaction)
TABLE3 = [
    ("uni", "P", "concat"),
    ("uni", "P,I", "concat"),
    ("uni", "I,IQ", "concat"),
    ("uni", "P,I,IQ", "concat"),
    ("multi", "P,I", "concat"),
    ("multi", "P,IQ", "concat"),
    ("multi", "I,IQ", "concat"),
    ("multi", "P,I,IQ", "concat"),
    ("multi", "P,I", "cross_attention"),
]


def parse_setting(text: str) -> tuple[str, str, str]:
    interaction = "concat"
    if text.endswith("@attn"):
        text, interaction = text[: -len("@attn")], "cross_attention"
    objective, negatives = text.split(":")
    return objective, negatives, interaction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    parser.add_argument("--settings", nargs="*", help="e.g. multi:P,I uni:P multi:P,I@attn (default: Table 3)")
    parser.add_argument("--limit", type=int, default=None, help="training rows")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--output", default="runs/bench-objectives")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    from infembed.data.formats import load_benchmark
    from infembed.data.jsonl import write_json
    from infembed.evaluate.retrievers import DenseRetriever
    from infembed.evaluate.runner import evaluate
    from infembed.model import InFEmbed
    from infembed.train.config import TrainConfig
    from infembed.train.trainer import train

    root = Path(args.data_dir)
    benches = [load_benchmark(root / name) for name in ("followir-cranfield", "followir-cranfield-excl")]
    settings = [parse_setting(s) for s in args.settings] if args.settings else TABLE3
    rows = []

    def run_eval(label: str, model: InFEmbed, seconds: float) -> None:
        entry = {"setting": label, "train_seconds": round(seconds, 1)}
        for bench in benches:
            result = evaluate(bench, DenseRetriever(model, show_progress=False))
            entry[bench.name] = {"p-MRR": result["p-MRR"], "score": result["score"]}
        rows.append(entry)
        Console().print(entry)

    run_eval("base", InFEmbed.load(None), 0.0)
    for objective, negatives, interaction in settings:
        label = f"{objective} {{{negatives}}}" + (" attn" if interaction != "concat" else "")
        out = Path(args.output) / f"{objective}_{negatives.replace(',', '')}_{interaction}"
        config = TrainConfig(
            data=[str(root / "inf-ir-msmarco-sample")], limit=args.limit, objective=objective, negatives=negatives,
            interaction=interaction, epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.lr,
            seed=args.seed, output=str(out),
        )
        start = time.perf_counter()
        train(config, resume=False)
        run_eval(label, InFEmbed.load(str(out)), time.perf_counter() - start)

    table = Table(title="Objective ablation on Cranfield dev (x100), MiniLM, InF-IR sample")
    for name in ("setting", "p-MRR", "MAP@1000", "p-MRR excl", "train s"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    for entry in rows:
        base, excl = entry[benches[0].name], entry[benches[1].name]
        table.add_row(entry["setting"], f"{100 * base['p-MRR']:.1f}", f"{100 * base['score']:.1f}",
                      f"{100 * excl['p-MRR']:.1f}", f"{entry['train_seconds']:.0f}")
    Console(width=120).print(table)
    write_json(Path("bench/results/objectives.json"), {"args": vars(args), "rows": rows})
    print(json.dumps({"best_p_mrr": max(rows[1:], key=lambda r: r[benches[0].name]["p-MRR"])["setting"]} if len(rows) > 1 else {}))


if __name__ == "__main__":
    main()
