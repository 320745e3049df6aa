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
    mined          sample, 2 BM25-mined negatives per row (--mined-negatives 2)
    neg-mined      sample + negation, mined negatives
    neg-excl-mined sample + negation, --exclusion-training auto, mined negatives
    all-excl-mined sample + more + negation, --exclusion-training auto, mined negatives
    default-4ep    sample, 4 epochs          default-lr1e4   sample, lr 1e-4
    neg-excl-4ep   as neg-excl, 4 epochs     neg-excl-lr1e4  as neg-excl, lr 1e-4
    all-excl-b32   as all-excl, batch 32     all-excl-iq     as all-excl, negatives P,I,IQ
    all-excl-uni   as all-excl, objective uni
    all-mined-4ep  sample + more + negation, mined negatives, 4 epochs
    default-xin3 / all-xin3   3 extra in-batch instructions per anchor as I-negatives
    default-t02 / default-t10 temperature 0.02 / 0.1      default-lr2e4   lr 2e-4
    all-lr1e4-4ep  all rows, lr 1e-4, 4 epochs            default-negI    negatives I,IQ (no P)
    all-excl-xin3-lr1e4       all-excl, 3 extra I-negatives, lr 1e-4
    default-lr1e4-8ep         sample, lr 1e-4, 8 epochs

``--finalists N`` screens every recipe with the first seed, then runs the other seeds for the N recipes closest
to issue 22's bar (the smallest shortfall among: plain p-MRR off base + 5, with auto base + 3, og MAP base + 2).
``--budget S`` starts no new run after S seconds (for a lent GPU; with finalists the screen stops at two thirds
of it); results are written after every run.

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
    "mined": {"data": "sample", "mined_negatives": 2},
    "neg-mined": {"data": "neg", "mined_negatives": 2},
    "neg-excl-mined": {"data": "neg", "exclusion_training": "auto", "mined_negatives": 2},
    "all-excl-mined": {"data": "all", "exclusion_training": "auto", "mined_negatives": 2},
    "default-4ep": {"data": "sample", "epochs": 4.0},
    "default-lr1e4": {"data": "sample", "learning_rate": 1e-4},
    "neg-excl-4ep": {"data": "neg", "exclusion_training": "auto", "epochs": 4.0},
    "neg-excl-lr1e4": {"data": "neg", "exclusion_training": "auto", "learning_rate": 1e-4},
    "all-excl-b32": {"data": "all", "exclusion_training": "auto", "batch_size": 32},
    "all-excl-iq": {"data": "all", "exclusion_training": "auto", "negatives": "P,I,IQ"},
    "all-excl-uni": {"data": "all", "exclusion_training": "auto", "objective": "uni"},
    "all-mined-4ep": {"data": "all", "mined_negatives": 2, "epochs": 4.0},
    "default-xin3": {"data": "sample", "extra_instruction_negatives": 3},
    "all-xin3": {"data": "all", "extra_instruction_negatives": 3},
    "default-t02": {"data": "sample", "temperature": 0.02},
    "default-t10": {"data": "sample", "temperature": 0.1},
    "default-lr2e4": {"data": "sample", "learning_rate": 2e-4},
    "all-lr1e4-4ep": {"data": "all", "learning_rate": 1e-4, "epochs": 4.0},
    "default-negI": {"data": "sample", "negatives": "I,IQ"},
    "all-excl-xin3-lr1e4": {"data": "all", "exclusion_training": "auto", "extra_instruction_negatives": 3, "learning_rate": 1e-4},
    "default-lr1e4-8ep": {"data": "sample", "learning_rate": 1e-4, "epochs": 8.0},
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


