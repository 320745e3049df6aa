"""Training recipe study (issue 22): which data, objective and schedule move instruction following.

Each recipe trains the packaged MiniLM (or another backbone) with ``infembed train`` and is evaluated on both
Cranfield dev benchmarks, with exclusions off and with ``--exclusions auto`` (the recommended splitter), plus
an in-domain check on held-out InF-IR rows: every tenth row of each training set is kept out of training, and
the check is the share of held-out (instruction, query) pairs that rank their own passage first among the row's
three passages (P+, P1-, P2-), for (I+, Q+), (I-, Q+) and (I+, Q-). The base model is the first row.

Recipes (``--recipes NAME ...``; each a TrainConfig on top of the demo's: multi {P,I}, batch 16, lr 5e-5):

    default        sample, 2 epochs                          (the demo's recipe)
    more           sample + more
    neg            sample + negation
    neg-excl       sample + negation, --exclusion-training auto
    all            sample + more + negation
    all-excl       sample + more + negation, --exclusion-training auto
    all-excl-a3    as all-excl with --exclusion-alpha 3
    all-3ep        sample + more + negation, 3 epochs
    all-excl-lr2   as all-excl with lr 2e-5

Each finished (recipe, seed) leaves ``eval.json`` in its run dir and is skipped when the script runs again (an
interrupted study resumes). Prints one table (x100; mean ± std over seeds) and writes ``--results``.

    python bench/recipes.py --recipes default all all-excl --seeds 42
    python bench/recipes.py --recipes default all-excl --seeds 42 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

BENCHMARKS = ("followir-cranfield", "followir-cranfield-excl")
SPLITTERS = ("off", "auto")
DATA = {
    "sample": ["inf-ir-msmarco-sample"],
    "more": ["inf-ir-msmarco-sample", "inf-ir-msmarco-more"],
    "neg": ["inf-ir-msmarco-sample", "inf-ir-msmarco-negation"],
    "all": ["inf-ir-msmarco-sample", "inf-ir-msmarco-more", "inf-ir-msmarco-negation"],
}
RECIPES: dict[str, dict] = {
    "default": {"data": "sample"},
    "more": {"data": "more"},
    "neg": {"data": "neg"},
    "neg-excl": {"data": "neg", "exclusion_training": "auto"},
    "all": {"data": "all"},
    "all-excl": {"data": "all", "exclusion_training": "auto"},
    "all-excl-a3": {"data": "all", "exclusion_training": "auto", "exclusion_alpha": 3.0},
    "all-3ep": {"data": "all", "epochs": 3.0},
    "all-excl-lr2": {"data": "all", "exclusion_training": "auto", "learning_rate": 2e-5},
}


def split_rows(root: Path, names: list[str], out: Path) -> tuple[Path, list]:
    """Write the training rows (every row but each tenth of each set) to ``out``; return it and the held-out."""
    from infembed.data.inf_ir import read_triplets, write_triplets

    train, held = [], []
    for name in names:
        for k, row in enumerate(read_triplets(root / name)):
            (held if k % 10 == 9 else train).append(row)
    if not out.exists():
        write_triplets(out, train)
    return out, held


def in_domain(model, rows) -> float:
    """Share of held-out (instruction, query) pairs whose own passage ranks first among the row's three."""
    import numpy as np

    if not rows:
        return float("nan")
    wins = total = 0
    for row in rows:
        passages = [row.document_positive, row.hard_negative_document_1, row.hard_negative_document_2]
        p = model.encode_passages(passages)
        pairs = [(row.query_positive, row.instruction_positive), (row.query_positive, row.instruction_negative),
                 (row.query_negative, row.instruction_positive)]  # fmt: skip
        q = model.encode_queries([a for a, _ in pairs], [b for _, b in pairs])
        best = np.argmax(q @ p.T, axis=1)
        wins += int((best == np.arange(3)).sum())
        total += 3
    return wins / total


def summarise(values: list[float]) -> str:
    mean = 100 * statistics.fmean(values)
    return f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ± {100 * statistics.stdev(values):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--model", default="default", help="backbone (default: the packaged MiniLM)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--output", default="runs/bench-recipes")
    parser.add_argument("--results", default="bench/results/recipes.json")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    from infembed.data.benchmarks import load_benchmark
    from infembed.data.jsonl import write_json
    from infembed.evaluate.retrievers import DenseRetriever
    from infembed.evaluate.runner import evaluate
    from infembed.model import InFEmbed
    from infembed.train.config import TrainConfig
    from infembed.train.trainer import train

    root, output = Path(args.data_dir), Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    benches = [load_benchmark(root / name) for name in BENCHMARKS]
    console = Console(width=140)
    _, held_all = split_rows(root, DATA["all"], output / "rows-all.jsonl")

    def evaluated(path: Path, model_path: str, seconds: float) -> dict:
        cached = path / "eval.json"
        if cached.exists():
            return json.loads(cached.read_text())
        model = InFEmbed.load(model_path)
        entry: dict = {"train_seconds": round(seconds, 1), "in_domain": in_domain(model, held_all)}
        for bench in benches:
            for splitter in SPLITTERS:
                result = evaluate(bench, DenseRetriever(model, show_progress=False, exclusions=splitter))
                entry[f"{bench.name}/{splitter}"] = {"p-MRR": result["p-MRR"], "score": result["score"]}
        write_json(cached, entry)
        return entry

    rows = [{"recipe": "base", "runs": [evaluated(output / "base", args.model, 0.0)]}]
    for name in args.recipes:
        recipe = dict(RECIPES[name])
        data_file, _ = split_rows(root, DATA[recipe.pop("data")], output / f"rows-{RECIPES[name]['data']}.jsonl")
        runs = []
        for seed in args.seeds:
            out = output / f"{name}_s{seed}"
            seconds = 0.0
            if not (out / "eval.json").exists():
                start = time.perf_counter()
                settings = {"epochs": 2.0, "learning_rate": 5e-5} | recipe
                train(TrainConfig(data=[str(data_file)], model=args.model, objective="multi", negatives="P,I",
                                  batch_size=16, seed=seed, output=str(out), **settings), resume=True)  # fmt: skip
                seconds = time.perf_counter() - start
            runs.append(evaluated(out, str(out), seconds) | {"seed": seed})
            console.print({"recipe": name, **runs[-1]})
        rows.append({"recipe": name, "settings": RECIPES[name], "runs": runs})

    table = Table(title=f"Recipes on Cranfield dev (x100), {args.model}, seeds {' '.join(map(str, args.seeds))}")
    columns = [(f"{b}/{s}", k) for b in BENCHMARKS for s in SPLITTERS for k in ("p-MRR", "score")]
    table.add_column("recipe")
    for bench, key in columns:
        short = bench.replace("followir-cranfield", "cf").replace("/", " ")
        table.add_column(f"{short} {'pMRR' if key == 'p-MRR' else 'MAP'}", justify="right")
    table.add_column("held-out", justify="right")
    table.add_column("train s", justify="right")
    for row in rows:
        runs = row["runs"]
        row["mean"] = {f"{b}|{k}": statistics.fmean(r[b][k] for r in runs) for b, k in columns}
        table.add_row(
            row["recipe"],
            *[summarise([r[b][k] for r in runs]) for b, k in columns],
            summarise([r["in_domain"] for r in runs]),
            f"{statistics.fmean(r['train_seconds'] for r in runs):.0f}",
        )
    console.print(table)
    write_json(Path(args.results), {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
