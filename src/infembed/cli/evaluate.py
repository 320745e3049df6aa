"""``infembed eval`` and ``infembed report``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infembed.cli import app, console, friendly_errors
from infembed.data.errors import SettingsError
from infembed.evaluate.outputs import DEFAULT_TOP_K
from infembed.model.backends import BACKEND_HELP, check_backend

# The --exclusions llm endpoint, declared once for eval, search and serve.
ExclusionLlmUrl = Annotated[
    str | None,
    typer.Option(
        "--exclusion-llm-url",
        help="OpenAI-compatible base URL for --exclusions llm (e.g. http://127.0.0.1:8080/v1).",
    ),
]
ExclusionLlmModel = Annotated[
    str | None,
    typer.Option("--exclusion-llm-model", help="Model name for --exclusions llm."),
]
# What runs the model, for eval and search (index and serve take it from IndexSettings/ServeSettings' field);
# declared in infembed.model.backends.
Backend = Annotated[str | None, typer.Option("--backend", help=BACKEND_HELP)]


@app.command("eval")
@friendly_errors
def eval_command(
    benchmark: list[str] = typer.Option(
        ...,
        "--benchmark",
        "-b",
        help="Benchmark dir or name (followir/core17, bright/biology, mair/<task>; a bare dir name is also looked for in the data dir, $INFEMBED_DATA_DIR); repeat for several.",
    ),
    model: list[str] = typer.Option(
        None,
        "--model",
        "-m",
        help="Model dir or hub name ('default' = packaged all-MiniLM-L6-v2, also used when neither --model nor --retriever is given); repeat for several.",
    ),
    retriever: list[str] = typer.Option(
        None, "--retriever", "-r", help="'bm25' (or 'dense', which needs --model)."
    ),
    template: str = typer.Option(
        None,
        "--template",
        help="How instruction and query are joined: '{query} {instruction}' (default, mteb's), 'instruction-first', 'instruct', or any string with {query} and {instruction}. Default: the model's saved template.",
    ),
    top_k: int = typer.Option(
        DEFAULT_TOP_K, "--top-k", help="Documents kept per query when searching the whole corpus."
    ),
    batch_size: int = typer.Option(32, "--batch-size"),
    device: str = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)"),
    output: Path = typer.Option(
        None,
        "--output",
        "-o",
        help="results.json (one run) or a directory: one <benchmark>__<retriever>[__<settings>].json per run.",
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="Replace results and TREC run files that exist (without it they are refused before anything is evaluated).",
    ),
    trec_runs: Path = typer.Option(
        None,
        "--trec-runs",
        help="Also write each run's rankings as TREC run files (qid Q0 docid rank score tag) into this dir: <name>.og.trec and <name>.changed.trec.",
    ),
    run_og: Path = typer.Option(
        None,
        "--run-og",
        help="Score a TREC run made elsewhere (the og instructions' run) on one --benchmark, instead of running a retriever.",
    ),
    run_changed: Path = typer.Option(
        None,
        "--run-changed",
        help="With --run-og: the TREC run for the changed instructions (p-MRR needs both).",
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not reuse corpus embeddings cached on disk."),
    exclusions: str = typer.Option(
        "off",
        "--exclusions",
        help="Exclusion-aware scoring: 'off' (default here: plain, the benchmark as published), 'auto' (the learned decomposer splits each instruction into what to find and what to leave out; documents matching an excluded aspect are pushed down; search and serve default to it), 'rules' (the same split by English rules) or 'llm' (split with an LLM: --exclusion-llm-url/--exclusion-llm-model). See docs/instructions.md.",
    ),
    exclusion_llm_url: ExclusionLlmUrl = None,
    exclusion_llm_model: ExclusionLlmModel = None,
    backend: Backend = None,
) -> None:
    """Evaluate retrievers (or TREC runs made elsewhere) on instruction benchmarks: p-MRR, MAP@1000, nDCG@k (printed x100), results.json."""
    from infembed.cli import data_dir
    from infembed.data.benchmarks import load_benchmark, locate_benchmark
    from infembed.data.formats import read_trec_run, trec_run_tag
    from infembed.evaluate.outputs import (
        check_output,
        refuse_existing,
        results_paths,
        run_names,
        run_tags,
        slug,
        trec_paths,
    )
    from infembed.evaluate.report import print_results
    from infembed.templates import resolve_template

    # every flag, every output name and every existing file is checked before a benchmark or model loads
    if top_k < 1:
        raise SettingsError(f"--top-k must be at least 1, got {top_k}")
    if batch_size < 1:
        raise SettingsError(f"--batch-size must be at least 1, got {batch_size}")
    if template is not None:
        resolve_template(template)
    check_backend(backend, device)
    from_runs = run_og is not None or run_changed is not None
    if from_runs:
        _check_run_flags(
            run_og, run_changed, benchmark, model, retriever, template, exclusions, trec_runs, backend
        )
        # the files' format now, before the benchmark loads (their ids are checked against it after)
        for path in filter(None, (run_og, run_changed)):
            read_trec_run(path)
        tags = [slug(f"run-{trec_run_tag(run_og)}") + (f"__top{top_k}" if top_k != DEFAULT_TOP_K else "")]
        specs: list[str] = []
    else:
        specs = [r for r in (retriever or []) if r != "dense"] + list(model or [])
        if not specs:  # nothing named: the packaged default model, as `-m default`
            specs = ["default"]
        tags = run_tags(
            specs,
            template=template,
            top_k=top_k,
            exclusions=exclusions,
            exclusion_llm_model=exclusion_llm_model,
        )
        if backend not in (None, "torch"):  # a dense run names its backend: it is not the torch run
            if all(s.lower() == "bm25" for s in specs):
                raise SettingsError("--backend applies to dense models (--model); BM25 encodes nothing")
            tags = [t if s.lower() == "bm25" else f"{t}__{backend}" for s, t in zip(specs, tags)]
    splitter = exclusion_splitter_from_flags(exclusions, exclusion_llm_url, exclusion_llm_model)
    located = [locate_benchmark(b, [data_dir()]) for b in benchmark]
    if output is not None:
        check_output(output, runs=len(located) * len(tags))
    names = run_names(located, tags)
    result_files = results_paths(output, names)
    trec_files = trec_paths(trec_runs, names)
    if not overwrite:
        refuse_existing(result_files, "--output")
        refuse_existing((p for pair in trec_files if pair for p in pair), "--trec-runs")

    results = []
    planned = iter(zip(names, tags * len(located), result_files, trec_files))
    for where in located:
        bench = load_benchmark(where)
        console.print(
            f"[bold]{bench.name}[/]: {len(bench.corpus)} documents, {len(bench.queries)} queries"
            + (", reranking top_ranked" if bench.top_ranked else "")
        )
        if from_runs:
            _, _, result_file, _ = next(planned)
            results.append(_score_run_files(bench, run_og, run_changed, top_k))
            _save(results[-1], result_file)
            continue
        for spec in specs:
            _, tag, result_file, trec_pair = next(planned)
            results.append(
                _run_retriever(
                    bench,
                    spec,
                    tag,
                    trec_pair,
                    template=template,
                    top_k=top_k,
                    batch_size=batch_size,
                    device=device,
                    cache=not no_cache,
                    exclusions=exclusions,
                    splitter=splitter,
                    backend=backend,
                )
            )
            _save(results[-1], result_file)
    print_results(results)


def _check_run_flags(
    run_og, run_changed, benchmark, model, retriever, template, exclusions, trec_runs, backend=None
) -> None:
    """--run-og/--run-changed score one benchmark's run files; the retriever's flags do not apply to them."""
    if run_og is None:
        raise SettingsError("--run-changed needs --run-og (the og run it is compared with)")
    if len(benchmark) != 1:
        raise SettingsError(f"--run-og scores one --benchmark, got {len(benchmark)}")
    given = [
        flag
        for flag, value in (
            ("--model", model),
            ("--retriever", retriever),
            ("--template", template),
            ("--trec-runs", trec_runs),
            ("--backend", backend),
        )
        if value
    ]
    if exclusions != "off":
        given.append("--exclusions")
    if given:
        raise SettingsError(
            f"{', '.join(given)} apply to a retriever's runs, not to --run-og/--run-changed files"
        )


def _score_run_files(bench, run_og: Path, run_changed: Path | None, top_k: int) -> dict:
    from infembed.data.formats import read_trec_run, trec_run_tag
    from infembed.evaluate.runner import evaluate_runs

    og = read_trec_run(run_og, bench.queries, bench.corpus)
    changed = read_trec_run(run_changed, bench.queries, bench.corpus) if run_changed is not None else None
    sources = {"og": str(run_og), **({"changed": str(run_changed)} if run_changed is not None else {})}
    return evaluate_runs(bench, og, changed, name=trec_run_tag(run_og), top_k=top_k, sources=sources)


def _run_retriever(
    bench,
    spec: str,
    tag: str,
    trec_pair: tuple[Path, Path] | None,
    *,
    template,
    top_k,
    batch_size,
    device,
    cache,
    exclusions,
    splitter,
    backend=None,
) -> dict:
    from infembed.data.formats import write_trec_run
    from infembed.evaluate.report import canonical_model_name
    from infembed.evaluate.retrievers import build_retriever
    from infembed.evaluate.runner import evaluate_with_runs

    ret = build_retriever(
        spec,
        template=template,
        batch_size=batch_size,
        device=device,
        cache=cache,
        exclusions=exclusions,
        exclusion_splitter=splitter,
        backend=backend,
    )
    result, run_og, run_changed = evaluate_with_runs(
        bench, ret, top_k=top_k, model_name=canonical_model_name(spec)
    )
    if getattr(ret, "model", None) is not None:  # what ran the dense model (results.json; docs/search.md)
        result["backend"] = ret.model.backend
    if trec_pair is not None:
        write_trec_run(trec_pair[0], run_og, tag=tag)
        console.print(f"wrote {trec_pair[0]}")
        if run_changed is not None:
            write_trec_run(trec_pair[1], run_changed, tag=tag)
            console.print(f"wrote {trec_pair[1]}")
    return result


def _save(result: dict, path: Path | None) -> None:
    """Each run's results are written as soon as it is scored: a later run that fails loses nothing."""
    if path is not None:
        from infembed.data.jsonl import write_json

        write_json(path, result)
        console.print(f"wrote {path}")


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
    results: list[Path] = typer.Argument(
        ..., help="results.json files written by `infembed eval` (or dirs of them)."
    ),
    plot: Path = typer.Option(
        None, "--plot", help="Write a PNG comparing the runs (a panel per benchmark, a row per model)."
    ),
    html: Path = typer.Option(
        None,
        "--html",
        help="Write one self-contained HTML page: the table, the plots and a per-query explorer (which documents each instruction moved, every model's top 10).",
    ),
    json_out: Path = typer.Option(None, "--json", help="Write all runs' headline numbers as one JSON file."),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="Replace --plot/--html/--json files that exist (without it they are refused).",
    ),
) -> None:
    """Compare evaluation runs: one table (x100) and optionally a PNG, an HTML page and a JSON summary."""
    from infembed.data.jsonl import write_json
    from infembed.evaluate.outputs import refuse_existing
    from infembed.evaluate.report import load_results, plot_results, print_results

    if not overwrite:
        for flag, path in (("--plot", plot), ("--html", html), ("--json", json_out)):
            refuse_existing([path], flag)
    runs = load_results(results)
    print_results(runs, title="infembed report")
    if plot is not None:
        console.print(f"wrote {plot_results(runs, plot)}")
    if html is not None:
        from infembed.evaluate.html import write_html

        console.print(f"wrote {write_html(runs, html)}")
    if json_out is not None:
        summary = [
            {k: r.get(k) for k in ("benchmark", "model", "p-MRR", "score", "main_score", "og", "n_queries")}
            for r in runs
        ]
        write_json(json_out, summary)
        console.print(f"wrote {json_out}")