def shortfall(mean: dict, base: dict) -> float:
    """How far a recipe is from issue 22's bar, in points (<= 0: it passes the three training bars)."""

    def gain(key: str) -> float:
        return 100 * (mean[key] - base[key])

    return max(5 - gain("followir-cranfield/off|p-MRR"), 3 - gain("followir-cranfield/auto|p-MRR"),
               2 - gain("followir-cranfield/off|score"))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", default=os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--model", default="default", help="backbone (default: the packaged MiniLM)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument(
        "--finalists",
        type=int,
        default=0,
        help="screen with the first seed, then run the other seeds for this many",
    )
    parser.add_argument(
        "--budget", type=float, default=0, help="start no run after this many seconds (0: no limit)"
    )
    parser.add_argument("--max-steps", type=int, default=None, help="cap every training run (smoke tests)")
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

    began = time.perf_counter()
    root, output = Path(args.data_dir), Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    benches = [load_benchmark(root / name) for name in BENCHMARKS]
    console = Console(width=160)
    _, held_all = split_rows(root, DATA["all"], output / "rows-all.jsonl")
    columns = [(f"{b}/{s}", k) for b in BENCHMARKS for s in SPLITTERS for k in ("p-MRR", "score")]

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
        path.mkdir(parents=True, exist_ok=True)
        write_json(cached, entry)
        return entry

    def run(name: str, seed: int, budget: float) -> dict | None:
        out = output / f"{name}_s{seed}"
        if budget and time.perf_counter() - began > budget and not (out / "eval.json").exists():
            console.print(f"budget spent: {name} seed {seed} not run")
            return None
        recipe = dict(RECIPES[name])
        data_file, _ = split_rows(
            root, DATA[recipe.pop("data")], output / f"rows-{RECIPES[name]['data']}.jsonl"
        )
        seconds = 0.0
        if not (out / "eval.json").exists():
            start = time.perf_counter()
            settings = {"epochs": 2.0, "learning_rate": 5e-5, "batch_size": 16, "max_steps": args.max_steps} | recipe
            train(TrainConfig(data=[str(data_file)], model=args.model, objective=settings.pop("objective", "multi"),
                              negatives=settings.pop("negatives", "P,I"), seed=seed, output=str(out), **settings),
                  resume=True)  # fmt: skip
            seconds = time.perf_counter() - start
        entry = evaluated(out, str(out), seconds) | {"seed": seed}
        console.print({"recipe": name, **entry})
        return entry

    base = {"recipe": "base", "runs": [evaluated(output / "base", args.model, 0.0)]}
    rows = [base] + [{"recipe": name, "settings": RECIPES[name], "runs": []} for name in args.recipes]

    def mean_of(row: dict) -> dict:
        return {f"{b}|{k}": statistics.fmean(r[b][k] for r in row["runs"]) for b, k in columns}

    def save() -> None:
        for row in rows:
            if row["runs"]:
                row["mean"] = mean_of(row)
                row["shortfall"] = shortfall(row["mean"], mean_of(base))
        write_json(Path(args.results), {"args": vars(args), "device": device_name(), "rows": rows})

    first, later = args.seeds[:1], args.seeds[1:]
    for row in rows[1:]:
        for seed in first if args.finalists else args.seeds:
            # with finalists, the screen leaves a third of the budget to their other seeds
            if (entry := run(row["recipe"], seed, args.budget * (2 / 3 if args.finalists else 1))) is not None:
                row["runs"].append(entry)
                save()
    if args.finalists:
        screened = sorted(
            (r for r in rows[1:] if r["runs"]), key=lambda r: shortfall(mean_of(r), mean_of(base))
        )
        for row in screened[: args.finalists]:
            for seed in later:
                if (entry := run(row["recipe"], seed, args.budget)) is not None:
                    row["runs"].append(entry)
                    save()

    table = Table(
        title=f"Recipes on Cranfield dev (x100), {args.model}, seeds {' '.join(map(str, args.seeds))}"
    )
    table.add_column("recipe")
    for bench, key in columns:
        short = bench.replace("followir-cranfield", "cf").replace("/", " ")
        table.add_column(f"{short} {'pMRR' if key == 'p-MRR' else 'MAP'}", justify="right")
    for name in ("held-out", "seeds", "short of bar", "train s"):
        table.add_column(name, justify="right")
    for row in rows:
        runs = row["runs"]
        if not runs:
            continue
        table.add_row(
            row["recipe"],
            *[summarise([r[b][k] for r in runs]) for b, k in columns],
            summarise([r["in_domain"] for r in runs]),
            str(len(runs)),
            f"{shortfall(mean_of(row), mean_of(base)):.1f}",
            f"{statistics.fmean(r['train_seconds'] for r in runs):.0f}",
        )
    console.print(table)
    save()


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


if __name__ == "__main__":
    main()
