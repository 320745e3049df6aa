"""``infembed eval`` and ``infembed report``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from infembed.cli import app, console, friendly_errors
from infembed.data.errors import SettingsError

# The --exclusions llm endpoint, declared once for eval, search and serve.
ExclusionLlmUrl = Annotated[
    str | None,
    typer.Option("--exclusion-llm-url", help="OpenAI-compatible base URL for --exclusions llm (e.g. http://127.0.0.1:8080/v1)."),
]
ExclusionLlmModel = Annotated[
    str | None,
    typer.Option("--exclusion-llm-model", help="Model name for --exclusions llm."),
]


@app.command("eval")
@friendly_errors
def eval_command(
    benchmark: list[str] = typer.Option(..., "--benchmark", "-b", help="Benchmark dir or name (followir/core17, bright/biology, mair/<task>); repeat for several."),
    model: list[str] = typer.Option(None, "--model", "-m", help="Model dir or hub name ('default' = packaged all-MiniLM-L6-v2, also used when neither --model nor --retriever is given); repeat for several."),
    retriever: list[str] = typer.Option(None, "--retriever", "-r", help="'bm25' (or 'dense', which needs --model)."),
    template: str = typer.Option(None, "--template", help="How instruction and query are joined: '{query} {instruction}' (default, mteb's), 'instruction-first', 'instruct', or any string with {query} and {instruction}. Default: the model's saved template."),
    top_k: int = typer.Option(1000, "--top-k", help="Documents kept per query when searching the whole corpus."),
    batch_size: int = typer.Option(32, "--batch-size"),
    device: str = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)"),
    output: Path = typer.Option(None, "--output", "-o", help="results.json (one run) or a directory (one file per run)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not reuse corpus embeddings cached on disk."),
    exclusions: str = typer.Option("off", "--exclusions", help="Exclusion-aware scoring: 'off' (plain), 'rules' (split each instruction into what to find and what to leave out with English rules, penalise documents matching an excluded aspect) or 'llm' (split with an LLM: --exclusion-llm-url/--exclusion-llm-model). See docs/instructions.md."),
    exclusion_llm_url: ExclusionLlmUrl = None,
    exclusion_llm_model: ExclusionLlmModel = None,
) -> None:
    """Evaluate retrievers on instruction benchmarks: p-MRR, MAP@1000, nDCG@k (printed x100), results.json."""
    from infembed.data.benchmarks import load_benchmark
    from infembed.data.jsonl import write_json
    from infembed.evaluate.report import canonical_model_name, model_labels, print_results
    from infembed.evaluate.retrievers import build_retriever
    from infembed.evaluate.runner import evaluate

    specs = [r for r in (retriever or []) if r != "dense"] + list(model or [])
    if not specs:  # nothing named: the packaged default model, as `-m default`
        specs = ["default"]
    if top_k < 1:
        raise SettingsError(f"--top-k must be at least 1, got {top_k}")
    if batch_size < 1:
        raise SettingsError(f"--batch-size must be at least 1, got {batch_size}")
    splitter = exclusion_splitter_from_flags(exclusions, exclusion_llm_url, exclusion_llm_model)
    if output is not None:  # checked before the (long) evaluation, so a bad -o never loses its results
        check_output(output, runs=len(benchmark) * len(specs))
    results = []
    for bench_spec in benchmark:
        bench = load_benchmark(bench_spec)
        console.print(f"[bold]{bench.name}[/]: {len(bench.corpus)} documents, {len(bench.queries)} queries"
                      + (", reranking top_ranked" if bench.top_ranked else ""))
        for spec in specs:
            ret = build_retriever(spec, template=template, batch_size=batch_size, device=device, cache=not no_cache,
                                  exclusions=exclusions, exclusion_splitter=splitter)
            results.append(evaluate(bench, ret, top_k=top_k, model_name=canonical_model_name(spec)))
    print_results(results)
    if output is not None:
        if len(results) == 1 and output.suffix == ".json":
            write_json(output, results[0])
        else:
            # one file per run, named by the model's label: labels are unique, so no run overwrites another
            for r, label in zip(results, model_labels(results)):
                stem = "bm25" if r["model"] == "bm25" else re.sub(r"[^\w.+-]+", "_", label)
                write_json(output / f"{Path(r['benchmark']).name}__{stem}.json".replace("/", "_"), r)
        console.print(f"wrote {output}")


def check_output(output: Path, runs: int) -> None:
    """``-o x.json`` holds one run; several runs go to a directory. Refuse what cannot be written."""
    from infembed.data.errors import DataError

    for parent in output.parents:
        if parent.exists() and not parent.is_dir():
            raise DataError("is a file, so nothing can be written under it", parent, field="--output")
    if output.suffix == ".json" and not output.is_dir():
        if runs > 1:
            raise DataError(
                f"one .json file holds one run, but this evaluation makes {runs}",
                output,
                field="--output",
                hint="give a directory: one file per run is written there",
            )
    elif output.exists() and not output.is_dir():
        raise DataError("exists and is not a directory", output, field="--output", hint="give a directory or a .json file")


def exclusion_splitter_from_flags(exclusions: str, url: str | None, model: str | None):
    """Check ``--exclusions`` and build the LLM splitter it may need (None for off/rules)."""
    from infembed.instructions import SPLITTERS, llm_splitter

    if exclusions not in SPLITTERS:
        raise SettingsError(f"--exclusions must be one of {', '.join(SPLITTERS)}, got {exclusions!r}")
    if exclusions != "llm":
        if url or model:
            raise SettingsError("--exclusion-llm-url/--exclusion-llm-model apply to --exclusions llm only")
        return None
    if not url or not model:
        raise SettingsError("--exclusions llm needs --exclusion-llm-url and --exclusion-llm-model")
    from infembed import cache_dir

    return llm_splitter(url, model, cache=str(cache_dir() / "exclusion-splits.sqlite"))


@app.command("report")
@friendly_errors
def report_command(
    results: list[Path] = typer.Argument(..., help="results.json files written by `infembed eval`."),
    plot: Path = typer.Option(None, "--plot", help="Write a PNG comparing the runs (a panel per benchmark, a row per model)."),
    html: Path = typer.Option(None, "--html", help="Write one self-contained HTML page: the table, the plots and a per-query explorer (which documents each instruction moved, every model's top 10)."),
    json_out: Path = typer.Option(None, "--json", help="Write all runs' headline numbers as one JSON file."),
) -> None:
    """Compare evaluation runs: one table (x100) and optionally a PNG, an HTML page and a JSON summary."""
    from infembed.data.jsonl import write_json
    from infembed.evaluate.report import load_results, plot_results, print_results

    runs = load_results(results)
    print_results(runs, title="infembed report")
    if plot is not None:
        console.print(f"wrote {plot_results(runs, plot)}")
    if html is not None:
        from infembed.evaluate.html import write_html

        console.print(f"wrote {write_html(runs, html)}")
    if json_out is not None:
        summary = [{k: r.get(k) for k in ("benchmark", "model", "p-MRR", "score", "main_score", "og", "n_queries")} for r in runs]
        write_json(json_out, summary)
        console.print(f"wrote {json_out}")
