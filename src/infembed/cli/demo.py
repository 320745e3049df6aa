"""``infembed demo``: the end-to-end main job on the default model and the shared dev data."""

from __future__ import annotations

from pathlib import Path

import typer

from infembed.cli import app, console, data_dir, friendly_errors


@app.command("demo")
@friendly_errors
def demo_command(
    data: Path = typer.Option(None, "--data-dir", help="Shared data dir (default: $INFEMBED_DATA_DIR or ../shared/data)."),
    output: Path = typer.Option(Path("runs/demo"), "--output", "-o", help="Where models, results and plots go."),
    quick: bool = typer.Option(False, "--quick", help="A short form for CI: fewer training rows and one benchmark."),
    skip_training: bool = typer.Option(False, "--skip-training", help="Only evaluate BM25 and the base model."),
    device: str = typer.Option(None, "--device"),
) -> None:
    """Evaluate BM25 and the base MiniLM on the Cranfield dev benchmarks, train InF-Embed (multivariate P,I) on
    the shared InF-IR sample, evaluate the trained model, each plain and with exclusion-aware scoring, and print
    the table, a PNG and an HTML page with a per-query explorer."""
    from infembed.data.benchmarks import load_benchmark
    from infembed.data.jsonl import write_json
    from infembed.evaluate.html import write_html
    from infembed.evaluate.report import plot_results, print_results
    from infembed.evaluate.retrievers import build_retriever
    from infembed.evaluate.runner import evaluate
    from infembed.instructions import DEFAULT_SPLITTER

    root = data_dir(data)
    names = ["followir-cranfield-excl"] if quick else ["followir-cranfield", "followir-cranfield-excl"]
    benchmarks = [load_benchmark(root / name) for name in names]
    specs = ["bm25", "default"]
    if not skip_training:
        from infembed.train.demo import train_demo_model

        specs.append(str(train_demo_model(root, output / "model", quick=quick, device=device)))
    results = []
    for bench in benchmarks:
        for spec in specs:
            ret = build_retriever(spec, device=device)
            name = {"default": "all-MiniLM-L6-v2 (base)", "bm25": "BM25"}.get(spec, "InF-Embed MiniLM (trained)")
            # each retriever twice: plain, then exclusion-aware (the default splitter, the retriever's fitted settings)
            for exclusions in ("off", DEFAULT_SPLITTER):
                ret.exclusions = ret.exclusions.with_splitter(exclusions)
                result = evaluate(bench, ret, model_name=name)
                results.append(result)
                suffix = "" if exclusions == "off" else "__exclusions"
                write_json(output / "results" / f"{bench.name}__{Path(name).name.split(' ')[0]}{suffix}.json", result)
    print_results(results, title="infembed demo: instruction following on Cranfield dev (x100)")
    console.print(f"wrote {plot_results(results, output / 'demo.png')}")
    console.print(f"wrote {write_html(results, output / 'demo.html', title='infembed demo')}")
