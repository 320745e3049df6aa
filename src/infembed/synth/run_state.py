"""What a run's output directory holds and says: the record files' names, :class:`RunState` (what the files
say is done, read back on every resume) and :func:`summarize` (the ``summary.json`` of a run)."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infembed.data.errors import DataError
from infembed.data.jsonl import JsonlAppender, ensure_dir, iter_jsonl, write_jsonl
from infembed.synth.costs import price_for
from infembed.synth.endpoint import describe_endpoint
from infembed.synth.inputs import SeedPair
from infembed.synth.llm import UsageMeter
from infembed.synth.stages import SCENARIO_TEXT, SCENARIOS, new_usage

if TYPE_CHECKING:
    from infembed.synth.pipeline import Pipeline

STAGE_FILES = {
    "instruction": "instructions.jsonl",
    "poison": "poisoned.jsonl",
    "negatives": "negatives.jsonl",
    "judge": "judged.jsonl",
}
REJECTS_FILE = "rejects.jsonl"
TRAIN_FILE = "train.jsonl"
SUMMARY_FILE = "summary.json"
RUN_FILE = "run.json"


def writable_dir(path: str | Path, flag: str = "--output") -> Path:
    """Create the directory ``path`` and check that files can be made in it, or one :class:`DataError`
    naming it (a read-only directory, a read-only file system), before any work is done."""
    path = Path(path)
    try:
        ensure_dir(path)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        raise DataError(f"cannot write there ({error.strerror or error})", path, field=flag) from None
    return path


def check_run_file(
    path: Path,
    run: dict[str, Any],
    fingerprint: Sequence[str],
    *,
    allow_endpoint_change: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Compare ``run`` (``config``, ``endpoint``, ...) with the ``run.json`` at ``path``: a setting of
    ``fingerprint`` (those that change rows) that differs is refused; so is another endpoint (its URL or the
    model it serves) unless ``allow_endpoint_change``, and then the old endpoint goes to
    ``previous_endpoints``. Returns what to write to ``path`` and whether the endpoint changed."""
    saved: dict[str, Any] = {}
    if path.exists():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved = {}
        saved = saved if isinstance(saved, dict) else {}
    previous, current = saved.get("config") or {}, run["config"]
    changed = [k for k in fingerprint if k in previous and previous[k] != current.get(k)]
    if changed:
        raise DataError(
            "this output directory was made with other settings: "
            + ", ".join(f"{k}={previous[k]!r} (now {current.get(k)!r})" for k in changed),
            path,
            hint="use the same settings to resume, or a new --output",
        )
    history = list(saved.get("previous_endpoints") or [])
    old, new = saved.get("endpoint"), run.get("endpoint")
    moved = old is not None and new is not None and old != new
    if moved:
        if not allow_endpoint_change:
            was, now = describe_endpoint(old), describe_endpoint(new)
            if was == now:
                now += ", which reports other details of the model it serves"
            raise DataError(
                f"this output directory was made against another endpoint: {was} (now {now})",
                path,
                hint="resume against the same endpoint and model, use a new --output, or give "
                "--allow-endpoint-change to finish it here (its unfinished rows are then made again)",
            )
        history.append(old)
    record = {**run, "endpoint": new if new is not None else old}
    if history:
        record["previous_endpoints"] = history
    return record, moved


def drop_records(out_dir: Path, stage_files: dict[str, str], ids: set[str]) -> None:
    """Rewrite the record files without the records of ``ids`` (rows to be made again from the start)."""
    for name in stage_files.values():
        path = out_dir / name
        if not path.exists():
            continue
        records = [obj for _, obj in iter_jsonl(path)]
        if any(str(r.get("id")) in ids for r in records):
            write_jsonl(path, [r for r in records if str(r.get("id")) not in ids])


