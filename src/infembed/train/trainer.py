"""The InF-Embed trainer: a plain PyTorch loop around :class:`~infembed.model.InFEmbed` and
:class:`~infembed.losses.InFEmbedLoss`.

Why not ``transformers.Trainer`` / ``SentenceTransformerTrainer``: the objectives need batches laid out as
sibling triples with text identities, gradient caching has to split the encoder forward from the loss, and the
cross-device negatives need every rank to see the whole batch. Those three are easier to get exactly right (and
to test against a single-process run) in a small loop; optimiser and schedules still come from torch and
transformers.

Features: AdamW with warmup and a linear/cosine/constant schedule (:mod:`~infembed.train.optimizer`), gradient
accumulation, gradient caching (``grad_cache_chunk``, :mod:`~infembed.train.grad_cache`: same loss and gradients
as the plain batch, memory bounded by the chunk), torch.distributed with all-gathered embeddings
(:mod:`~infembed.train.distributed`), LoRA via peft, bf16 autocast on CUDA (fp32 master weights), checkpoints
with optimiser/scheduler/RNG state and exact resume (:mod:`~infembed.train.checkpoints`), a progress bar,
``metrics.jsonl``, a loss-curve PNG and optional periodic p-MRR evaluation (:mod:`~infembed.train.reporting`).
What a run starts from (its rows and model) is :mod:`~infembed.train.inputs`; this module holds the loop that
ties them together.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from infembed.contrastive_batch import EmbeddedBatch
from infembed.data.jsonl import JsonlAppender, ensure_dir, write_json
from infembed.data.records import Triplet
from infembed.losses import InFEmbedLoss
from infembed.model import InFEmbed
from infembed.train import checkpoints, outputs, reporting
from infembed.train import distributed as dist_utils
from infembed.train.batching import TrainingBatch, batches_per_epoch, iter_batches
from infembed.train.config import TrainConfig
from infembed.train.grad_cache import grad_cache_step
from infembed.train.inputs import build_model, load_rows
from infembed.train.mining import mine_negatives
from infembed.train.optimizer import build_optimizer


class Trainer:
    """One training run. Every input is checked when it is built, cheapest first (the output dir, the rows, the
    evaluation benchmark, whether the output holds this run to continue), before the model is loaded; nothing
    is written before :meth:`train`.

    ``resume``: continue from the output's newest checkpoint when it is this run's (same settings and rows);
    ``overwrite``: start over, removing what an earlier run left in the output. See :mod:`infembed.train.outputs`.
    """

    def __init__(
        self,
        config: TrainConfig,
        model: InFEmbed | None = None,
        rows: Sequence[Triplet] | None = None,
        *,
        resume: bool = True,
        overwrite: bool = False,
    ):
        self.config = config
        self.output = Path(config.output)
        outputs.check_destination(self.output)
        self.rank, self.world_size = dist_utils.world()
        self.rows = list(rows) if rows is not None else load_rows(config.data, config.limit)
        self.data_digest = outputs.rows_digest(self.rows)
        self.mined = mine_negatives(self.rows, config.mined_negatives) if config.mined_negatives else None
        self.benchmark = None
        if config.eval_benchmark:
            from infembed.data.benchmarks import load_benchmark

            self.benchmark = load_benchmark(config.eval_benchmark)
        self.resume, self.overwrite = resume, overwrite
        self.plan = outputs.plan(
            self.output, config.to_dict(), self.data_digest, resume=resume, overwrite=overwrite
        )
        if model is None and self.plan.finished:  # nothing to train: the trainer holds the finished model
            model = InFEmbed.load(str(self.output), device=config.device)
        self.model = model or build_model(config, device=config.device)
        self.device = self.model.device
        self.loss_fn = InFEmbedLoss(**config.loss_settings()).to(self.device)
        self.global_step = 0
        self.micro_step = 0
        self.history: list[dict[str, Any]] = []
        self._autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if self.device.type == "cuda" and torch.cuda.is_bf16_supported()
            else contextlib.nullcontext()
        )

    # ------------------------------------------------------------------------------------------- parameters

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        params = [p for p in self.model.parameters() if p.requires_grad]
        return params + [p for p in self.loss_fn.parameters() if p.requires_grad]

    def _make_optimizer(self, total_steps: int):
        return build_optimizer(self.model, self.loss_fn, self.config, total_steps)

    # ------------------------------------------------------------------------------------------- loss

    def _embed_batch(self, batch: TrainingBatch) -> tuple[torch.Tensor, torch.Tensor]:
        with self._autocast:
            queries = self.model.embed_queries(*batch.embedding_inputs())
            passages = self.model.embed_passages(batch.passages)
        return queries.float(), passages.float()

    def _global_batch(
        self, batch: TrainingBatch, queries: torch.Tensor, passages: torch.Tensor
    ) -> EmbeddedBatch:
        """Gather anchors, extra rows, passages, aspects and ids from every rank (local slices keep their
        gradient). ``queries``: the batch's query rows, then its aspects (``embedding_inputs``)."""
        n, rows = batch.n_anchors, len(batch.queries)
        gather = dist_utils.gather_with_grad
        dev = queries.device
        inst_ids, query_ids, passage_ids = (
            t.to(dev) for t in (batch.instruction_ids, batch.query_ids, batch.passage_ids)
        )
        anchors, extras = gather(queries[:n]), gather(queries[n:rows])
        pos, extra_p = gather(passages[:n]), gather(passages[n:])
        aspects = owner = None
        if batch.keeps is not None:  # exclusion-aware: each aspect's row, as a row of the gathered batch
            local = torch.tensor(batch.aspect_owner, dtype=torch.long, device=dev)
            anchor_offset, extra_offset = dist_utils.offsets(n, rows - n, device=dev)
            local = torch.where(local < n, anchor_offset + local, anchors.shape[0] + extra_offset + local - n)
            aspects, owner = gather(queries[rows:]), gather(local)
        return EmbeddedBatch(
            queries=torch.cat([anchors, extras]),
            passages=torch.cat([pos, extra_p]),
            instruction_ids=torch.cat([gather(inst_ids[:n]), gather(inst_ids[n:])]),
            query_ids=torch.cat([gather(query_ids[:n]), gather(query_ids[n:])]),
            passage_ids=torch.cat([gather(passage_ids[:n]), gather(passage_ids[n:])]),
            num_anchors=anchors.shape[0],
            aspects=aspects,
            aspect_owner=owner,
        )

    def _decomposed(self, batch: TrainingBatch) -> TrainingBatch:
        """With ``exclusion_training`` on: the batch with its excluding instructions decomposed."""
        if self.config.exclusion_training == "off":
            return batch
        from infembed.instructions import split_instruction

        return batch.decomposed(lambda text: split_instruction(text, self.config.exclusion_training))

    def compute_loss(self, batch: TrainingBatch) -> torch.Tensor:
        """The global-batch loss with gradients (plain, no caching)."""
        batch = self._decomposed(batch)
        queries, passages = self._embed_batch(batch)
        return self.loss_fn(self._global_batch(batch, queries, passages))

    def backward_step(self, batch: TrainingBatch, scale: float = 1.0) -> float:
        """Forward + backward for one (micro-)batch; returns the loss value. Gradients accumulate in ``.grad``."""
        batch = self._decomposed(batch)
        chunk = self.config.grad_cache_chunk
        if chunk <= 0:
            loss = self.compute_loss(batch)
            (loss * scale).backward()
            return float(loss.detach())
        return grad_cache_step(
            self.model,
            batch,
            chunk,
            scale,
            lambda queries, passages: self.loss_fn(self._global_batch(batch, queries, passages)),
            autocast=self._autocast,
            device=self.device,
        )

    # ------------------------------------------------------------------------------------------- checkpoints

    def save_checkpoint(self, optimizer, scheduler) -> Path:
        path = checkpoints.checkpoint_path(self.output, self.global_step)
        if self.rank == 0:
            checkpoints.save_checkpoint(
                path,
                self.model,
                self.loss_fn,
                optimizer,
                scheduler,
                global_step=self.global_step,
                micro_step=self.micro_step,
                history=self.history,
                config=self.config.to_dict(),
                data_digest=self.data_digest,
                keep=self.config.keep_checkpoints,
            )
        return path

    def latest_checkpoint(self) -> Path | None:
        return outputs.latest_checkpoint(self.output)

    def load_checkpoint(self, path: Path, optimizer, scheduler) -> None:
        state = checkpoints.load_checkpoint(path, self.model, self.loss_fn, optimizer, scheduler)
        self.global_step, self.micro_step = state["global_step"], state["micro_step"]
        self.history = state["history"]

    # ------------------------------------------------------------------------------------------- loop

    def total_steps(self) -> int:
        per_epoch = batches_per_epoch(len(self.rows), self.config.batch_size, self.world_size)
        steps = math.ceil(per_epoch * self.config.epochs / self.config.gradient_accumulation)
        return min(steps, self.config.max_steps) if self.config.max_steps else steps

    def _micro_batches(self, start_micro: int):
        """(epoch, batch) for every micro-batch of the run, skipping the first ``start_micro`` (resume)."""
        per_epoch = batches_per_epoch(len(self.rows), self.config.batch_size, self.world_size)
        total_micro = math.ceil(per_epoch * self.config.epochs)
        index = 0
        epoch = 0
        while index < total_micro:
            for batch in iter_batches(
                self.rows,
                self.config.batch_size,
                seed=self.config.seed,
                epoch=epoch,
                extra_instruction_negatives=self.config.extra_instruction_negatives,
                world_size=self.world_size,
                rank=self.rank,
                mined=self.mined,
            ):
                if index >= total_micro:
                    return
                if index >= start_micro:
                    yield batch
                index += 1
            epoch += 1

    def train(self, resume: bool | None = None) -> Path:
        """Run (or continue) the training and save the model dir; returns its path. ``resume`` overrides the
        constructor's choice."""
        cfg = self.config
        if resume is not None:
            self.resume = resume
        # again: the dir may have changed since the constructor looked (an earlier call of train, another rank)
        self.plan = outputs.plan(
            self.output, cfg.to_dict(), self.data_digest, resume=self.resume, overwrite=self.overwrite
        )
        dist_utils.barrier()  # every rank has read the output dir before rank 0 may clear it
        if self.plan.finished:
            self._log_line(
                f"{self.output} already holds this run, finished: nothing to train "
                "(--overwrite trains it again)"
            )
            return self.output
        torch.manual_seed(cfg.seed)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        total = self.total_steps()
        optimizer, scheduler = self._make_optimizer(total)
        if self.rank == 0 and self.plan.clear:
            outputs.clear(self.output)
        if self.plan.checkpoint is not None:
            self.load_checkpoint(self.plan.checkpoint, optimizer, scheduler)
            if self.rank == 0:
                outputs.truncate_metrics(self.output, self.global_step)
            self._log_line(f"resumed from {self.plan.checkpoint} at step {self.global_step}/{total}")
        if self.rank == 0:
            ensure_dir(self.output)
            write_json(self.output / outputs.SETTINGS, cfg.to_dict())
        metrics = JsonlAppender(self.output / outputs.METRICS) if self.rank == 0 else None
        self.model.train()
        params = self.trainable_parameters()
        bar = self._progress(total)
        started = time.perf_counter()
        pairs_seen = 0
        accum = cfg.gradient_accumulation
        window: list[float] = []
        for batch in self._micro_batches(self.micro_step):
            if self.global_step >= total:
                break
            window.append(self.backward_step(batch, scale=1.0 / accum))
            pairs_seen += batch.n_anchors * self.world_size
            self.micro_step += 1
            if self.micro_step % accum:
                continue
            dist_utils.sum_gradients(params)
            if cfg.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            self.global_step += 1
            loss_value = dist_utils.all_reduce_mean(sum(window) / len(window), self.device)
            window = []
            elapsed = time.perf_counter() - started
            entry = {
                "step": self.global_step,
                "loss": round(loss_value, 6),
                "lr": scheduler.get_last_lr()[0],
                "scale": round(self.loss_fn.scale, 4),
                "pairs_per_s": round(pairs_seen / max(elapsed, 1e-9), 2),
            }
            self.history.append(entry)
            if metrics is not None and self.global_step % max(cfg.log_steps, 1) == 0:
                metrics.write(entry)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss_value:.4f}")
            if self.benchmark is not None and cfg.eval_steps and self.global_step % cfg.eval_steps == 0:
                self._evaluate(metrics)
            if cfg.save_steps and self.global_step % cfg.save_steps == 0 and self.global_step < total:
                self.save_checkpoint(optimizer, scheduler)
        if bar is not None:
            bar.close()
        seconds = time.perf_counter() - started
        if self.rank == 0:
            self.model.config.training = {
                **cfg.to_dict(),
                "steps": self.global_step,
                "rows": len(self.rows),
                "world_size": self.world_size,
                "loss": self.loss_fn.get_config_dict(),
            }
            self.model.save(self.output)
            write_json(
                self.output / outputs.SUMMARY,
                {
                    "steps": self.global_step,
                    "seconds": round(seconds, 2),
                    "rows": len(self.rows),
                    "data_digest": self.data_digest,
                    "pairs_per_s": round(pairs_seen / max(seconds, 1e-9), 2),
                    "final_loss": self.history[-1]["loss"] if self.history else None,
                },
            )
            self.plot_loss(self.output / "loss.png")
            metrics.close()
        return self.output

    def _evaluate(self, metrics: JsonlAppender | None) -> None:
        if self.rank != 0:
            return
        entry = reporting.evaluate_model(self.model, self.benchmark, self.global_step)
        self.history.append(entry)
        if metrics is not None:
            metrics.write(entry)
        self._log_line(
            f"step {self.global_step}: p-MRR {100 * (entry['p-MRR'] or 0):.1f}, score {100 * entry['score']:.1f}"
        )

    def _progress(self, total: int):
        return reporting.progress_bar(total, self.global_step) if self.rank == 0 else None

    def _log_line(self, text: str) -> None:
        if self.rank == 0:
            reporting.log_line(text)

    def plot_loss(self, path: Path) -> None:
        title = f"InF-Embed {self.config.objective} over {self.config.negatives}"
        reporting.plot_loss(self.history, title, path)


def train(config: TrainConfig, resume: bool = True, overwrite: bool = False) -> Path:
    """Train from a config (initialises torch.distributed when launched by torchrun). ``resume`` continues this
    run's checkpoint in the output dir; ``overwrite`` starts over in a dir holding an earlier run."""
    outputs.check_destination(Path(config.output))  # before torch.distributed and the model
    device = torch.device(config.device) if config.device else None
    if dist_utils.init_from_env(device or torch.device("cuda" if torch.cuda.is_available() else "cpu")):
        rank = dist_utils.world()[0]
        if torch.cuda.is_available() and not config.device:
            import os

            config.device = f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}"
    trainer = Trainer(config, resume=resume, overwrite=overwrite)
    return trainer.train()


def summary_of(path: str | Path) -> dict[str, Any]:
    return json.loads((Path(path) / outputs.SUMMARY).read_text())
