"""``infembed decomposer``: try a splitter on instructions (``split``) and retrain the learned one (``train``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from infembed.cli import console, friendly_errors
from infembed.instructions.decomposer_train import DecomposerTrainConfig
from infembed.instructions.split import DEFAULT_SPLITTER
from infembed.settings import settings_command

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Decompose instructions into what to find and what to leave out; retrain the learned decomposer.",
)


@app.command("split")
@friendly_errors
def split_command(
    texts: list[str] = typer.Argument(..., help="Instructions to decompose."),
    exclusions: str = typer.Option(
        DEFAULT_SPLITTER,
        "--exclusions",
        help="auto (the shipped learned decomposer) | rules | off (llm: through eval/search/serve).",
    ),
    decomposer: Path = typer.Option(
        None, "--decomposer", help="Split with a learned decomposer dir (infembed decomposer train) instead."
    ),
) -> None:
    """Print each instruction's split as one JSON line: keep, exclude, guards, dropped."""
    from infembed.data.errors import SettingsError
    from infembed.instructions import split_instructions

    if exclusions not in ("auto", "rules", "off"):
        raise SettingsError(f"--exclusions must be auto, rules or off here, got {exclusions!r}")
    splitter: Any = exclusions
    if decomposer is not None:
        from infembed.instructions.decomposer import Decomposer

        splitter = Decomposer(decomposer)
    for text, split in zip(texts, split_instructions(texts, splitter)):
        typer.echo(json.dumps({"instruction": text, **split.to_json()}, ensure_ascii=False))


@app.command("train")
@friendly_errors
@settings_command(DecomposerTrainConfig)
def train_command(settings: dict[str, Any]) -> None:
    """Train a learned decomposer from labelled instructions (about 50 minutes for data/decomposer on 2 CPU cores)."""
    from infembed.instructions.decomposer_train import train_decomposer
    from infembed.progress import bar

    config = DecomposerTrainConfig(**{k: v for k, v in settings.items() if v is not None})
    bars: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage not in bars:
            for shown in bars.values() if config.jobs == 1 else ():  # parallel members: one bar each
                shown.close()
            bars[stage] = bar(stage, total, unit="texts" if stage.startswith("encoding") else "steps")
        bars[stage].set(done, total)

    try:
        summary = train_decomposer(config, progress=progress)
    finally:
        for shown in bars.values():
            shown.close()
    console.print(
        f"wrote [bold]{config.output}[/] ({summary['data']['train_rows']} rows, "
        + (f"{len(summary['members'])} members, " if len(summary["members"]) > 1 else "")
        + f"{summary['steps']} steps, {summary['seconds']:.0f} s, final loss {summary['final_loss']})"
    )
