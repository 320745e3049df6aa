"""Training throughput of ``infembed train`` against sentence-transformers' trainer, and the cost of the
multivariate objective.

Both sides train the packaged all-MiniLM-L6-v2 on the same pairs in the same batches: each InF-IR row gives its
three sibling pairs, flattened as (joined query text, passage); a batch is 16 rows = 48 pairs, with the same
max length, AdamW at the same learning rate, a linear schedule with warmup and gradient clipping, dropout on.

* ours: :class:`infembed.train.trainer.Trainer` (what ``infembed train`` runs) with the P-only objective
  (``objective="multi", negatives="P"``, ``extra_instruction_negatives=0``: the classic in-batch negatives);
* peer: ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` (scale 20 = 1 / temperature 0.05),
  fed the pairs in our batch order (sequential sampler), so every step sees the same 48 pairs and padding.

Each run does ``--warmup-steps`` steps, then ``--steps`` timed steps; a step is timed from the end of the
previous one to its own end (batch preparation, tokenisation, forward, backward, optimiser and scheduler step,
logging). Runs alternate (ours, peer, ours P,I ...; every other round in reverse order) for ``--rounds`` rounds
in one process (the P,I runs in the first ``--multivariate-rounds`` of them), and the median over rounds is
reported, as pairs per wall-clock second and per CPU second of the process (one torch thread recommended). Then the multivariate P,I objective (the paper's best) with one extra in-batch
instruction per anchor (``extra_instruction_negatives=1``, the default: 48 more query texts to encode) and
without (``=0``: the siblings' instructions only), relative to P-only.

    .venv/bin/python bench/train.py [--rounds 2] [--multivariate-rounds 1] [--steps 10] [--threads 1] [--data DIR]

Under torchrun (``WORLD_SIZE`` > 1, gloo on CPU) it instead times the cross-rank gradient sum: our P-only
training step with the gradients summed in ~25 MiB flattened buckets (``distributed.sum_gradients``, the
default) against one collective per parameter (``bucket_mb=0``), in the same processes. The two modes alternate
step by step within a training run (so load drifts hit both alike), and each of the ``2 x --rounds`` runs starts
with the other mode (so every batch is timed in both); each rank holds 16 rows = 48 pairs per step. Then the
sum alone, on the real gradients of one step, ``--allreduce-repeats`` times per mode, alternating:

    .venv/bin/python -m torch.distributed.run --nproc_per_node 2 bench/train.py [--rounds 1] [--steps 8] [--threads 1]
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
os.environ.setdefault("TQDM_DISABLE", "1")

import torch  # noqa: E402

from infembed.data.inf_ir import read_triplets  # noqa: E402
from infembed.model import default_model_path  # noqa: E402
from infembed.templates import DEFAULT_TEMPLATE, join  # noqa: E402
from infembed.train.batching import iter_batches  # noqa: E402
from infembed.train.config import TrainConfig  # noqa: E402
from infembed.train.inputs import build_model  # noqa: E402
from infembed.train.trainer import Trainer  # noqa: E402

ROWS_PER_BATCH = 16  # 48 pairs
LEARNING_RATE = 5e-5
SEED = 42


def _now() -> tuple[float, float]:
    """Wall-clock and CPU time of this process. On a shared machine the CPU time is the steadier measure (it
    leaves out the time other processes hold the cores); with one torch thread it counts the same work."""
    return time.perf_counter(), time.process_time()


def _rates(ends: list[tuple[float, float]], args: argparse.Namespace) -> tuple[float, float]:
    """(pairs per wall second, pairs per CPU second) over the timed steps, from the step end times."""
    pairs = args.steps * ROWS_PER_BATCH * 3
    first, last = ends[args.warmup_steps - 1], ends[-1]
    return pairs / (last[0] - first[0]), pairs / (last[1] - first[1])


class TimedTrainer(Trainer):
    """Records the time at which each micro-batch is handed to the loop (= the end of the previous step);
    the generator is resumed once more after the last step, which closes the last window."""

    def _micro_batches(self, start_micro: int):
        self.marks: list[tuple[float, float]] = [_now()]
        for batch in super()._micro_batches(start_micro):
            self.marks.append(_now())
            yield batch
        self.marks.append(_now())


def our_config(args: argparse.Namespace, output: str, **loss) -> TrainConfig:
    return TrainConfig(
        model="default",
        batch_size=ROWS_PER_BATCH,
        epochs=1,
        max_steps=args.warmup_steps + args.steps,
        learning_rate=LEARNING_RATE,
        query_max_length=args.max_length,
        passage_max_length=args.max_length,
        device="cpu",
        seed=SEED,
        output=output,
        **loss,
    )


def run_ours(args: argparse.Namespace, rows, **loss) -> tuple[float, float]:
    """Pairs per wall second and per CPU second over the timed steps."""
    with tempfile.TemporaryDirectory() as tmp:
        config = our_config(args, tmp, **loss)
        trainer = TimedTrainer(config, model=build_model(config, device="cpu"), rows=rows)
        trainer.train(resume=False)
    # marks[0]: loop start; marks[k]: batch k+1 handed over, i.e. the end of step k (k >= 1)
    ends = trainer.marks[1:][1 : config.max_steps + 1]
    assert len(ends) == config.max_steps, (len(ends), config.max_steps)
    return _rates(ends, args)


def peer_pairs(args: argparse.Namespace, rows) -> tuple[list[str], list[str]]:
    """The (joined query, passage) pairs in the order of our batches, so the peer's batches are ours."""
    anchors, positives = [], []
    for batch in iter_batches(rows, ROWS_PER_BATCH, seed=SEED, epoch=0, extra_instruction_negatives=0):
        anchors += [join(DEFAULT_TEMPLATE, q, i) for q, i in zip(batch.queries, batch.instructions)]
        positives += batch.passages
    return anchors, positives


