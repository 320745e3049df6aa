"""Objective ablation (the paper's Table 3) on the Cranfield dev benchmarks.

Trains the default MiniLM once per objective setting and seed on the shared InF-IR sample and evaluates base and
trained models on followir-cranfield and followir-cranfield-excl; prints one table (p-MRR and og MAP@1000, x100,
mean and std over seeds) and writes bench/results/objectives.json. The paper's claim to check is that the
multivariate (P, I) objective is the best; `uni {P}` is the plain fine-tuning peer (the same loss as
sentence-transformers' MultipleNegativesRankingLoss on the three pairs of each row). The setting `peer` trains
that peer with sentence-transformers itself (`SentenceTransformerTrainer` + `MultipleNegativesRankingLoss`,
scale 20, the library's default optimiser settings), fed exactly our batches (same rows, order and sizes), so
its row is measured in the same run and on the same machine as ours.

Each finished (setting, seed) leaves `eval.json` in its run directory and is skipped when the script is run again,
so an interrupted ablation resumes where it stopped. A cross-attention run (`@attn`) also records its gate
(`tanh(10 g)`, 0 = exactly the concatenation model its block is built on).

    python bench/objectives.py                       # all Table-3 settings, full sample, 2 epochs (~2 h on 2 cores)
    python bench/objectives.py --epochs 1 --seeds 42 1 --settings multi:P,I uni:P multi:P,I@attn
    python bench/objectives.py --extra-data inf-ir-msmarco-negation --settings multi:P,I   # the negation mix
    python bench/objectives.py --settings peer uni:P multi:P,I --seeds 42 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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
BENCHMARKS = ("followir-cranfield", "followir-cranfield-excl")


def parse_setting(text: str) -> tuple[str, str, str]:
    if text == "peer":
        return "peer", "P", "concat"
    interaction = "concat"
    if text.endswith("@attn"):
        text, interaction = text[: -len("@attn")], "cross_attention"
    objective, negatives = text.split(":")
    return objective, negatives, interaction


def train_peer(data: list[str], output: Path, args: argparse.Namespace, seed: int) -> None:
    """sentence-transformers' own trainer and MNRL on the (instruction + query, passage) pairs of our batches."""
    import torch
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments

    from infembed.data.inf_ir import read_triplets
    from infembed.model.retriever import default_model_path
    from infembed.templates import DEFAULT_TEMPLATE, join
    from infembed.train.batching import iter_batches

    rows = [row for path in data for row in read_triplets(path)][: args.limit]
    anchors: list[str] = []
    positives: list[str] = []
    bounds: list[range] = []
    for epoch in range(int(args.epochs)):
        for batch in iter_batches(rows, args.batch_size, seed=seed, epoch=epoch):
            start = len(anchors)
            anchors += [join(DEFAULT_TEMPLATE, q, i) for q, i in zip(batch.queries, batch.instructions)]
            positives += batch.passages
            bounds.append(range(start, len(anchors)))

    class OurBatches(DefaultBatchSampler):
        def __iter__(self):
            return (list(b) for b in bounds)

        def __len__(self) -> int:
            return len(bounds)

    torch.manual_seed(seed)
    model = SentenceTransformer(default_model_path(), device="cpu")
    training_args = SentenceTransformerTrainingArguments(
        output_dir=str(output / "trainer"),
        num_train_epochs=1,
        per_device_train_batch_size=3 * args.batch_size,
        learning_rate=args.lr,
        batch_sampler=lambda dataset, batch_size, drop_last, **_: OurBatches(
            dataset, batch_size=batch_size, drop_last=drop_last
        ),
        save_strategy="no",
        eval_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=seed,
        dataloader_num_workers=0,
    )
    trainer = SentenceTransformerTrainer(
        model=model,
        args=training_args,
        train_dataset=Dataset.from_dict({"anchor": anchors, "positive": positives}),
        loss=MultipleNegativesRankingLoss(model, scale=20.0),
    )
    trainer.train()
    model.save(str(output))


