"""``infembed synth benchmark``: an instruction benchmark (FollowIR style) from a collection with relevance
judgments, written by an LLM; see :mod:`infembed.synth.benchmark`. Registered on ``infembed synth`` by
:mod:`infembed.cli.synth`, whose options it shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infembed.cli.synth import (
    ApiKeyEnv,
    Attempts,
    BaseUrl,
    BatchPrices,
    CachePath,
    Concurrency,
    ExpectedError,
    JsonOutput,
    JudgeMaxTokens,
    JudgeModel,
    LocalModel,
    MaxFailures,
    MaxRetries,
    MaxTokens,
    Model,
    NoCache,
    Prices,
    Quiet,
    RetryBase,
    SeedOpt,
    Split,
    Temperature,
    Timeout,
    _backend,
    _fmt,
    _guard,
    _run_with_progress,
    app,
    out,
)
from infembed.cli.synth import Backend as BackendOpt

Source = Annotated[
    str,
    typer.Argument(
        metavar="SOURCE",
        help="Corpus, queries and relevance judgments: a BEIR dir, an instruction benchmark dir, or a SMART "
        "collection dir (cran.all.1400, cran.qry, cranqrel).",
    ),
]
Output = Annotated[
    Path, typer.Option("--output", "-o", help="The benchmark dir to write (a rerun resumes it).")
]


@app.command("benchmark")
def benchmark(
    source: Source,
    output: Output,
    limit: Annotated[int | None, typer.Option(help="Use the first N eligible queries only.")] = None,
    split: Split = "test",
    exclusions: Annotated[
        bool,
        typer.Option(
            "--exclusions/--no-exclusions",
            help="Also write OUTPUT/exclusions: the narrowing stated only as an exclusion.",
        ),
    ] = False,
    min_relevant: Annotated[
        int, typer.Option(min=1, help="Use queries with at least N relevant documents.")
    ] = 3,
    max_relevant: Annotated[int, typer.Option(min=1, help="... and at most N.")] = 20,
    min_kept: Annotated[
        int, typer.Option(min=0, help="Reject a query when fewer documents stay relevant when narrowed.")
    ] = 1,
    min_lost: Annotated[
        int, typer.Option(min=1, help="Reject a query when fewer documents lose relevance when narrowed.")
    ] = 1,
    max_kept_share: Annotated[
        float, typer.Option(help="Reject a query when a larger share of its documents stays relevant.")
    ] = 0.8,
    max_documents: Annotated[
        int, typer.Option(min=1, help="Relevant documents shown to the writer per query (all are re-judged).")
    ] = 10,
    max_document_chars: Annotated[
        int, typer.Option(min=100, help="Each document in a prompt is cut to this many characters.")
    ] = 1000,
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
    answer_attempts: Attempts = 3,
    seed: SeedOpt = 0,
    backend: BackendOpt = "openai",
    local_model: LocalModel = "smollm2",
    price: Prices = None,
    batch_prices: BatchPrices = False,
    max_consecutive_failures: MaxFailures = 3,
    json_output: JsonOutput = "off",
    quiet: Quiet = False,
) -> None:
    """Write an instruction benchmark: per query an original instruction consistent with its relevant documents,
    a narrowed (changed) instruction, and every relevant document re-judged against it. `infembed eval -b OUTPUT`
    reads the result.

    Example: infembed synth benchmark data/raw/cranfield --output bench/cranfield-llm --limit 40
    --model gpt-4o-mini --exclusions
    """

    def go() -> None:
        import json

        from infembed.synth.benchmark import BenchmarkBuilder, BenchmarkConfig, load_judged
        from infembed.synth.costs import parse_price
        from infembed.synth.llm import LLMClient, ResponseCache
        from infembed.synth.pipeline import SynthAborted

        try:
            config = BenchmarkConfig(
                model=model if backend == "openai" or model != "gpt-4o-mini" else f"local:{local_model}",
                judge_model=judge_model,
                temperature=temperature,
                max_tokens=max_tokens,
                judge_max_tokens=judge_max_tokens,
                answer_attempts=answer_attempts,
                seed=seed,
                max_consecutive_failures=max_consecutive_failures,
                json_output=json_output,
                max_passage_chars=max_document_chars,
                min_relevant=min_relevant,
                max_relevant=max_relevant,
                min_kept=min_kept,
                min_lost=min_lost,
                max_kept_share=max_kept_share,
                max_documents_in_prompt=max_documents,
                exclusions=exclusions,
            )
        except ValueError as error:
            raise ExpectedError(str(error)) from None
        collection = load_judged(
            source, split=split, limit=limit, min_relevant=min_relevant, max_relevant=max_relevant
        )
        backend_obj = _backend(backend, base_url, api_key_env, timeout, local_model)
        cache = None if no_cache else ResponseCache(cache_path or output / "synth" / "cache.sqlite")
        client = LLMClient(
            backend_obj,
            cache,
            concurrency=concurrency,
            max_retries=max_retries,
            backoff_base=retry_base,
            seed=seed,
        )
        prices = dict(parse_price(p) for p in (price or []))
        builder = BenchmarkBuilder(
            collection, output, client, config, prices=prices, batch_prices=batch_prices
        )
        try:
            summary = _run_with_progress(builder, quiet)
        except SynthAborted:
            print_summary(json.loads((output / "synth" / "summary.json").read_text(encoding="utf-8")))
            raise
        print_summary(summary)

    _guard(go)


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    rows, docs = summary["rows"], summary["documents"]
    table = Table(title=f"synth benchmark: {summary['output']}", show_header=True)
    for col in ("stage", "in", "kept", "rejected", "keep rate", "parseable", "top reasons"):
        table.add_column(col)
    for stage, s in summary["stages"].items():
        reasons = ", ".join(f"{k} ({v})" for k, v in list(s["reasons"].items())[:2])
        share = summary["parseable_share"].get(stage)
        table.add_row(
            stage,
            str(s["in"]),
            str(s["kept"]),
            str(s["rejected"]),
            _fmt(s["keep_rate"], 3),
            _fmt(share, 3),
            reasons,
        )
    out.print(table)
    out.print(
        f"queries: {rows['input']} in, {rows['kept']} kept, {rows['rejected']} rejected, {rows['unfinished']} "
        f"unfinished; relevant documents of the kept queries: {docs['relevant_og']}, "
        f"{docs['lost_relevance']} lost relevance under the changed instruction"
    )
    run = summary["this_run"]["total"]
    cost, tokens = summary["cost_usd"], summary["tokens"]
    per = tokens["per_finished_query"]
    out.print(
        f"this run: {run['requests']} requests, {run['cache_hits']} cache hits, {run['retries']} retries, "
        f"{run['failures']} failed; {summary['this_run']['seconds']:.1f} s; cost ${_fmt(cost['this_run'], 4)}"
    )
    out.print(
        f"tokens: {tokens['prompt_tokens']} prompt + {tokens['completion_tokens']} completion "
        f"({_fmt(per['prompt_tokens'], 1)} + {_fmt(per['completion_tokens'], 1)} per finished query); "
        f"cost ${_fmt(cost['all_answers'], 4)}, ${_fmt(cost['per_1000_queries'], 2)} per 1,000 queries"
    )
    for path in summary.get("benchmark") or []:
        out.print(f"benchmark written to {path} (infembed eval -b {path})")
