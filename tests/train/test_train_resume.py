"""Resume after an interruption continues the same run.

Invariant: a 4-step run interrupted right after its step-2 checkpoint and resumed by a new ``Trainer`` on the
same output dir ends with the same weights, optimiser trajectory and loss history as the same 4-step run done
in one go. The checkpoint carries the trainable weights, the optimiser, the schedule, the RNG states (dropout
stays on: train mode replays the same masks) and the micro-batch position, so batches are not repeated.
"""

from __future__ import annotations

import pytest
import torch

from infembed.train.config import TrainConfig
from infembed.train.trainer import Trainer


class Interrupted(Exception):
    pass


class InterruptedAfterCheckpoint(Trainer):
    """Stops the run (like a killed job) as soon as a checkpoint is written."""

    def save_checkpoint(self, optimizer, scheduler):
        path = super().save_checkpoint(optimizer, scheduler)
        raise Interrupted(path)


def _config(output) -> TrainConfig:
    return TrainConfig(
        batch_size=2, max_steps=4, save_steps=2, learning_rate=1e-4, warmup_ratio=0.5, query_max_length=32,
        passage_max_length=32, negatives="P,I", device="cpu", output=str(output),
    )  # fmt: skip


def _history(trainer: Trainer) -> list[tuple]:
    return [(h["step"], h["loss"], h["lr"]) for h in trainer.history if "loss" in h]


def test_resume_after_interruption_matches_an_uninterrupted_run(rows, tmp_path):
    straight = Trainer(_config(tmp_path / "straight"), rows=rows)
    straight.train()

    first = InterruptedAfterCheckpoint(_config(tmp_path / "resumed"), rows=rows)
    with pytest.raises(Interrupted):
        first.train()
    assert first.global_step == 2
    checkpoint = first.latest_checkpoint()
    assert checkpoint is not None and checkpoint.name == "step-0000002"

    resumed = Trainer(_config(tmp_path / "resumed"), rows=rows)  # a new process would build a fresh model
    resumed.train(resume=True)
    assert resumed.global_step == straight.global_step == 4
    assert (tmp_path / "resumed" / "infembed.json").exists()

    assert _history(resumed) == _history(straight)
    assert len({loss for _, loss, _ in _history(straight)}) == 4  # the loss really moves from step to step
    straight_state, resumed_state = straight.model.state_dict(), resumed.model.state_dict()
    assert straight_state.keys() == resumed_state.keys()
    for name, value in straight_state.items():
        torch.testing.assert_close(resumed_state[name], value, rtol=0, atol=1e-6, msg=name)
