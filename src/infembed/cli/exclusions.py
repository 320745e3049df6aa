"""``infembed fit-exclusions``: fit the exclusion-aware scoring settings of a retriever on training rows."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from infembed.cli import app, console, friendly_errors
from infembed.data.errors import SettingsError

#: the fit's own tolerance (:func:`infembed.exclusions.fit`): settings within it of the best objective are
#: equally good fits of the rows
from infembed.exclusions import FIT_TIE as TIE  # noqa: E402

FITTED = ("aspect_scorer", "alpha", "threshold", "margin")


def closest_to_current(grid: list[dict[str, Any]], current: Any, fit_choice: Any) -> dict[str, Any]:
    """Among the grid's equally good fits (within :data:`TIE` of the best), the one that changes the fewest of
    the retriever's current settings (then the fewest of ``fit()``'s own choice): the rows move a setting only
    when they tell its values apart. (On the negation rows every margin scores the same; ``fit()`` alone picks the
    largest, which lowered the packaged MiniLM's Cranfield p-MRR from 36.1 to 32.6.)"""
    best = max(g["objective"] for g in grid)
    tied = [g for g in grid if g["objective"] >= best - TIE]

    def changed(g: dict[str, Any], settings: Any) -> int:
        return sum(g[k] != getattr(settings, k) for k in FITTED)

    return min(tied, key=lambda g: (changed(g, current), changed(g, fit_choice)))


@app.command("fit-exclusions")
@friendly_errors
def fit_exclusions_command(
    data: list[str] = typer.Option(
        ...,
        "--data",
        help="Negation-aware InF-IR rows (JSONL file or dir; e.g. inf-ir-msmarco-negation): I+ excludes P1-'s aspect, I- excludes P+'s.",
    ),
    model: str = typer.Option(
        None, "--model", "-m", help="Model dir or hub name ('default' = packaged all-MiniLM-L6-v2)."
    ),
    retriever: str = typer.Option(None, "--retriever", "-r", help="'bm25' instead of a model."),
    save: bool = typer.Option(
        False,
        "--save",
        help="Write the fitted settings into the model dir's infembed.json (used by eval/search/serve from then on).",
    ),
    output: Path = typer.Option(
        None, "--output", "-o", help="Write the fit (settings, objective, grid) as JSON."
    ),
    device: str = typer.Option(None, "--device"),
) -> None:
    """Fit alpha, threshold, margin (and, for a model, the aspect scorer) of exclusion-aware scoring
    (docs/instructions.md). A setting the rows score alike for several values keeps its current value."""
    from infembed.data.jsonl import check_writable, write_json
    from infembed.evaluate.retrievers import build_retriever
    from infembed.exclusions import fit
    from infembed.progress import step
    from infembed.train.inputs import load_rows

    if (model is None) == (retriever is None):
        raise SettingsError("give exactly one of --model M or --retriever bm25")
    if retriever is not None and retriever != "bm25":
        raise SettingsError(f"--retriever must be 'bm25', got {retriever!r}")
    if save and (model is None or not (Path(model) / "infembed.json").exists()):
        raise SettingsError(
            "--save needs --model pointing at a model dir written by infembed (with infembed.json)"
        )
    if output is not None:
        check_writable(output)  # before the minute of fitting
    rows = load_rows(data)
    with step(f"loading {retriever or model}", transient=True):
        ret = build_retriever(retriever or model, device=device, cache=False, show_progress=True)
    current = ret.exclusions
    # a dense model may match the excluded aspects itself or through BM25 over the same documents: fit both
    scorers = ("self",) if retriever == "bm25" else ("self", "bm25")
    with step(f"fitting exclusion settings on {len(rows)} rows ({', '.join(scorers)} aspect scorer)"):
        report = fit(ret, rows, aspect_scorers=scorers)
    chosen = closest_to_current(report.grid, current, report.settings)
    s = replace(report.settings, **{k: chosen[k] for k in FITTED})
    kept = [
        k for k in FITTED if chosen[k] != getattr(report.settings, k) and chosen[k] == getattr(current, k)
    ]
    console.print(
        f"fitted on {report.n_scenarios} scenarios from {len(rows)} rows: alpha={s.alpha} "
        f"threshold={s.threshold} margin={s.margin} aspect_scorer={s.aspect_scorer} "
        f"(objective {chosen['objective']:.4f}, {report.objective_off:.4f} without exclusions)"
    )
    if kept:
        console.print(
            f"kept the current {', '.join(f'{k}={getattr(current, k)}' for k in kept)}: the rows score it as well "
            f"as the fit's first choice ({', '.join(f'{k}={getattr(report.settings, k)}' for k in kept)})"
        )
    if output is not None:
        summary = {**report.to_json(), "settings": s.to_json(), "objective": chosen["objective"]}
        write_json(
            output,
            {**summary, "fit_choice": report.settings.to_json(), "grid": report.grid, "data": list(data)},
        )
        console.print(f"wrote {output}")
    if save:
        path = Path(model) / "infembed.json"
        config = json.loads(path.read_text())
        config["exclusions"] = s.to_json()
        write_json(path, config)
        console.print(f"saved into {path}")
