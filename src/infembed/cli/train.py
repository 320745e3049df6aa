"""``infembed train``: every TrainConfig setting as a flag, or a YAML/JSON file with flags on top."""

from __future__ import annotations

from pathlib import Path

import typer

from infembed.cli import app, console, friendly_errors


@app.command("train")
@friendly_errors
def train_command(
    data: list[str] = typer.Option(None, "--data", "-d", help="InF-IR rows: JSONL file/dir or hub name (InF-IR/InF-IR); repeat to mix."),
    model: str = typer.Option(None, "--model", "-m", help="Backbone (default: packaged all-MiniLM-L6-v2)."),
    output: str = typer.Option(None, "--output", "-o", help="Model dir to write (also holds checkpoints, metrics.jsonl, loss.png)."),
    config: Path = typer.Option(None, "--config", help="YAML/JSON file with any TrainConfig settings; flags override it."),
    objective: str = typer.Option(None, "--objective", help="uni | multi (paper naming). Default multi."),
    negatives: str = typer.Option(None, "--negatives", help="Marginal negative sets, e.g. P,I (default), P, I, IQ, P,I,IQ."),
    interaction: str = typer.Option(None, "--interaction", help="concat (default) | cross_attention."),
    template: str = typer.Option(None, "--template", help="Instruction/query join, default '{query} {instruction}'."),
    pooling: str = typer.Option(None, "--pooling", help="cls | mean | last (default: the backbone's)."),
    epochs: float = typer.Option(None, "--epochs"),
    batch_size: int = typer.Option(None, "--batch-size", help="InF-IR rows per device per step (3 pairs each)."),
    learning_rate: float = typer.Option(None, "--lr", "--learning-rate"),
    interaction_lr_multiplier: float = typer.Option(None, "--interaction-lr-multiplier",
                                                    help="Cross-attention block's lr as a multiple of --lr (default 20)."),
    gradient_accumulation: int = typer.Option(None, "--gradient-accumulation"),
    grad_cache_chunk: int = typer.Option(None, "--grad-cache-chunk", help="Gradient caching chunk size (0: off)."),
    extra_instruction_negatives: int = typer.Option(None, "--extra-instruction-negatives"),
    temperature: float = typer.Option(None, "--temperature"),
    learn_temperature: bool = typer.Option(None, "--learn-temperature/--fixed-temperature"),
    lora: bool = typer.Option(None, "--lora/--no-lora", help="LoRA adapters (peft), merged into the saved model."),
    gguf_file: str = typer.Option(None, "--gguf-file"),
    limit: int = typer.Option(None, "--limit", help="Use at most this many rows."),
    max_steps: int = typer.Option(None, "--max-steps"),
    save_steps: int = typer.Option(None, "--save-steps"),
    eval_benchmark: str = typer.Option(None, "--eval-benchmark", help="Evaluate p-MRR on this benchmark every --eval-steps."),
    eval_steps: int = typer.Option(None, "--eval-steps"),
    seed: int = typer.Option(None, "--seed"),
    device: str = typer.Option(None, "--device"),
    resume: bool = typer.Option(True, "--resume/--no-resume",
                                help="Continue this run's newest checkpoint in --output (same settings and data)."),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Start over in an --output that holds an earlier training run, deleting what it holds."),
) -> None:
    """Train an InF-Embed model with the paper's contrastive objectives (torchrun for several GPUs/processes)."""
    from infembed.train.config import TrainConfig
    from infembed.train.trainer import summary_of, train

    settings = TrainConfig.from_file(config).to_dict() if config else {}
    flags = dict(data=data or None, model=model, output=output, objective=objective, negatives=negatives,
                 interaction=interaction, template=template, pooling=pooling, epochs=epochs, batch_size=batch_size,
                 learning_rate=learning_rate, interaction_lr_multiplier=interaction_lr_multiplier,
                 gradient_accumulation=gradient_accumulation,
                 grad_cache_chunk=grad_cache_chunk, extra_instruction_negatives=extra_instruction_negatives,
                 temperature=temperature, learn_temperature=learn_temperature, lora=lora, gguf_file=gguf_file,
                 limit=limit, max_steps=max_steps, save_steps=save_steps, eval_benchmark=eval_benchmark,
                 eval_steps=eval_steps, seed=seed, device=device)
    settings.update({k: v for k, v in flags.items() if v is not None})
    cfg = TrainConfig.from_dict(settings)
    if not cfg.data:
        raise ValueError("give --data (InF-IR rows) or a --config that sets data")
    path = train(cfg, resume=resume, overwrite=overwrite)
    summary = summary_of(path)
    console.print(f"saved [bold]{path}[/] ({summary['steps']} steps, {summary['seconds']:.0f} s, "
                  f"{summary['pairs_per_s']:.1f} pairs/s, final loss {summary['final_loss']})")
