"""What a training run reports while and after it trains: the progress bar, one-line messages on stderr, the
periodic p-MRR evaluation of the model being trained, and the loss-curve PNG. The trainer calls these on
rank 0 only."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def progress_bar(total: int, initial: int):
    from infembed.progress import bar

    return bar("training", total, initial=initial, unit="steps")


def log_line(text: str) -> None:
    from infembed.progress import console  # the bar's console: the line prints above the bar

    console.print(text, highlight=False)


def evaluate_model(model: Any, benchmark: Any, step: int) -> dict[str, Any]:
    """Evaluate the model on ``benchmark`` (dense retrieval, no embedding cache) and put it back in training
    mode; returns the history entry ``{"step", "eval", "p-MRR", "score"}``."""
    from infembed.evaluate.retrievers import DenseRetriever
    from infembed.evaluate.runner import evaluate

    model.eval()
    result = evaluate(benchmark, DenseRetriever(model, cache=False, show_progress=True))  # minutes on a CPU
    model.train()
    return {"step": step, "eval": result["benchmark"], "p-MRR": result["p-MRR"], "score": result["score"]}


def plot_loss(history: list[dict[str, Any]], title: str, path: Path) -> None:
    """The training loss per optimiser step, with the evaluations' p-MRR (x100) on a second axis."""
    from infembed.plotting import pyplot, save_figure

    plt = pyplot()

    steps = [h["step"] for h in history if "loss" in h]
    losses = [h["loss"] for h in history if "loss" in h]
    evals = [(h["step"], 100 * h["p-MRR"]) for h in history if h.get("p-MRR") is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, losses, label="training loss")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    if evals:
        ax2 = ax.twinx()
        ax2.plot([s for s, _ in evals], [v for _, v in evals], "o-", color="tab:red", label="p-MRR x100")
        ax2.set_ylabel("p-MRR x100")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