def run_peer(args: argparse.Namespace, pairs: tuple[list[str], list[str]]) -> tuple[float, float]:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.sentence_transformer.training_args import SentenceTransformerTrainingArguments
    from torch.utils.data import SequentialSampler
    from transformers import TrainerCallback

    def sequential(dataset, batch_size, drop_last, **_):
        return DefaultBatchSampler(SequentialSampler(dataset), batch_size=batch_size, drop_last=drop_last)

    class StepClock(TrainerCallback):
        def __init__(self):
            self.ends: list[tuple[float, float]] = []

        def on_step_end(self, *_, **__):
            self.ends.append(_now())

    torch.manual_seed(SEED)
    model = SentenceTransformer(default_model_path(), device="cpu")
    model.max_seq_length = args.max_length
    dataset = Dataset.from_dict({"anchor": pairs[0], "positive": pairs[1]})
    clock = StepClock()
    steps = args.warmup_steps + args.steps
    with tempfile.TemporaryDirectory() as tmp:
        training_args = SentenceTransformerTrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=ROWS_PER_BATCH * 3,
            max_steps=steps,
            learning_rate=LEARNING_RATE,
            warmup_ratio=0.1,  # as ours (deprecated in transformers 5 in favour of a float warmup_steps)
            weight_decay=0.01,
            max_grad_norm=1.0,
            lr_scheduler_type="linear",
            batch_sampler=sequential,
            save_strategy="no",
            eval_strategy="no",
            logging_steps=1,
            report_to=[],
            disable_tqdm=True,
            dataloader_num_workers=0,
            use_cpu=True,
            seed=SEED,
        )
        trainer = SentenceTransformerTrainer(
            model=model,
            args=training_args,
            train_dataset=dataset,
            loss=MultipleNegativesRankingLoss(model, scale=20.0),
            callbacks=[clock],
        )
        trainer.train()
    assert len(clock.ends) == steps, (len(clock.ends), steps)
    return _rates(clock.ends, args)


