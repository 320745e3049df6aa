"""Checkpoints of a training run: the trainable weights, the loss' parameters, optimiser and scheduler state,
every RNG state and the step counters, so a resumed run continues exactly where it stopped.

A checkpoint is ``<output>/checkpoints/step-<N>/state.pt`` plus the run's record (:func:`outputs.write_record
<infembed.train.outputs.write_record>`); it is written into a temporary dir renamed into place when complete (``data.jsonl.atomic_dir``), and
only the newest ``keep`` are kept. Which checkpoint a rerun continues from is :mod:`infembed.train.outputs`'
decision.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from infembed.data.jsonl import atomic_dir
from infembed.train import outputs


def checkpoint_path(output: Path, step: int) -> Path:
    return output / outputs.CHECKPOINTS / f"step-{step:07d}"


def save_checkpoint(
    path: Path,
    model: torch.nn.Module,
    loss_fn: torch.nn.Module,
    optimizer: Any,
    scheduler: Any,
    *,
    global_step: int,
    micro_step: int,
    history: list[dict[str, Any]],
    config: dict[str, Any],
    data_digest: str,
    keep: int,
) -> Path:
    """Write the checkpoint at ``path`` (from :func:`checkpoint_path`), then remove all but the newest ``keep``
    (``0`` keeps them all). Call it on one process only."""
    with atomic_dir(path) as tmp:
        _write_state(tmp, model, loss_fn, optimizer, scheduler, global_step, micro_step, history, config)
        outputs.write_record(tmp, config, data_digest)
    old = sorted(p for p in path.parent.glob("step-*") if not p.name.endswith(".tmp"))
    for stale in old[:-keep] if keep > 0 else []:
        shutil.rmtree(stale, ignore_errors=True)
    return path


def _write_state(tmp: Path, model: torch.nn.Module, loss_fn: torch.nn.Module, optimizer: Any, scheduler: Any,
                 global_step: int, micro_step: int, history: list[dict[str, Any]], config: dict[str, Any]) -> None:
    trainable = {n: p.detach().cpu() for n, p in model.named_parameters() if p.requires_grad}
    torch.save(
        {
            "model": trainable,
            "loss": loss_fn.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": {
                "torch": torch.get_rng_state(),
                "python": random.getstate(),
                "numpy": np.random.get_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            },
            "global_step": global_step,
            "micro_step": micro_step,
            "history": history,
            "config": config,
        },
        tmp / "state.pt",
    )


def load_checkpoint(
    path: Path, model: torch.nn.Module, loss_fn: torch.nn.Module, optimizer: Any, scheduler: Any
) -> dict[str, Any]:
    """Restore weights, optimiser, scheduler and RNG states from the checkpoint at ``path``; returns its whole
    state (``global_step``, ``micro_step``, ``history`` for the trainer's counters)."""
    state = torch.load(path / "state.pt", map_location="cpu", weights_only=False)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in state["model"].items():
            params[name].copy_(value.to(params[name].device))
    loss_fn.load_state_dict(state["loss"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    if state["rng"]["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    return state
