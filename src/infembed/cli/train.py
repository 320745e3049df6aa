"""``infembed train``: every TrainConfig setting as a flag (generated from its fields), or a YAML/JSON file with
flags on top."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infembed.cli import app, console, friendly_errors
from infembed.data.errors import SettingsError
from infembed.data.jsonl import check_writable
from infembed.settings import settings_command
from infembed.train.config import TrainConfig

# Short and historical names of some flags; every other flag is --field-name.
FLAGS = {
    "data": ("--data", "-d"),
    "model": ("--model", "-m"),
    "output": ("--output", "-o"),
    "learning_rate": ("--learning-rate", "--lr"),
    "learn_temperature": ("--learn-temperature/--fixed-temperature",),
}


@app.command("train")
@friendly_errors
@settings_command(TrainConfig, flags=FLAGS)
def train_command(
    settings: dict[str, Any],
    config: Path = typer.Option(
        None, "--config", help="YAML/JSON file with any of the settings below; flags override it."
    ),
    resume: bool = typer.Option(
        True,
        "--resume/--no-resume",
        help="Continue this run's newest checkpoint in --output (same settings and data).",
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="Start over in an --output that holds an earlier training run, deleting what it holds.",
    ),
) -> None:
    """Train an InF-Embed model with the paper's contrastive objectives (torchrun for several GPUs/processes)."""
    from infembed.train.trainer import summary_of, train

    merged = TrainConfig.from_file(config).to_dict() if config else {}
    merged.update(settings)
    cfg = TrainConfig.from_dict(merged)
    if not cfg.data:
        raise SettingsError("give --data (InF-IR rows) or a --config that sets data")
    check_writable(cfg.output)  # before the rows and the model are loaded
    path = train(cfg, resume=resume, overwrite=overwrite)
    summary = summary_of(path)
    console.print(
        f"saved [bold]{path}[/] ({summary['steps']} steps, {summary['seconds']:.0f} s, "
        f"{summary['pairs_per_s']:.1f} pairs/s, final loss {summary['final_loss']})"
    )
