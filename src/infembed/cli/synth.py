"""``infembed synth``: make InF-IR training rows from (query, passage) pairs with an LLM, and analyse them.

Thin commands over :mod:`infembed.synth`; run ``infembed synth COMMAND --help``. Also runnable alone as
``python -m infembed.cli.synth``. This module holds ``run``, ``export-batch`` and ``import-batch``, and
registers ``stats`` (:mod:`infembed.cli.synth_report`), ``benchmark`` (:mod:`infembed.cli.synth_benchmark`)
and ``instructions`` (:mod:`infembed.cli.synth_instructions`) on the same app (:mod:`infembed.cli.synth_common`).
Their setting flags are generated from :class:`~infembed.synth.pipeline.SynthConfig` and
:class:`~infembed.synth.llm.ClientConfig`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from infembed.cli.synth_common import (
    CLIENT_FLAGS,
    ConfigFile,
    ExpectedError,
    Quiet,
    Split,
    app,
    fmt,
    guard,
    out,
    run_and_report,
    run_with_progress,
    stage_table,
    this_run_line,
)
from infembed.settings import settings_command, settings_with_file
from infembed.synth.llm import ClientConfig
from infembed.synth.pipeline import Pipeline, SynthConfig, make_pipeline

Seed = Annotated[
    str,
    typer.Argument(
        metavar="SEED",
        help="Seed pairs: a BEIR dir, a JSONL of {query, passage}, or 'msmarco' (hub, needs --limit).",
    ),
]
Output = Annotated[Path, typer.Option("--output", "-o", help="Run directory (created; a rerun resumes it).")]
Limit = Annotated[int | None, typer.Option(help="Use the first N pairs only.")]
#: the ClientConfig settings export-batch uses (it sends nothing: no endpoint, retries or concurrency)
_BATCH_CLIENT = ("cache", "price", "allow_endpoint_change")


def _pipeline(
    seed_source: str,
    output: Path,
    limit: int | None,
    split: str,
    settings: SynthConfig,
    client_settings: ClientConfig,
    *,
    batch_prices: bool,
    backend: Any = None,
) -> Pipeline:
    """The seed pairs (loaded first: a bad seed fails before anything is written), the client, the pipeline."""
    from infembed.synth.inputs import load_seed
    from infembed.synth.run_state import writable_dir

    data = load_seed(seed_source, limit=limit, split=split)
    if not data.pairs:
        raise ExpectedError(f"no pairs found in {seed_source}")
    writable_dir(output)
    client = client_settings.make_client(output / "cache.sqlite", seed=settings.seed, backend=backend)
    prices = client_settings.prices()
    return make_pipeline(  # Pipeline, or NegationPipeline for --style negation
        data,
        output,
        client,
        settings,
        prices=prices,
        batch_prices=batch_prices,
        allow_endpoint_change=client_settings.allow_endpoint_change,
    )


@app.command()
@settings_command(SynthConfig, ClientConfig, flags=CLIENT_FLAGS)
def run(
    synth: dict[str, Any],
    endpoint: dict[str, Any],
    seed_source: Seed,
    output: Output,
    limit: Limit = None,
    split: Split = "test",
    config: ConfigFile = None,
    quiet: Quiet = False,
) -> None:
    """Run the five stages over the seed pairs; writes OUTPUT/train.jsonl (InF-IR rows), rejects and a summary.

    Example: infembed synth run data/msmarco-seed --output runs/synth --limit 1000 --model gpt-4o-mini
    --judge-model o3-mini --concurrency 32
    """

    def go() -> None:
        settings, client_settings = settings_with_file((SynthConfig, ClientConfig), (synth, endpoint), config)
        settings = dataclasses.replace(settings, model=client_settings.model_name(settings.model))
        batch_prices = client_settings.batch_prices
        pipeline = _pipeline(
            seed_source, output, limit, split, settings, client_settings, batch_prices=batch_prices
        )
        run_and_report(pipeline, quiet, print_summary, always=False)

    guard(go)


@app.command("export-batch")
@settings_command(
    SynthConfig,
    ClientConfig,
    flags=CLIENT_FLAGS,
    exclude=(
        "max_consecutive_failures",
        *(f.name for f in dataclasses.fields(ClientConfig) if f.name not in _BATCH_CLIENT),
    ),
)
def export_batch(
    synth: dict[str, Any],
    endpoint: dict[str, Any],
    seed_source: Seed,
    output: Output,
    batch_file: Annotated[Path, typer.Option(help="Where to write the Batch API input JSONL.")],
    limit: Limit = None,
    split: Split = "test",
    config: ConfigFile = None,
) -> None:
    """Write the requests the run still needs as an OpenAI Batch API file (answers in the cache are used).

    Round trip: export-batch -> upload and run the batch -> import-batch -> export-batch again, until it
    reports no request left; then OUTPUT/train.jsonl is complete. The same --config as the run's may be given
    (its endpoint settings are not used).
    """

    def go() -> None:
        from infembed.synth.batchfile import BatchCollector, write_batch_files

        settings, client_settings = settings_with_file((SynthConfig, ClientConfig), (synth, endpoint), config)
        settings = dataclasses.replace(settings, max_consecutive_failures=1_000_000)
        client_settings = dataclasses.replace(client_settings, concurrency=64, no_cache=False, max_retries=0)
        collector = BatchCollector()
        pipeline = _pipeline(
            seed_source, output, limit, split, settings, client_settings, batch_prices=True, backend=collector
        )
        summary = run_with_progress(pipeline, quiet=True)
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
                f"infembed synth import-batch RESULTS.jsonl --cache {pipeline.client.cache.path}"
            )
        else:
            out.print(
                f"no request left: the run is complete ({summary['rows']['kept']} rows in {output}/train.jsonl)"
            )

    guard(go)


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
        from infembed.synth.cache import ResponseCache

        with ResponseCache(cache_path) as cache:
            report = import_batch_results(results, cache)
        out.print(
            f"imported {report.imported} answers ({report.already_cached} already cached) into {cache_path}"
        )
        if report.errors:
            out.print(f"{len(report.errors)} requests failed in the batch and will be exported again, e.g.:")
            for error in report.errors[:3]:
                out.print(f"  {error['custom_id'][:12]}... status {error['status']}: {error['message']}")

    guard(go)


def print_summary(summary: dict[str, Any]) -> None:
    """The table and lines ``synth run`` prints from its ``summary.json``."""
    rows = summary["rows"]
    tokens = summary["tokens"]
    cost = summary["cost_usd"]
    out.print(stage_table(summary, f"synth: {summary['output']}"))
    out.print(
        f"rows: {rows['input']} in, {rows['kept']} kept, {rows['rejected']} rejected, "
        f"{rows['unfinished']} unfinished"
        + (f" ({rows['deferred_to_batch']} waiting for a batch)" if rows["deferred_to_batch"] else "")
    )
    out.print(this_run_line(summary))
    per = tokens["per_finished_pair"]
    out.print(
        f"tokens behind the rows: {tokens['prompt_tokens']} prompt + {tokens['completion_tokens']} completion "
        f"({fmt(per['prompt_tokens'], 1)} + {fmt(per['completion_tokens'], 1)} per finished pair); "
        f"cost ${fmt(cost['all_answers'], 4)}, ${fmt(cost['per_1000_pairs'], 2)} per 1,000 pairs"
    )


# registered after run, export-batch and import-batch, so that --help lists the commands in this order
from infembed.cli import synth_benchmark as _synth_benchmark  # noqa: E402, F401  (registers "synth benchmark")
from infembed.cli import synth_instructions as _synth_instructions  # noqa: E402, F401  (registers "synth instructions")
from infembed.cli import synth_report as _synth_report  # noqa: E402, F401  (registers "synth stats")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
