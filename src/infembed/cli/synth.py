"""``infembed synth``: make InF-IR training rows from (query, passage) pairs with an LLM, and analyse them.

Thin commands over :mod:`infembed.synth`; run ``infembed synth COMMAND --help``. Also runnable alone as
``python -m infembed.cli.synth``.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

app = typer.Typer(
    name="synth",
    help="Make InF-IR rows (instruction, poisoned negatives, negative passages, LLM judge) and analyse them.",
    no_args_is_help=True,
    add_completion=False,
)
# No markup parsing: paths, data set names and the endpoint's error texts are printed as they are (a
# "[/bold]" in them would otherwise raise MarkupError); styles are given as Text objects instead.
console = Console(stderr=True, soft_wrap=True, markup=False)
out = Console(soft_wrap=True, markup=False)


class ExpectedError(Exception):
    """A failure to report in one line, exit status 2."""


def _fail(message: str) -> None:
    console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False)
    raise typer.Exit(2)


def _guard(fn):  # type: ignore[no-untyped-def]
    """Report expected failures (bad input, endpoint down, missing package) without a traceback."""
    from infembed.cli import debug_mode
    from infembed.data.errors import EXPECTED_ERRORS
    from infembed.synth.pipeline import SynthAborted

    try:
        return fn()
    except (*EXPECTED_ERRORS, SynthAborted, ExpectedError, ImportError) as error:
        if debug_mode():
            raise
        _fail(str(error))
    except KeyboardInterrupt:
        _fail("interrupted; everything done so far is saved, run the same command again to resume")


# ----------------------------------------------------------------------------------------------- options
Seed = Annotated[
    str,
    typer.Argument(
        metavar="SEED",
        help="Seed pairs: a BEIR dir, a JSONL of {query, passage}, or 'msmarco' (hub, needs --limit).",
    ),
]
Output = Annotated[Path, typer.Option("--output", "-o", help="Run directory (created; a rerun resumes it).")]
Limit = Annotated[int | None, typer.Option(help="Use the first N pairs only.")]
Split = Annotated[str, typer.Option(help="qrels split of a BEIR dir.")]
BaseUrl = Annotated[
    str | None,
    typer.Option(
        envvar="OPENAI_BASE_URL",
        help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vLLM); default: OpenAI.",
    ),
]
ApiKeyEnv = Annotated[str, typer.Option(help="Name of the environment variable holding the API key.")]
Model = Annotated[str, typer.Option(help="Model for instructions, poisoned negatives and negative passages.")]
JudgeModel = Annotated[
    str | None, typer.Option(help="Model for the judge (default: --model). The paper: o3-mini.")
]
Concurrency = Annotated[int, typer.Option(min=1, help="Requests in flight at most.")]
Timeout = Annotated[
    float,
    typer.Option(
        min=0.001,
        help="Deadline in seconds for each request, the whole answer included (a request past it is retried).",
    ),
]
MaxRetries = Annotated[int, typer.Option(min=0, help="Retries of a request on 429, 5xx, timeouts.")]
RetryBase = Annotated[
    float, typer.Option(help="First retry delay in seconds (doubles each retry, with jitter).")
]
CachePath = Annotated[
    Path | None, typer.Option("--cache", help="Response cache file (default: OUTPUT/cache.sqlite).")
]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the response cache.")]
Temperature = Annotated[float, typer.Option(help="Sampling temperature of the generation stages.")]
MaxTokens = Annotated[int, typer.Option(help="Token limit of a generated answer.")]
JudgeMaxTokens = Annotated[
    int | None, typer.Option(help="Token limit of a judge answer (default 32; 4096 for reasoning models).")
]
Distractors = Annotated[
    int, typer.Option(min=0, help="Random corpus passages added to {P+, P1-, P2-} for the judge.")
]
Attempts = Annotated[
    int, typer.Option(min=1, help="Tries per field when an answer is empty, refused or malformed.")
]
Domain = Annotated[str, typer.Option(help="web (MS MARCO-like), code (language kept fixed) or math.")]
Language = Annotated[
    str | None, typer.Option(help="code: the programming language (else a 'language' field of each pair).")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the judge's distractors and shuffles.")]
Judge = Annotated[bool, typer.Option("--judge/--no-judge", help="Run the LLM judge (stage 5).")]
Backend = Annotated[
    str, typer.Option(help="openai (any OpenAI-compatible endpoint) or local (transformers).")
]
LocalModel = Annotated[
    str, typer.Option(help="local backend: 'smollm2' (packaged GGUF), a .gguf file or a model dir.")
]
Prices = Annotated[
    list[str] | None, typer.Option("--price", help="MODEL=INPUT,OUTPUT in US$ per 1M tokens (repeatable).")
]
BatchPrices = Annotated[bool, typer.Option(help="Cost at Batch API prices (half).")]
MaxFailures = Annotated[
    int, typer.Option(min=1, help="Stop after this many requests in a row failed after all their retries.")
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
JsonOutput = Annotated[
    str,
    typer.Option(
        help="JSON-constrained answers: off, json_object (llama.cpp servers) or json_schema (OpenAI, vLLM).",
    ),
]


def _make_pipeline(
    seed_source: str,
    output: Path,
    *,
    limit: int | None,
    split: str,
    model: str,
    judge_model: str | None,
    temperature: float,
    max_tokens: int,
    judge_max_tokens: int | None,
    distractors: int,
    answer_attempts: int,
    domain: str,
    language: str | None,
    seed: int,
    judge: bool,
    max_consecutive_failures: int,
    concurrency: int,
    cache_path: Path | None,
    no_cache: bool,
    backend_obj: Any,
    max_retries: int,
    retry_base: float,
    prices: list[str] | None,
    batch_prices: bool,
    progress: Any = None,
    json_output: str = "off",
):  # type: ignore[no-untyped-def]
    from infembed.synth.costs import parse_price
    from infembed.synth.inputs import load_seed
    from infembed.synth.llm import LLMClient, ResponseCache
    from infembed.synth.pipeline import Pipeline, SynthConfig
    from infembed.synth.prompts import DOMAINS
    from infembed.synth.structured import MODES

    if domain not in DOMAINS:
        raise ExpectedError(f"--domain must be one of {', '.join(DOMAINS)}")
    if json_output not in MODES:
        raise ExpectedError(f"--json-output must be one of {', '.join(MODES)}")
    price_table = dict(parse_price(p) for p in (prices or []))
    data = load_seed(seed_source, limit=limit, split=split)
    if not data.pairs:
        raise ExpectedError(f"no pairs found in {seed_source}")
    config = SynthConfig(
        model=model,
        judge_model=judge_model,
        temperature=temperature,
        max_tokens=max_tokens,
        judge_max_tokens=judge_max_tokens,
        domain=domain,
        language=language,
        distractors=distractors,
        answer_attempts=answer_attempts,
        seed=seed,
        judge=judge,
        max_consecutive_failures=max_consecutive_failures,
        json_output=json_output,
    )
    cache = None if no_cache else ResponseCache(cache_path or output / "cache.sqlite")
    client = LLMClient(
        backend_obj,
        cache,
        concurrency=concurrency,
        max_retries=max_retries,
        backoff_base=retry_base,
        seed=seed,
    )
    return Pipeline(
        data, output, client, config, prices=price_table, batch_prices=batch_prices, progress=progress
    )


def _run_with_progress(pipeline: Any, quiet: bool) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    counts: dict[str, int] = {}

    async def main() -> dict[str, Any]:
        try:
            return await pipeline.run()
        finally:
            await pipeline.client.aclose()
            if pipeline.client.cache is not None:
                pipeline.client.cache.close()

    if quiet:
        return asyncio.run(main())
    with Progress(
        TextColumn("[bold]synth[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}", markup=False),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("rows", total=len(pipeline.seed.pairs), counts="")

        def hook(_row_id: str, outcome: str) -> None:
            counts[outcome] = counts.get(outcome, 0) + 1
            text = " ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            progress.update(task, advance=1, counts=text)

        pipeline.progress = hook
        return asyncio.run(main())


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _print_summary(summary: dict[str, Any]) -> None:
    rows = summary["rows"]
    table = Table(title=f"synth: {summary['output']}", show_header=True)
    for col in ("stage", "in", "kept", "rejected", "keep rate", "top reasons"):
        table.add_column(col)
    for stage, s in summary["stages"].items():
        reasons = ", ".join(f"{k} ({v})" for k, v in list(s["reasons"].items())[:2])
        table.add_row(
            stage, str(s["in"]), str(s["kept"]), str(s["rejected"]), _fmt(s["keep_rate"], 3), reasons
        )
    out.print(table)
    run = summary["this_run"]["total"]
    tokens = summary["tokens"]
    cost = summary["cost_usd"]
    out.print(
        f"rows: {rows['input']} in, {rows['kept']} kept, {rows['rejected']} rejected, "
        f"{rows['unfinished']} unfinished"
        + (f" ({rows['deferred_to_batch']} waiting for a batch)" if rows["deferred_to_batch"] else "")
    )
    out.print(
        f"this run: {run['requests']} requests, {run['cache_hits']} cache hits, {run['retries']} retries, "
        f"{run['failures']} failed; {summary['this_run']['seconds']:.1f} s; cost ${_fmt(cost['this_run'], 4)}"
    )
    per = tokens["per_finished_pair"]
    out.print(
        f"tokens behind the rows: {tokens['prompt_tokens']} prompt + {tokens['completion_tokens']} completion "
        f"({_fmt(per['prompt_tokens'], 1)} + {_fmt(per['completion_tokens'], 1)} per finished pair); "
        f"cost ${_fmt(cost['all_answers'], 4)}, ${_fmt(cost['per_1000_pairs'], 2)} per 1,000 pairs"
    )


def _backend(backend: str, base_url: str | None, api_key_env: str, timeout: float, local_model: str) -> Any:  # type: ignore[no-untyped-def]
    if backend == "openai":
        from infembed.synth.llm import OpenAIBackend

        return OpenAIBackend(base_url=base_url, api_key=os.environ.get(api_key_env), timeout=timeout)
    if backend == "local":
        from infembed.synth.local import TransformersBackend

        return TransformersBackend.from_name(local_model)
    raise ExpectedError("--backend must be 'openai' or 'local'")


# ---------------------------------------------------------------------------------------------- commands
@app.command()
def run(
    seed_source: Seed,
    output: Output,
    limit: Limit = None,
    split: Split = "test",
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = "OPENAI_API_KEY",
    model: Model = "gpt-4o-mini",
    judge_model: JudgeModel = None,
    concurrency: Concurrency = 8,
    timeout: Timeout = 120.0,
    max_retries: MaxRetries = 6,
    retry_base: RetryBase = 1.0,
    cache_path: CachePath = None,
    no_cache: NoCache = False,
    temperature: Temperature = 0.0,
    max_tokens: MaxTokens = 512,
    judge_max_tokens: JudgeMaxTokens = None,
    distractors: Distractors = 4,
    answer_attempts: Attempts = 3,
    domain: Domain = "web",
    language: Language = None,
    seed: SeedOpt = 0,
    judge: Judge = True,
    backend: Backend = "openai",
    local_model: LocalModel = "smollm2",
    price: Prices = None,
    batch_prices: BatchPrices = False,
    max_consecutive_failures: MaxFailures = 3,
    quiet: Quiet = False,
    json_output: JsonOutput = "off",
) -> None:
    """Run the five stages over the seed pairs; writes OUTPUT/train.jsonl (InF-IR rows), rejects and a summary.

    Example: infembed synth run data/msmarco-seed --output runs/synth --limit 1000 --model gpt-4o-mini
    --judge-model o3-mini --concurrency 32
    """

    def go() -> None:
        backend_obj = _backend(backend, base_url, api_key_env, timeout, local_model)
        pipeline = _make_pipeline(
            seed_source,
            output,
            limit=limit,
            split=split,
            model=model if backend == "openai" or model != "gpt-4o-mini" else f"local:{local_model}",
            judge_model=judge_model,
            temperature=temperature,
            max_tokens=max_tokens,
            judge_max_tokens=judge_max_tokens,
            distractors=distractors,
            answer_attempts=answer_attempts,
            domain=domain,
            language=language,
            seed=seed,
            judge=judge,
            max_consecutive_failures=max_consecutive_failures,
            concurrency=concurrency,
            cache_path=cache_path,
            no_cache=no_cache,
            backend_obj=backend_obj,
            max_retries=max_retries,
            retry_base=retry_base,
            prices=price,
            batch_prices=batch_prices,
            json_output=json_output,
        )
        from infembed.synth.pipeline import SynthAborted

        try:
            summary = _run_with_progress(pipeline, quiet)
        except SynthAborted:
            summary = json.loads((output / "summary.json").read_text(encoding="utf-8"))
            answered = summary["this_run"]["total"]
            if answered["requests"] or answered["cache_hits"]:  # else the table holds only zeros
                _print_summary(summary)
            raise
        _print_summary(summary)

    _guard(go)


@app.command("export-batch")
def export_batch(
    seed_source: Seed,
    output: Output,
    batch_file: Annotated[Path, typer.Option(help="Where to write the Batch API input JSONL.")],
    limit: Limit = None,
    split: Split = "test",
    model: Model = "gpt-4o-mini",
    judge_model: JudgeModel = None,
    cache_path: CachePath = None,
    temperature: Temperature = 0.0,
    max_tokens: MaxTokens = 512,
    judge_max_tokens: JudgeMaxTokens = None,
    distractors: Distractors = 4,
    answer_attempts: Attempts = 3,
    domain: Domain = "web",
    language: Language = None,
    seed: SeedOpt = 0,
    judge: Judge = True,
    price: Prices = None,
) -> None:
    """Write the requests the run still needs as an OpenAI Batch API file (answers in the cache are used).

    Round trip: export-batch -> upload and run the batch -> import-batch -> export-batch again, until it
    reports no request left; then OUTPUT/train.jsonl is complete.
    """

    def go() -> None:
        from infembed.synth.batchfile import BatchCollector, write_batch_files

        collector = BatchCollector()
        pipeline = _make_pipeline(
            seed_source,
            output,
            limit=limit,
            split=split,
            model=model,
            judge_model=judge_model,
            temperature=temperature,
            max_tokens=max_tokens,
            judge_max_tokens=judge_max_tokens,
            distractors=distractors,
            answer_attempts=answer_attempts,
            domain=domain,
            language=language,
            seed=seed,
            judge=judge,
            max_consecutive_failures=1_000_000,
            concurrency=64,
            cache_path=cache_path,
            no_cache=False,
            backend_obj=collector,
            max_retries=0,
            retry_base=0.0,
            prices=price,
            batch_prices=True,
        )
        summary = _run_with_progress(pipeline, quiet=True)
        files = write_batch_files(batch_file, collector.requests.values())
        by_stage: dict[str, int] = {}
        for request in collector.requests.values():
            by_stage[request.stage] = by_stage.get(request.stage, 0) + 1
        if files:
            stages = ", ".join(f"{k} {v}" for k, v in sorted(by_stage.items()))
            out.print(
                f"{len(collector.requests)} requests ({stages}) written to {', '.join(map(str, files))}"
            )
            out.print(
                f"{summary['rows']['unfinished']} rows wait for them; after the batch: "
                f"infembed synth import-batch RESULTS.jsonl --cache {cache_path or output / 'cache.sqlite'}"
            )
        else:
            out.print(
                f"no request left: the run is complete ({summary['rows']['kept']} rows in {output}/train.jsonl)"
            )

    _guard(go)


@app.command("import-batch")
def import_batch(
    results: Annotated[
        list[Path], typer.Argument(metavar="RESULTS", help="Batch API output (and error) files.")
    ],
    cache_path: Annotated[
        Path, typer.Option("--cache", help="The run's response cache (OUTPUT/cache.sqlite).")
    ],
) -> None:
    """Store the answers of Batch API output files in the response cache."""

    def go() -> None:
        from infembed.synth.batchfile import import_batch_results
        from infembed.synth.llm import ResponseCache

        with ResponseCache(cache_path) as cache:
            report = import_batch_results(results, cache)
        out.print(
            f"imported {report.imported} answers ({report.already_cached} already cached) into {cache_path}"
        )
        if report.errors:
            out.print(f"{len(report.errors)} requests failed in the batch and will be exported again, e.g.:")
            for error in report.errors[:3]:
                out.print(f"  {error['custom_id'][:12]}... status {error['status']}: {error['message']}")

    _guard(go)


@app.command()
def stats(
    data: Annotated[
        list[Path],
        typer.Argument(
            metavar="DATA", help="InF-IR JSONL files or synth output dirs (compared side by side)."
        ),
    ],
    fields: Annotated[
        str, typer.Option(help="'groups' (instruction, query, passage) or 'fields' (each of the seven).")
    ] = "groups",
    max_samples: Annotated[
        int, typer.Option(min=2, help="Texts per group and data set (same N for all).")
    ] = 2000,
    embedding_model: Annotated[
        str | None, typer.Option(help="sentence-transformers model for APS (default: all-MiniLM-L6-v2).")
    ] = None,
    aps: Annotated[
        bool, typer.Option("--aps/--no-aps", help="Compute APS (needs the embedding model).")
    ] = True,
    map_png: Annotated[
        Path | None, typer.Option("--map", help="Write a 2-D map of the texts as PNG.")
    ] = None,
    map_method: Annotated[str, typer.Option(help="pca, or tsne (needs scikit-learn).")] = "pca",
    annotations: Annotated[
        list[Path] | None, typer.Option("--annotations", help="Annotation file(s) for Cohen's kappa.")
    ] = None,
    human: Annotated[
        list[str] | None, typer.Option("--human", help="Rater names that are human annotators.")
    ] = None,
    judge_run: Annotated[
        list[Path] | None,
        typer.Option("--judge-run", help="Add a run's judge choices as a rater (for kappa)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write every number to this JSON file.")
    ] = None,
    seed: SeedOpt = 0,
) -> None:
    """APS and INGF per field for several data sets, a 2-D map, Cohen's kappa and keep rates per stage."""

    def go() -> None:
        from infembed.data.jsonl import write_json
        from infembed.synth import stats as st

        report: dict[str, Any] = {}
        datasets = [st.load_dataset(p) for p in data]
        names = [d.name for d in datasets]
        if len(set(names)) != len(names):
            for i, d in enumerate(datasets):
                d.name = f"{d.name}#{i + 1}"
        if fields == "groups":
            groups = dict(st.GROUPS)
        elif fields == "fields":
            groups = {f: (f,) for fs in st.GROUPS.values() for f in fs}
        else:
            raise ExpectedError("--fields must be 'groups' or 'fields'")
        if map_png and not aps:
            raise ExpectedError("--map needs the embeddings: drop --no-aps")
        if map_method not in ("pca", "tsne"):
            raise ExpectedError("--map-method must be pca or tsne")
        embedder = st.Embedder(embedding_model) if aps else None
        result, samples = st.diversity(
            datasets, groups, max_samples=max_samples, embedder=embedder, seed=seed, with_aps=aps
        )
        table = Table(title="diversity (APS: lower = more diverse; INGF: higher = more diverse)")
        for col in ("texts", "data set", "N", "APS", "INGF-1", "INGF-2", "INGF-3", "INGF"):
            table.add_column(
                col, overflow="fold", justify="left" if col in ("texts", "data set") else "right"
            )
        for group, by_set in result.table.items():
            for i, d in enumerate(datasets):
                entry = by_set.get(d.name)
                if entry is None:
                    continue
                table.add_row(
                    group if i == 0 else "",
                    d.name,
                    str(result.samples[group]),
                    _fmt(entry.get("aps")),
                    *(_fmt(entry.get(f"ingf_{n}"), 1) for n in (1, 2, 3)),
                    _fmt(entry.get("ingf"), 1),
                    end_section=i == len(datasets) - 1,
                )
        out.print(table)
        report["diversity"] = {
            "table": result.table,
            "samples": result.samples,
            "embedding_model": result.embedding_model,
        }
        if map_png:
            path = st.plot_map(samples, map_png, method=map_method, seed=seed)
            out.print(f"map written to {path}")
            report["map"] = str(path)
        rates = {d.name: st.keep_rates(d.summary) for d in datasets if d.summary}
        if rates:
            keep = Table(title="keep rate per stage")
            keep.add_column("run")
            stages_seen = [s for r in rates.values() for s in r]
            stage_names = list(dict.fromkeys(stages_seen))
            for s in stage_names:
                keep.add_column(s)
            for name, r in rates.items():
                keep.add_row(
                    name,
                    *(
                        f"{_fmt(r[s]['keep_rate'], 3)} ({r[s]['kept']}/{r[s]['in']})" if s in r else "-"
                        for s in stage_names
                    ),
                )
            out.print(keep)
            report["keep_rates"] = rates
        if annotations or judge_run:
            parts = [st.read_annotations(p) for p in annotations or []]
            for run_dir in judge_run or []:
                labels: dict[str, dict[str, str]] = {}
                for row in st.judge_labels(run_dir, rater=f"judge:{Path(run_dir).name}"):
                    labels.setdefault(row["rater"], {})[row["item"]] = row["label"]
                parts.append(labels)
            merged = st.merge_annotations(parts)
            if len(merged) < 2:
                raise ExpectedError("Cohen's kappa needs labels from at least two raters")
            matrix = st.kappa_matrix(merged)
            raters = sorted(merged)
            kt = Table(title="Cohen's kappa (items in common)")
            kt.add_column("rater")
            for r in raters:
                kt.add_column(r)
            for a in raters:
                kt.add_row(
                    a,
                    *(
                        "1" if a == b else f"{_fmt(matrix[a][b]['kappa'], 3)} ({int(matrix[a][b]['n'])})"
                        for b in raters
                    ),
                )
            out.print(kt)
            report["kappa"] = matrix
            if human:
                vs = st.kappa_vs_humans(merged, human)
                out.print(
                    "mean kappa against the human annotators: "
                    + ", ".join(f"{k} {_fmt(v, 3)}" for k, v in vs.items())
                )
                report["kappa_vs_humans"] = vs
        if json_out:
            write_json(json_out, report)
            out.print(f"numbers written to {json_out}")

    _guard(go)


from infembed.cli import synth_benchmark as _synth_benchmark  # noqa: E402, F401  (registers "synth benchmark")


def main() -> None:
    app()


if __name__ == "__main__":  # run the imported module, on whose app "synth benchmark" is registered
    from infembed.cli.synth import main as _main

    _main()
