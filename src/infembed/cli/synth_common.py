"""What the ``infembed synth`` commands share: the ``synth`` typer app, its consoles, the one-line error
guard, the progress bar, and the options that are not settings (the settings are generated from
:class:`~infembed.synth.pipeline.SynthConfig`, :class:`~infembed.synth.benchmark.BenchmarkConfig` and
:class:`~infembed.synth.llm.ClientConfig` by :func:`infembed.settings.settings_command`).

The commands live in :mod:`infembed.cli.synth` (run, export-batch, import-batch), :mod:`infembed.cli.synth_report`
(stats) and :mod:`infembed.cli.synth_benchmark` (benchmark); each imports this module, none imports another.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
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

#: flag names of the ClientConfig settings that are not --field-name
CLIENT_FLAGS = {"no_cache": ("--no-cache",)}

Split = Annotated[str, typer.Option(help="qrels split of a BEIR dir.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
ConfigFile = Annotated[
    Path | None,
    typer.Option("--config", help="YAML/JSON file with any of the settings below; flags override it."),
]


class ExpectedError(Exception):
    """A failure to report in one line, exit status 2."""


def fail(message: str) -> None:
    console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False)
    raise typer.Exit(2)


def guard(fn: Callable[[], None]) -> None:
    """Report expected failures (bad input or settings, endpoint down, missing package) without a traceback."""
    from infembed.cli import debug_mode
    from infembed.data.errors import EXPECTED_ERRORS, error_message, expected_os_error
    from infembed.synth.pipeline import SynthAborted

    try:
        fn()
    except (*EXPECTED_ERRORS, SynthAborted, ExpectedError, ImportError) as error:
        if debug_mode():
            raise
        fail(error_message(error))  # an OSError about a file as 'PATH: reason', like every other verb
    except OSError as error:
        if debug_mode() or not expected_os_error(error):
            raise
        fail(error_message(error))
    except KeyboardInterrupt:
        fail("interrupted; everything done so far is saved, run the same command again to resume")


def fmt(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def run_with_progress(pipeline: Any, quiet: bool) -> dict[str, Any]:
    """Run a pipeline (or benchmark builder) to its end, with a progress bar unless ``quiet``; the client and
    its cache are closed afterwards."""
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


@contextlib.contextmanager
def steps() -> Iterator[Callable[..., Any]]:
    """Progress of the steps of a command that takes long (loading a model, embedding ...), one line each, in
    the style of the other bars (``index``'s): ``with steps() as step: with step("loading"): ...``; a step
    ``with step("embedding", texts=True) as progress`` gets a ``progress(done, total)`` to count its work."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[count]}", markup=False),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:

        @contextlib.contextmanager
        def step(description: str, texts: bool = False) -> Iterator[Callable[[int, int], None] | None]:
            task = bar.add_task(description, total=None, count="")

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, count=f"{done}/{total}")

            yield progress if texts else None
            total = bar.tasks[task].total
            bar.update(task, total=total or 1, completed=total or 1)

        yield step


def run_and_report(
    pipeline: Any, quiet: bool, report: Callable[[dict[str, Any]], None], *, always: bool = True
) -> None:
    """Run with :func:`run_with_progress` and ``report`` the summary, also when the run stops early (then from
    the ``summary.json`` it wrote, unless ``always`` is False and it answered nothing) before the error."""
    from infembed.synth.pipeline import SUMMARY_FILE, SynthAborted

    try:
        summary = run_with_progress(pipeline, quiet)
    except SynthAborted:
        summary = json.loads((pipeline.out_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
        answered = summary["this_run"]["total"]
        if always or answered["requests"] or answered["cache_hits"]:  # else the table holds only zeros
            report(summary)
        raise
    report(summary)


def stage_table(summary: dict[str, Any], title: str, extra: dict[str, dict[str, Any]] | None = None) -> Any:
    """The per-stage table of a summary: in, kept, rejected, keep rate (and ``extra`` columns), top reasons."""
    from rich.table import Table

    extra = extra or {}
    table = Table(title=title, show_header=True)
    for col in ("stage", "in", "kept", "rejected", "keep rate", *extra, "top reasons"):
        table.add_column(col)
    for stage, s in summary["stages"].items():
        reasons = ", ".join(f"{k} ({v})" for k, v in list(s["reasons"].items())[:2])
        counts = (str(s["in"]), str(s["kept"]), str(s["rejected"]), fmt(s["keep_rate"], 3))
        table.add_row(stage, *counts, *(fmt(col.get(stage), 3) for col in extra.values()), reasons)
    return table


def this_run_line(summary: dict[str, Any]) -> str:
    run = summary["this_run"]["total"]
    return (
        f"this run: {run['requests']} requests, {run['cache_hits']} cache hits, {run['retries']} retries, "
        f"{run['failures']} failed; {summary['this_run']['seconds']:.1f} s; "
        f"cost ${fmt(summary['cost_usd']['this_run'], 4)}"
    )
