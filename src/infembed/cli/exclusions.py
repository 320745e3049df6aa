"""``infembed fit-exclusions``: fit the exclusion-aware scoring settings of a retriever on training rows."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from infembed.cli import app, console, friendly_errors
from infembed.data.errors import SettingsError


@app.command("fit-exclusions")
@friendly_errors
def fit_exclusions_command(
    data: list[str] = typer.Option(..., "--data", help="Negation-aware InF-IR rows (JSONL file or dir; e.g. inf-ir-msmarco-negation): I+ excludes P1-'s aspect, I- excludes P+'s."),
    model: str = typer.Option(None, "--model", "-m", help="Model dir or hub name ('default' = packaged all-MiniLM-L6-v2)."),
    retriever: str = typer.Option(None, "--retriever", "-r", help="'bm25' instead of a model."),
    save: bool = typer.Option(False, "--save", help="Write the fitted settings into the model dir's infembed.json (used by eval/search/serve from then on)."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the fit (settings, objective, grid) as JSON."),
    device: str = typer.Option(None, "--device"),
) -> None:
    """Fit alpha, threshold, margin (and, for a model, the aspect scorer) of exclusion-aware scoring (docs/instructions.md)."""
    from infembed.data.jsonl import write_json
    from infembed.evaluate.retrievers import build_retriever
    from infembed.exclusions import fit
    from infembed.train.inputs import load_rows

    if (model is None) == (retriever is None):
        raise SettingsError("give exactly one of --model M or --retriever bm25")
    if retriever is not None and retriever != "bm25":
        raise SettingsError(f"--retriever must be 'bm25', got {retriever!r}")
    if save and (model is None or not (Path(model) / "infembed.json").exists()):
        raise SettingsError("--save needs --model pointing at a model dir written by infembed (with infembed.json)")
    rows = load_rows(data)
    ret = build_retriever(retriever or model, device=device, cache=False, show_progress=False)
    # a dense model may match the excluded aspects itself or through BM25 over the same documents: fit both
    report = fit(ret, rows, aspect_scorers=("self",) if retriever == "bm25" else ("self", "bm25"))
    s = report.settings
    console.print(f"fitted on {report.n_scenarios} scenarios from {len(rows)} rows: alpha={s.alpha} "
                  f"threshold={s.threshold} margin={s.margin} aspect_scorer={s.aspect_scorer} "
                  f"(objective {report.objective:.4f}, "
                  f"{report.objective_off:.4f} without exclusions)")
    if output is not None:
        write_json(output, {**report.to_json(), "grid": report.grid, "data": list(data)})
        console.print(f"wrote {output}")
    if save:
        path = Path(model) / "infembed.json"
        config = json.loads(path.read_text())
        config["exclusions"] = s.to_json()
        write_json(path, config)
        console.print(f"saved into {path}")
