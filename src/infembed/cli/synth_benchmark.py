"""``infembed synth benchmark``: an instruction benchmark (FollowIR style) from a collection with relevance
judgments, written by an LLM; see :mod:`infembed.synth.benchmark`. Its setting flags are generated from
:class:`~infembed.synth.benchmark.BenchmarkConfig` and :class:`~infembed.synth.llm.ClientConfig`; it registers
on the ``synth`` app of :mod:`infembed.cli.synth_common`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infembed.cli.synth_common import (
    CLIENT_FLAGS,
    ConfigFile,
    Quiet,
    Split,
    app,
    fmt,
    guard,
    out,
    run_and_report,
    stage_table,
    this_run_line,
)
from infembed.settings import settings_command, settings_with_file
from infembed.synth.benchmark import BenchmarkConfig
from infembed.synth.llm import ClientConfig

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
FLAGS = {
    **CLIENT_FLAGS,
    "max_passage_chars": ("--max-document-chars",),
    "max_documents_in_prompt": ("--max-documents",),
}
#: SynthConfig settings of the InF-IR stages that a benchmark build does not use
UNUSED = ("domain", "language", "style", "distractors", "judge")


@app.command("benchmark")
@settings_command(BenchmarkConfig, ClientConfig, flags=FLAGS, exclude=UNUSED)
def benchmark(
    bench: dict[str, Any],
    endpoint: dict[str, Any],
    source: Source,
    output: Output,
    limit: Annotated[int | None, typer.Option(help="Use the first N eligible queries only.")] = None,
    split: Split = "test",
    config: ConfigFile = None,
    quiet: Quiet = False,
) -> None:
    """Write an instruction benchmark: per query an original instruction consistent with its relevant documents,
    a narrowed (changed) instruction, and every relevant document re-judged against it. `infembed eval -b OUTPUT`
    reads the result.

    Example: infembed synth benchmark data/raw/cranfield --output bench/cranfield-llm --limit 40
    --model gpt-4o-mini --exclusions
    """

    def go() -> None:
        import dataclasses

        from infembed.synth.benchmark import WORK_DIR, BenchmarkBuilder, load_judged
        from infembed.synth.run_state import writable_dir

        settings, client_settings = settings_with_file(
            (BenchmarkConfig, ClientConfig), (bench, endpoint), config
        )
        settings = dataclasses.replace(settings, model=client_settings.model_name(settings.model))
        collection = load_judged(
            source,
            split=split,
            limit=limit,
            min_relevant=settings.min_relevant,
            max_relevant=settings.max_relevant,
        )
        writable_dir(output)
        writable_dir(output / WORK_DIR)
        client = client_settings.make_client(output / WORK_DIR / "cache.sqlite", seed=settings.seed)
        builder = BenchmarkBuilder(
            collection,
            output,
            client,
            settings,
            prices=client_settings.prices(),
            batch_prices=client_settings.batch_prices,
            allow_endpoint_change=client_settings.allow_endpoint_change,
        )
        run_and_report(builder, quiet, print_summary)

    guard(go)


def print_summary(summary: dict[str, Any]) -> None:
    rows, docs = summary["rows"], summary["documents"]
    title = f"synth benchmark: {summary['output']}"
    out.print(stage_table(summary, title, {"parseable": summary["parseable_share"]}))
    out.print(
        f"queries: {rows['input']} in, {rows['kept']} kept, {rows['rejected']} rejected, {rows['unfinished']} "
        f"unfinished; relevant documents of the kept queries: {docs['relevant_og']}, "
        f"{docs['lost_relevance']} lost relevance under the changed instruction"
    )
    cost, tokens = summary["cost_usd"], summary["tokens"]
    per = tokens["per_finished_query"]
    out.print(this_run_line(summary))
    out.print(
        f"tokens: {tokens['prompt_tokens']} prompt + {tokens['completion_tokens']} completion "
        f"({fmt(per['prompt_tokens'], 1)} + {fmt(per['completion_tokens'], 1)} per finished query); "
        f"cost ${fmt(cost['all_answers'], 4)}, ${fmt(cost['per_1000_queries'], 2)} per 1,000 queries"
    )
    for path in summary.get("benchmark") or []:
        out.print(f"benchmark written to {path} (infembed eval -b {path})")