def run_distributed(args: argparse.Namespace) -> None:
    """Step time and all-reduce time, bucketed against per-parameter, under torchrun (printed by rank 0).

    Within one training run the two modes alternate step by step, so a change in the machine's load hits both
    alike; the next run starts with the other mode, so every batch is timed once in each mode."""
    import shutil

    import torch.distributed as dist

    from infembed.train import distributed

    distributed.init_from_env(torch.device("cpu"))
    rank, world_size = distributed.world()
    steps = args.warmup_steps + args.steps
    rows = read_triplets(args.data, limit=ROWS_PER_BATCH * world_size * steps)
    if len(rows) < ROWS_PER_BATCH * world_size * steps:
        raise SystemExit(f"{args.data}: need {ROWS_PER_BATCH * world_size * steps} rows")

    def say(text: str) -> None:
        if rank == 0:
            print(text, flush=True)

    runs = 2 * args.rounds
    say(
        f"all-MiniLM-L6-v2, CPU, torchrun {world_size} ranks (gloo), {torch.get_num_threads()} thread(s) each; "
        f"{ROWS_PER_BATCH * 3} pairs per rank per step, max length {args.max_length}; {runs} runs of "
        f"{args.warmup_steps} warm-up + {args.steps} timed steps, the two modes alternating step by step"
    )
    modes = {"bucketed (25 MiB)": distributed.BUCKET_MB, "per-parameter": 0.0}
    names = list(modes)
    step_seconds: dict[str, list[float]] = {name: [] for name in modes}

    class AlternatingTrainer(TimedTrainer):
        first = 0  # the mode of step 0 (then every other step)

        def _micro_batches(self, start_micro: int):
            for index, batch in enumerate(super()._micro_batches(start_micro)):
                distributed.BUCKET_MB = modes[names[(index + self.first) % 2]]
                yield batch

    for run in range(runs):
        shared = [tempfile.mkdtemp(prefix="infembed-bench-dist-") if rank == 0 else None]
        dist.broadcast_object_list(shared)  # one output dir for all ranks (rank 0 writes it)
        config = our_config(args, shared[0], objective="multi", negatives="P", extra_instruction_negatives=0)
        trainer = AlternatingTrainer(config, model=build_model(config, device="cpu"), rows=rows)
        trainer.first = run % 2
        trainer.train(resume=False)
        handed = [mark[0] for mark in trainer.marks[1:]]  # handed[k]: batch k handed over = start of step k
        for step in range(args.warmup_steps, config.max_steps):
            name = names[(step + trainer.first) % 2]
            step_seconds[name].append(handed[step + 1] - handed[step])
        say(
            f"  run {run + 1}: "
            + ", ".join(f"{name} {statistics.median(step_seconds[name]):.3f} s/step" for name in modes)
            + " (median so far)"
        )
        distributed.barrier()
        if rank == 0:
            shutil.rmtree(shared[0], ignore_errors=True)
    distributed.BUCKET_MB = modes[names[0]]

    # the sum alone, on the gradients of one step of the last trainer's model
    params = trainer.trainable_parameters()
    trainer.backward_step(next(trainer._micro_batches(0)))
    local = [p.grad.clone() if p.grad is not None else None for p in params]
    sum_seconds: dict[str, list[float]] = {name: [] for name in modes}
    calls: dict[str, int] = {}
    for repeat in range(args.allreduce_repeats):
        for name, bucket_mb in modes.items() if repeat % 2 == 0 else reversed(modes.items()):
            for param, grad in zip(params, local):
                param.grad = None if grad is None else grad.clone()
            distributed.barrier()
            start = time.perf_counter()
            calls[name] = distributed.sum_gradients(params, bucket_mb=bucket_mb)
            sum_seconds[name].append(time.perf_counter() - start)
    n_bytes = sum(g.numel() * g.element_size() for g in local if g is not None)
    step = {name: statistics.median(v) for name, v in step_seconds.items()}
    total = {name: sum(v) for name, v in step_seconds.items()}
    summing = {name: statistics.median(v) for name, v in sum_seconds.items()}
    say("")
    say(
        f"{'mode (median)':<20} {'s/step':>8} {'sum ms':>8} {'collectives':>12}  ({n_bytes / 2**20:.1f} MiB of gradients)"
    )
    for name in modes:
        say(f"{name:<20} {step[name]:8.3f} {summing[name] * 1e3:8.1f} {calls[name]:12d}")
    bucketed, per_parameter = modes
    say("")
    say(
        f"speed-up bucketed / per-parameter (same runs): step time {total[per_parameter] / total[bucketed]:.3f}x "
        f"(total over the same batches; medians {step[per_parameter] / step[bucketed]:.3f}x), "
        f"gradient sum alone {summing[per_parameter] / summing[bucketed]:.2f}x"
    )
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    data = Path(os.environ.get("INFEMBED_DATA_DIR", "/work/shared/data"))
    parser.add_argument("--data", type=Path, default=data / "inf-ir-msmarco-sample", help="InF-IR rows")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (median reported)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per run")
    parser.add_argument("--warmup-steps", type=int, default=2, help="untimed steps per run (at least 1)")
    parser.add_argument("--max-length", type=int, default=256, help="max tokens, queries and passages")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument(
        "--multivariate-rounds", type=int, default=1, help="rounds that also run the P,I objective (0: skip)"
    )
    parser.add_argument(
        "--allreduce-repeats", type=int, default=20, help="torchrun only: timed gradient sums per mode"
    )
    args = parser.parse_args()
    args.warmup_steps = max(1, args.warmup_steps)
    if args.threads:
        torch.set_num_threads(args.threads)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        run_distributed(args)
        return
    rows = read_triplets(args.data, limit=ROWS_PER_BATCH * (args.warmup_steps + args.steps))
    if len(rows) < ROWS_PER_BATCH * (args.warmup_steps + args.steps):
        raise SystemExit(f"{args.data}: need {ROWS_PER_BATCH * (args.warmup_steps + args.steps)} rows")
    pairs = peer_pairs(args, rows)
    print(
        f"all-MiniLM-L6-v2, CPU, {torch.get_num_threads()} thread(s); {ROWS_PER_BATCH * 3} pairs per step "
        f"({ROWS_PER_BATCH} rows), max length {args.max_length}; {args.warmup_steps} warm-up + {args.steps} timed "
        f"steps per run, {args.rounds} alternating round(s)",
        flush=True,
    )
    runs = {
        "ours P-only": dict(objective="multi", negatives="P", extra_instruction_negatives=0),
        "sentence-transformers MNRL": None,
    }
    if args.multivariate_rounds > 0:
        runs["ours multivariate P,I, 1 extra instruction"] = dict(
            objective="multi", negatives="P,I", extra_instruction_negatives=1
        )
        runs["ours multivariate P,I, siblings only"] = dict(
            objective="multi", negatives="P,I", extra_instruction_negatives=0
        )
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for round_index in range(args.rounds):
        order = list(runs.items())
        if round_index % 2:  # ABBA: every other round runs the other way round, so drifts in load cancel out
            order.reverse()
        for name, loss in order:
            if name.startswith("ours multivariate") and round_index >= args.multivariate_rounds:
                continue
            wall, cpu = run_peer(args, pairs) if loss is None else run_ours(args, rows, **loss)
            results[name].append((wall, cpu))
            print(
                f"  round {round_index + 1}: {name:<45} {wall:6.2f} pairs/s wall, {cpu:6.2f} pairs/CPU-s",
                flush=True,
            )

    wall = {name: statistics.median(r[0] for r in rates) for name, rates in results.items()}
    cpu = {name: statistics.median(r[1] for r in rates) for name, rates in results.items()}
    print()
    print(f"{'run (median over rounds)':<47} {'pairs/s':>8} {'pairs/CPU-s':>12}")
    for name in runs:
        print(f"{name:<47} {wall[name]:8.2f} {cpu[name]:12.2f}")
    print()
    ours, peer = "ours P-only", "sentence-transformers MNRL"
    print(
        f"speed ours / sentence-transformers (P-only, same batches): {wall[ours] / wall[peer]:.2f} wall, "
        f"{cpu[ours] / cpu[peer]:.2f} CPU  (target >= 1.0)"
    )
    for name in runs:
        if name.startswith("ours multivariate"):
            print(
                f"cost of {name[5:]} vs P-only (time per step): {wall[ours] / wall[name]:.2f}x wall, "
                f"{cpu[ours] / cpu[name]:.2f}x CPU"
            )


if __name__ == "__main__":
    main()
