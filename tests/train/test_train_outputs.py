"""What a training run may do with its output dir, and which inputs it checks before training.

Invariants:
* a run continues a checkpoint in ``--output`` only when the checkpoint is of the same run: the settings that
  decide the weights and the content of the training rows; otherwise it is refused with the differences named,
  and the dir is left exactly as it was; ``overwrite=True`` starts over from step 0;
* a rerun of a finished run with the same settings and rows trains nothing and rewrites nothing;
* a dir holding anything but a training run, a file, or a path under a file is refused before the model loads;
* a missing evaluation benchmark is refused before the first step (nothing trained, nothing written);
* after a resume ``metrics.jsonl`` holds each step once, even when the interrupted run had logged steps past
  its last checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from infembed.data.errors import DataError
from infembed.train.config import TrainConfig
from infembed.train.trainer import Trainer


class Interrupted(Exception):
    pass


class InterruptedAtStep(Trainer):
    """Stops the run (like a killed job) when the micro-batch after optimiser step ``stop_at`` begins."""

    stop_at = 3

    def backward_step(self, batch, scale=1.0):
        if self.global_step >= self.stop_at:
            raise Interrupted(self.global_step)
        return super().backward_step(batch, scale)


def _config(output: Path, **overrides) -> TrainConfig:
    settings = dict(
        batch_size=2, max_steps=4, save_steps=2, learning_rate=1e-4, query_max_length=32, passage_max_length=32,
        device="cpu", output=str(output),
    )  # fmt: skip
    return TrainConfig(**{**settings, **overrides})


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _steps(root: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (root / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture
def interrupted(rows, tmp_path) -> Path:
    """An output dir whose run stopped at step 3, after its step-2 checkpoint and its step-3 metrics."""
    output = tmp_path / "run"
    with pytest.raises(Interrupted):
        InterruptedAtStep(_config(output), rows=rows[:8]).train()
    assert [p.name for p in (output / "checkpoints").iterdir()] == ["step-0000002"]
    assert _steps(output) == [1, 2, 3]
    return output


@pytest.mark.parametrize(
    "overrides",
    [{"seed": 7}, {"objective": "uni"}, {"learning_rate": 1e-3}, {"batch_size": 4}, {"max_steps": 2}],
    ids=lambda o: next(iter(o)),
)
def test_a_checkpoint_of_other_settings_is_refused_and_left_alone(rows, interrupted, overrides):
    before = _snapshot(interrupted)
    with pytest.raises(DataError) as error:
        Trainer(_config(interrupted, **overrides), rows=rows[:8])
    name, value = next(iter(overrides.items()))
    message = str(error.value)
    assert str(interrupted) in message and "step 2" in message and "--overwrite" in message
    assert f"{name}: {getattr(_config(interrupted), name)!r} there, {value!r} now" in message
    assert _snapshot(interrupted) == before


def test_a_checkpoint_of_other_rows_is_refused(rows, interrupted):
    other = [dataclasses.replace(row, query_positive=row.query_positive + "?") for row in rows[:8]]
    with pytest.raises(DataError, match="training rows"):
        Trainer(_config(interrupted), rows=other)


def test_bookkeeping_settings_may_change_on_resume(rows, interrupted):
    trainer = Trainer(_config(interrupted, save_steps=1, log_steps=1, keep_checkpoints=3), rows=rows[:8])
    assert trainer.plan.checkpoint is not None and trainer.plan.checkpoint.name == "step-0000002"


def test_resume_writes_each_step_once_to_metrics(rows, interrupted):
    trainer = Trainer(_config(interrupted), rows=rows[:8])
    trainer.train()
    assert trainer.global_step == 4
    assert _steps(interrupted) == [1, 2, 3, 4]


def test_overwrite_starts_over(rows, interrupted):
    trainer = Trainer(_config(interrupted, seed=7, max_steps=2, save_steps=0), rows=rows[:8], overwrite=True)
    assert trainer.plan.checkpoint is None
    trainer.train()
    assert trainer.global_step == 2 and [h["step"] for h in trainer.history] == [1, 2]
    assert _steps(interrupted) == [1, 2]
    assert not (interrupted / "checkpoints").exists()  # the other run's checkpoints are gone with it
    assert json.loads((interrupted / "train_config.json").read_text())["seed"] == 7


def test_no_resume_refuses_to_drop_this_runs_checkpoint(rows, interrupted):
    with pytest.raises(DataError, match="--no-resume"):
        Trainer(_config(interrupted), rows=rows[:8], resume=False)


def test_a_finished_run_is_not_trained_again(rows, tmp_path):
    output = tmp_path / "run"
    Trainer(_config(output, max_steps=2), rows=rows[:4]).train()
    before = _snapshot(output)
    again = Trainer(_config(output, max_steps=2), rows=rows[:4])
    assert again.plan.finished
    assert again.train() == output
    assert _snapshot(output) == before
    with pytest.raises(DataError, match="finished run with other settings.*seed"):
        Trainer(_config(output, max_steps=2, seed=1), rows=rows[:4])


@pytest.mark.parametrize("where", ["user-dir", "file", "under-file"])
def test_an_output_that_is_not_a_training_dir_is_refused_before_the_model_loads(rows, tmp_path, where):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "README.md").write_text("my notes\n")
    (user / "config.json").write_text("{}\n")
    output = {"user-dir": user, "file": user / "README.md", "under-file": user / "README.md" / "model"}[where]
    before = _snapshot(user)
    # a model that does not exist: the output is named, so it was checked first
    with pytest.raises(DataError) as error:
        Trainer(_config(output, model=str(tmp_path / "no-such-model")), rows=rows[:4])
    assert str(output) in str(error.value) and "no-such-model" not in str(error.value)
    assert _snapshot(user) == before


def test_an_empty_dir_is_fine(rows, tmp_path):
    output = tmp_path / "empty"
    output.mkdir()
    assert Trainer(_config(output, max_steps=1), rows=rows[:2]).train() == output
    assert (output / "infembed.json").exists()


def test_a_missing_eval_benchmark_is_refused_before_the_first_step(rows, tmp_path):
    output = tmp_path / "run"
    config = _config(output, eval_benchmark=str(tmp_path / "no-such-benchmark"), eval_steps=1)
    with pytest.raises(DataError, match="no-such-benchmark"):
        Trainer(config, rows=rows[:4])
    assert not output.exists()