@dataclass
class RunState:
    """What the files in the output directory say is done."""

    records: dict[str, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {s: {} for s in STAGE_FILES}
    )
    rejects: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, out_dir: Path, stage_files: dict[str, str] | None = None) -> RunState:
        """The records of ``stage_files`` (stage -> file name; default: the InF-IR stages) and the rejects."""
        stage_files = stage_files or STAGE_FILES
        state = cls(records={s: {} for s in stage_files})
        for stage, name in stage_files.items():
            path = out_dir / name
            if path.exists():
                JsonlAppender(path).close()  # cut a line torn by a kill before reading
                for _, obj in iter_jsonl(path):
                    state.records[stage].setdefault(str(obj["id"]), obj)
        path = out_dir / REJECTS_FILE
        if path.exists():
            JsonlAppender(path).close()
            for _, obj in iter_jsonl(path):
                state.rejects.setdefault(str(obj["id"]), obj)
        return state

    def row(self, pair: SeedPair) -> dict[str, str] | None:
        """The assembled InF-IR fields of a row whose three generation stages are done."""
        try:
            inst = self.records["instruction"][pair.id]
            poison = self.records["poison"][pair.id]
            neg = self.records["negatives"][pair.id]
        except KeyError:
            return None
        return {
            "query_positive": pair.query,
            "instruction_positive": inst["instruction_positive"],
            "document_positive": pair.passage,
            "instruction_negative": poison["instruction_negative"],
            "query_negative": poison["query_negative"],
            "hard_negative_document_1": neg["hard_negative_document_1"],
            "hard_negative_document_2": neg["hard_negative_document_2"],
        }


def _stage_models(pipeline: Pipeline) -> dict[str, str]:
    settings = pipeline.stages.settings
    return {s: settings.judge_model if s == "judge" else settings.model for s in pipeline.stage_order}


def summarize(pipeline: Pipeline, state: RunState, kept: int, seconds: float) -> dict[str, Any]:
    """The ``summary.json`` of a run: counts and keep rate per stage (with the top reasons), the tokens of every
    answer behind the rows, their cost, and what this process asked the endpoint for. The stages are the
    pipeline's ``stage_order`` (``rules`` passes with the record of the stage before it)."""
    ids = [p.id for p in pipeline.seed.pairs]
    order = pipeline.stage_order
    before_rules = order[order.index("rules") - 1]
    passed = Counter[str]()
    rejected = Counter[str]()
    reasons: dict[str, Counter[str]] = {s: Counter() for s in order}
    for pid in ids:
        reject = state.rejects.get(pid)
        for stage in order:
            if stage == "judge" and not pipeline.config.judge:
                break
            if reject is not None and reject["stage"] == stage:
                rejected[stage] += 1
                reasons[stage].update(pipeline.reason_kinds(reject))
                break
            if stage == "rules":
                done = pid in state.records[before_rules]
            else:
                done = pid in state.records[stage]
            if not done:
                break  # not through this stage yet
            passed[stage] += 1
    per_stage = {}
    for stage in order:
        if stage == "judge" and not pipeline.config.judge:
            continue
        n_in, n_out = passed[stage] + rejected[stage], passed[stage]
        per_stage[stage] = {
            "in": n_in,
            "kept": n_out,
            "rejected": rejected[stage],
            "keep_rate": round(n_out / n_in, 4) if n_in else None,
            "reasons": dict(reasons[stage].most_common()),
        }
    # tokens of every answer behind the rows (fetched now or earlier, or read from the cache)
    tokens = stage_tokens(state, pipeline.stage_files)
    last = "judge" if pipeline.config.judge else "rules"
    finished = passed[last] + sum(1 for pid in ids if pid in state.rejects)
    return {
        "source": pipeline.seed.source,
        "output": str(pipeline.out_dir),
        "models": {
            "generation": pipeline.stages.settings.model,
            "judge": pipeline.stages.settings.judge_model,
        },
        "rows": {
            "input": len(ids),
            "kept": kept,
            "rejected": sum(1 for pid in ids if pid in state.rejects),
            "unfinished": len(ids) - finished,
            "deferred_to_batch": pipeline._deferred,
        },
        "keep_rate": round(kept / finished, 4) if finished else None,
        "stages": per_stage,
        **tokens_and_cost(pipeline, tokens, _stage_models(pipeline), finished, ("pair", "pairs")),
        "this_run": {
            "seconds": round(seconds, 3),
            "outcomes": dict(pipeline._outcomes),
            **pipeline.client.meter.to_json(),
        },
    }