def summarise(values: list[float]) -> str:
    mean = 100 * statistics.fmean(values)
    return f"{mean:.1f}" if len(values) == 1 else f"{mean:.1f} ± {100 * statistics.stdev(values):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", default=os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    parser.add_argument(
        "--settings", nargs="*", help="e.g. multi:P,I uni:P multi:P,I@attn (default: Table 3)"
    )
    parser.add_argument("--extra-data", nargs="*", default=[], help="more training sets under --data-dir")
    parser.add_argument("--limit", type=int, default=None, help="training rows")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seeds", type=int, nargs="+", default=[42])
    parser.add_argument("--output", default="runs/bench-objectives")
    parser.add_argument("--results", default="bench/results/objectives.json")
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

    root = Path(args.data_dir)
    benches = [load_benchmark(root / name) for name in BENCHMARKS]
    settings = [parse_setting(s) for s in args.settings] if args.settings else TABLE3
    data = [str(root / "inf-ir-msmarco-sample")] + [str(root / name) for name in args.extra_data]
    console = Console(width=120)

    def evaluated(path: Path, model_path: str | None, seconds: float) -> dict:
        cached = path / "eval.json"
        if cached.exists():
            return json.loads(cached.read_text())
        model = InFEmbed.load(model_path)
        entry = {"train_seconds": round(seconds, 1)}
        if model.interaction is not None:  # how far training opened the cross-attention residual
            entry["gate"] = model.interaction.gate_value()
        for bench in benches:
            result = evaluate(bench, DenseRetriever(model, show_progress=False))
            entry[bench.name] = {"p-MRR": result["p-MRR"], "score": result["score"]}
        write_json(cached, entry)
        return entry

    rows = [{"setting": "base", "runs": [evaluated(Path(args.output) / "base", None, 0.0)]}]
    for objective, negatives, interaction in settings:
        label = f"{objective} {{{negatives}}}" + (" attn" if interaction != "concat" else "")
        if objective == "peer":
            label = "peer: sentence-transformers MNRL"
        runs = []
        for seed in args.seeds:
            out = Path(args.output) / f"{objective}_{negatives.replace(',', '')}_{interaction}_s{seed}"
            seconds = 0.0
            if not (out / "eval.json").exists():
                start = time.perf_counter()
                if objective == "peer":
                    train_peer(data, out, args, seed)
                else:
                    train(
                        TrainConfig(
                            data=data,
                            limit=args.limit,
                            objective=objective,
                            negatives=negatives,
                            interaction=interaction,
                            epochs=args.epochs,
                            batch_size=args.batch_size,
                            learning_rate=args.lr,
                            seed=seed,
                            output=str(out),
                        ),
                        resume=True,
                    )
                seconds = time.perf_counter() - start
            runs.append(evaluated(out, str(out), seconds) | {"seed": seed})
            console.print({"setting": label, **runs[-1]})
        rows.append({"setting": label, "runs": runs})

    table = Table(
        title=f"Objective ablation on Cranfield dev (x100), MiniLM, {' + '.join(Path(d).name for d in data)}, "
        f"{args.epochs:g} epochs, seeds {' '.join(map(str, args.seeds))}"
    )
    for name in ("setting", "p-MRR", "MAP@1000", "p-MRR excl", "train s"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    for row in rows:
        values = {b.name: [r[b.name] for r in row["runs"]] for b in benches}
        row["mean"] = {
            name: {k: statistics.fmean(v[k] for v in vals) for k in ("p-MRR", "score")}
            for name, vals in values.items()
        }
        table.add_row(
            row["setting"],
            summarise([v["p-MRR"] for v in values[benches[0].name]]),
            summarise([v["score"] for v in values[benches[0].name]]),
            summarise([v["p-MRR"] for v in values[benches[1].name]]),
            f"{statistics.fmean(r['train_seconds'] for r in row['runs']):.0f}",
        )
    console.print(table)
    write_json(Path(args.results), {"args": vars(args), "rows": rows})
    if len(rows) > 1:
        best = max(rows[1:], key=lambda r: r["mean"][benches[0].name]["p-MRR"])
        print(json.dumps({"best_p_mrr": best["setting"]}))


if __name__ == "__main__":
    main()
