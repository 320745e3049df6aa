"""``infembed synth instructions``: labelled search instructions (excluding and plain) from an LLM, the training
data of the learned exclusion decomposer; see :mod:`infembed.synth.instructions`. Its setting flags are
generated from :class:`~infembed.synth.instructions.InstructionsConfig` and
:class:`~infembed.synth.llm.ClientConfig`; it registers on the ``synth`` app of :mod:`infembed.cli.synth_common`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infembed.cli.synth_common import (
    CLIENT_FLAGS,
    ConfigFile,
    Quiet,
    app,
    fmt,
    guard,
    out,
    run_and_report,
    stage_table,
    this_run_line,
)
from infembed.settings import settings_command, settings_with_file
from infembed.synth.instructions import InstructionsConfig
from infembed.synth.llm import ClientConfig

Output = Annotated[Path, typer.Option("--output", "-o", help="Run directory (created; a rerun resumes it).")]
#: the grid's lists take one name per flag, the flag repeated: --domain law --domain news
FLAGS = {
    **CLIENT_FLAGS,
    "domains": ("--domain",),
    "registers": ("--register",),
    "forms": ("--form",),
    "plain_forms": ("--plain-form",),
}


@app.command("instructions")
@settings_command(InstructionsConfig, ClientConfig, flags=FLAGS)
def instructions(
    settings: dict[str, Any],
    endpoint: dict[str, Any],
    output: Output,
    config: ConfigFile = None,
    quiet: Quiet = False,
) -> None:
    """Write labelled search instructions (text, excluded aspects, exclusion clauses) across domains,
    registers and forms; OUTPUT/instructions.jsonl is training data of `infembed decomposer train --data`.

    Example: infembed synth instructions --output runs/instructions --rows 3000 --model gpt-4o-mini
    --json-output json_schema --concurrency 16
    """

    def go() -> None:
        import dataclasses

        from infembed.synth.instructions import InstructionsRun
        from infembed.synth.run_state import writable_dir

        cfg, client_settings = settings_with_file(
            (InstructionsConfig, ClientConfig), (settings, endpoint), config
        )
        cfg = dataclasses.replace(cfg, model=client_settings.model_name(cfg.model))
        writable_dir(output)
        client = client_settings.make_client(output / "cache.sqlite", seed=cfg.seed)
        run = InstructionsRun(
            output,
            client,
            cfg,
            prices=client_settings.prices(),
            batch_prices=client_settings.batch_prices,
            allow_endpoint_change=client_settings.allow_endpoint_change,
        )
        run_and_report(run, quiet, print_summary, always=False)

    guard(go)


def print_summary(summary: dict[str, Any]) -> None:
    """The table and lines ``synth instructions`` prints from its ``summary.json``."""
    rows, batches = summary["rows"], summary["batches"]
    out.print(stage_table(summary, f"synth instructions: {summary['output']}"))
    out.print(
        f"instructions: {rows['asked']} asked, {rows['answered']} written, {rows['kept']} kept "
        f"({rows['excluding']} excluding, {rows['plain']} plain), {rows['rejected']} rejected, "
        f"{rows['unfinished']} unfinished ({batches['unfinished']} batches)"
    )
    out.print(this_run_line(summary))
    tokens, cost = summary["tokens"], summary["cost_usd"]
    per = tokens["per_finished_batch"]
    out.print(
        f"tokens: {tokens['prompt_tokens']} prompt + {tokens['completion_tokens']} completion "
        f"({fmt(per['prompt_tokens'], 1)} + {fmt(per['completion_tokens'], 1)} per batch); "
        f"cost ${fmt(cost['all_answers'], 4)}, ${fmt(cost['per_1000_rows'], 2)} per 1,000 kept instructions"
    )
    if rows["kept"]:
        out.print(f"written to {summary['file']} (infembed decomposer train --data {summary['file']})")