def stage_tokens(state: RunState, stage_files: dict[str, str]) -> dict[str, dict[str, int]]:
    """The token usage of every answer behind the records of each stage, kept or rejected."""
    tokens = {stage: new_usage() for stage in stage_files}
    for stage in stage_files:
        rejected = [r for r in state.rejects.values() if r.get("stage") == stage]
        for record in [*state.records[stage].values(), *rejected]:
            for k, v in (record.get("usage") or {}).items():
                tokens[stage][k] = tokens[stage].get(k, 0) + int(v)
    return tokens


def tokens_and_cost(
    pipeline: Pipeline,
    tokens: dict[str, dict[str, int]],
    models: dict[str, str],
    finished: int,
    unit: tuple[str, str],
) -> dict[str, Any]:
    """The ``tokens`` and ``cost_usd`` entries of a summary (of ``synth run``, unit ``("pair", "pairs")``,
    and of ``synth benchmark``, ``("query", "queries")``): every answer's tokens and cost per stage and per
    finished unit, and
    the cost of what this process fetched. A cost is None where a model's price is unknown."""
    cost_total: float | None = 0.0
    costs: dict[str, float | None] = {}
    for stage, usage in tokens.items():
        price = price_for(models[stage], pipeline.prices)
        if price is None:
            costs[stage] = None
            cost_total = None
            continue
        costs[stage] = round(
            price.cost(usage["prompt_tokens"], usage["completion_tokens"], pipeline.batch_prices), 6
        )
        if cost_total is not None:
            cost_total += costs[stage]
    meter: UsageMeter = pipeline.client.meter
    this_run_cost: float | None = 0.0
    for stage, used in meter.stages.items():
        price = price_for(models.get(stage, pipeline.stages.settings.model), pipeline.prices)
        if price is None:
            if used.requests:
                this_run_cost = None
            continue
        if this_run_cost is not None:
            this_run_cost += price.cost(used.prompt_tokens, used.completion_tokens, pipeline.batch_prices)
    all_prompt = sum(u["prompt_tokens"] for u in tokens.values())
    all_completion = sum(u["completion_tokens"] for u in tokens.values())
    return {
        "tokens": {
            "per_stage": tokens,
            "prompt_tokens": all_prompt,
            "completion_tokens": all_completion,
            f"per_finished_{unit[0]}": {
                "prompt_tokens": round(all_prompt / finished, 1) if finished else None,
                "completion_tokens": round(all_completion / finished, 1) if finished else None,
            },
        },
        "cost_usd": {
            "all_answers": round(cost_total, 6) if cost_total is not None else None,
            "per_stage": costs,
            "this_run": round(this_run_cost, 6) if this_run_cost is not None else None,
            f"per_1000_{unit[1]}": round(cost_total / finished * 1000, 4)
            if cost_total is not None and finished
            else None,
            "batch_prices": pipeline.batch_prices,
        },
    }


def reason_kinds(reject: dict[str, Any]) -> list[str]:
    """Reasons grouped for the summary: the judge's per scenario, others without their details."""
    choices = (reject.get("detail") or {}).get("judge")
    if reject.get("stage") == "judge" and isinstance(choices, dict):
        intended = {name: label for name, _, _, label in SCENARIOS}
        return [
            f"judge wrong on {SCENARIO_TEXT[n]}" for n, label in choices.items() if label != intended.get(n)
        ]
    head = str(reject.get("reason", "")).split(" (", 1)[0]
    return [head if len(head) <= 80 else head[:77] + "..."]
