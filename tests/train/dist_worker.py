"""One rank of the two-process torchrun check, and the single-step computation both sides share.

Run by ``test_train_distributed.py`` as::

    python -m torch.distributed.run --nproc_per_node 2 dist_worker.py ROWS.jsonl OUT_DIR SETTINGS_JSON

Each rank builds the packaged MiniLM (eval mode: no dropout, so both sides are deterministic), takes its own
slice of the first global batch from ``iter_batches(..., world_size=2, rank=r)``, runs
``Trainer.backward_step`` (which all-gathers the embeddings) and ``distributed.sum_gradients``, and writes the
loss and a few parameter gradients to ``OUT_DIR/<setting>-rank<r>.pt``. The test computes the same thing in
one process on ``TrainingBatch.concat`` of the two rank batches.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

# Gradients compared in full; every other parameter enters through the total gradient norm.
CHECKED_PARAMETERS = (
    "encoder.st.0.model.embeddings.position_embeddings.weight",
    "encoder.st.0.model.embeddings.LayerNorm.weight",
    "encoder.st.0.model.encoder.layer.0.attention.self.query.weight",
    "encoder.st.0.model.encoder.layer.5.output.dense.weight",
    "interaction.attention.in_proj_weight",
    "interaction.gate",
)
# A non-zero gate, so that gradients flow through the cross-attention projections too (at 0 only the gate learns).
CROSS_ATTENTION_GATE = 0.5


def make_config(**overrides: Any):
    """A tiny MiniLM training config (CPU, short max lengths)."""
    from infembed.train.config import TrainConfig

    settings: dict[str, Any] = dict(
        model="default",
        query_max_length=32,
        passage_max_length=48,
        batch_size=3,
        extra_instruction_negatives=1,
        device="cpu",
        # never written (these trainers only run backward_step); a dir path, as the trainer checks
        output=os.path.join(tempfile.gettempdir(), "infembed-dist-worker-never-written"),
    )
    settings.update(overrides)
    return TrainConfig(**settings)


def make_trainer(config, rows, *, eval_mode: bool = True):
    """A Trainer on a freshly built model; the cross-attention block is seeded and its gate opened."""
    from infembed.train.inputs import build_model
    from infembed.train.trainer import Trainer

    torch.manual_seed(0)
    model = build_model(config, device="cpu")
    if model.interaction is not None:
        with torch.no_grad():
            model.interaction.gate.fill_(CROSS_ATTENTION_GATE)
    model.train(not eval_mode)
    return Trainer(config, model=model, rows=rows)


def rank_batch(rows, config, world_size: int, rank: int):
    """The first batch of epoch 0 as rank ``rank`` of ``world_size`` sees it."""
    from infembed.train.batching import iter_batches

    return next(
        iter_batches(
            rows,
            config.batch_size,
            seed=config.seed,
            epoch=0,
            extra_instruction_negatives=config.extra_instruction_negatives,
            world_size=world_size,
            rank=rank,
        )
    )


def excluding_rows(rows):
    """Rows whose instructions exclude something (for exclusion-aware training): an exclusion sentence appended to
    each instruction, naming the first words of the other side's passage."""
    import dataclasses

    return [
        dataclasses.replace(
            row,
            instruction_positive=row.instruction_positive
            + f" Passages about {' '.join(row.hard_negative_document_1.split()[:3])} are not relevant.",
            instruction_negative=row.instruction_negative
            + f" Ignore anything about {' '.join(row.document_positive.split()[:3])}.",
        )
        for row in rows
    ]


def gradients(trainer) -> dict[str, torch.Tensor]:
    """Every parameter's gradient (zeros where a parameter got none), by name."""
    return {
        name: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
        for name, p in trainer.model.named_parameters()
        if p.requires_grad
    }


def step_result(trainer, batch) -> dict[str, Any]:
    """Loss, summed gradients (across ranks when distributed) and their summary for one backward step."""
    from infembed.train import distributed

    loss = trainer.backward_step(batch)
    distributed.sum_gradients(trainer.trainable_parameters())
    grads = gradients(trainer)
    return {
        "loss": loss,
        "grad_norm": float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads.values()))),
        "grads": {name: grads[name] for name in CHECKED_PARAMETERS if name in grads},
        "n_anchors": batch.n_anchors,
        "n_queries": len(batch.queries),
    }


def main(argv: list[str]) -> None:
    from infembed.data.inf_ir import read_triplets
    from infembed.train import distributed

    rows_path, out_dir, settings_json = argv
    torch.set_num_threads(1)
    if not distributed.init_from_env(torch.device("cpu")):
        raise SystemExit("run me with torchrun (WORLD_SIZE > 1)")
    rank, world_size = distributed.world()
    rows = read_triplets(rows_path)
    for name, overrides in json.loads(settings_json).items():
        config = make_config(**overrides)
        trainer = make_trainer(config, rows)
        result = step_result(trainer, rank_batch(rows, config, world_size, rank))
        torch.save(result, Path(out_dir) / f"{name}-rank{rank}.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])


def assert_gradients_close(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], rel: float = 1e-4) -> None:
    """Every parameter's gradient equals the expected one up to ``rel`` times the norm of the WHOLE model's
    gradient. A per-tensor relative tolerance is wrong here: some exact gradients are zero (an attention key
    bias shifts every logit of a query by the same amount, which softmax ignores), so both sides hold only
    float noise whose size depends on the CPU's kernels and thread count."""
    assert set(actual) == set(expected)
    total = math.sqrt(sum(float(g.double().pow(2).sum()) for g in expected.values()))
    assert total > 0
    for name, want in expected.items():
        diff = float((actual[name].double() - want.double()).norm())
        assert diff <= rel * total, f"{name}: |diff| {diff:.3g} > {rel} x |grad| {total:.3g}"
