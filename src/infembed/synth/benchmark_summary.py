"""The summary and the README of a benchmark build (:mod:`infembed.synth.benchmark`): counts per stage with
the reasons of every reject, the documents that lost relevance, usable answers, tokens, cost and throughput
in the same form as ``synth run``'s summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infembed.synth.benchmark import BUILDER_STAGES, BenchmarkBuilder, BenchmarkConfig
from infembed.synth.run_state import RunState, stage_tokens, tokens_and_cost


def summarize(builder: BenchmarkBuilder, state: RunState, kept: int, seconds: float) -> dict[str, Any]:
    """The run's summary (``synth/summary.json``), in the form of ``synth run``'s: queries kept and rejected per
    stage with reasons, documents that lost relevance, usable answers per stage, tokens, cost and throughput."""
    ids = [item.id for item in builder.source.pairs]
    stages = [s for s in BUILDER_STAGES if s != "exclusion" or builder.config.exclusions]
    per_stage: dict[str, dict[str, Any]] = {}
    for stage in stages:
        done = 0
        rejected: dict[str, int] = {}
        for pid in ids:
            reject = state.rejects.get(pid)
            if reject is not None and reject.get("stage") == stage:
                head = str(reject.get("reason", "")).split(" (", 1)[0]
                rejected[head] = rejected.get(head, 0) + 1
            elif _through(state, pid, stage):
                done += 1
        n_rejected = sum(rejected.values())
        per_stage[stage] = {
            "in": done + n_rejected,
            "kept": done,
            "rejected": n_rejected,
            "keep_rate": round(done / (done + n_rejected), 4) if done + n_rejected else None,
            "reasons": dict(sorted(rejected.items(), key=lambda kv: -kv[1])),
        }
    tokens = stage_tokens(state, builder.stage_files)
    parseable = {
        s: round(1 - u["unusable"] / u["requests"], 4) if u["requests"] else None for s, u in tokens.items()
    }
    rejected_ids = [pid for pid in ids if pid in state.rejects]
    finished = kept + len(rejected_ids)
    settings = builder.stages.settings
    models = {s: settings.judge_model if s == "judge" else settings.model for s in builder.stage_files}
    kept_items = [
        item
        for item in builder.source.pairs
        if item.id not in state.rejects and item.id in state.records["judge"]
    ]
    relevant = sum(len(item.relevant) for item in kept_items)
    still = sum(
        1 for item in kept_items for d in item.relevant if state.records["judge"][item.id]["relevant"].get(d)
    )
    outcomes = dict(builder._outcomes)
    done_now = outcomes.get("kept", 0) + outcomes.get("rejected", 0)
    return {
        "source": builder.source.source,
        "output": str(builder.output),
        "models": {"generation": settings.model, "judge": settings.judge_model},
        "collection": {
            "queries_judged": builder.source.queries_judged,
            "not_eligible": builder.source.skipped,
        },
        "rows": {  # rows are queries here; the same keys as synth run
            "input": len(ids),
            "kept": kept,
            "rejected": len(rejected_ids),
            "unfinished": len(ids) - finished,
            "deferred_to_batch": builder._deferred,
        },
        "keep_rate": round(kept / finished, 4) if finished else None,
        "stages": per_stage,
        "documents": {
            "relevant_og": relevant,
            "still_relevant": still,
            "lost_relevance": relevant - still,
        },
        "parseable_share": parseable,
        **tokens_and_cost(builder, tokens, models, finished, ("query", "queries")),
        "this_run": {
            "seconds": round(seconds, 3),
            "outcomes": outcomes,
            "queries_per_second": round(done_now / seconds, 4) if seconds and done_now else None,
            **builder.client.meter.to_json(),
        },
    }


def _through(state: RunState, pid: str, stage: str) -> bool:
    if stage == "select":  # passed: judged, and not rejected before the exclusion stage
        reject = state.rejects.get(pid)
        return pid in state.records["judge"] and (reject is None or reject.get("stage") == "exclusion")
    return pid in state.records[stage]


def readme(summary: dict[str, Any], config: BenchmarkConfig, variant: bool = False) -> str:
    """The benchmark's README.md: where it comes from, how it was made, and the counts."""
    rows, docs = summary["rows"], summary["documents"]
    reasons = [
        f"- {stage}: {reason}: {n}"
        for stage, s in summary["stages"].items()
        for reason, n in s["reasons"].items()
    ]
    skipped = [f"- {reason}: {n}" for reason, n in summary["collection"]["not_eligible"].items()]
    changed_text = (
        "the original instruction followed by ONE sentence that states the narrowing only as an exclusion of "
        'what lost relevance ("Documents that ... are not relevant."), never what stays relevant; the '
        "judgments are those made against the narrowing sentence of the base variant"
        if variant
        else "the original instruction followed by ONE sentence that narrows it"
    )
    lines = [
        f"# {Path(summary['output']).name}{'-excl' if variant else ''}: an instruction benchmark built by "
        "`infembed synth benchmark`",
        "",
        f"Source collection: `{summary['source']}` ({summary['collection']['queries_judged']} queries with "
        "judged-relevant documents). Built with `infembed synth benchmark` (docs/synthesis.md gives every prompt).",
        f"Models: `{summary['models']['generation']}` writes, `{summary['models']['judge']}` re-judges. "
        "LLM-written instructions and judgments: check a sample before trusting scores on it.",
        "",
        "## Method",
        "",
        f"1. Queries with {config.min_relevant} to {config.max_relevant} judged-relevant documents are used, "
        "in the collection's order.",
        f"2. `instruction_og`: an LLM sees the query and its relevant documents (up to "
        f"{config.max_documents_in_prompt}, each cut to {config.max_passage_chars} characters) and writes an "
        "instruction under which all of them are relevant.",
        f"3. `instruction_changed`: {changed_text}.",
        "4. Every originally relevant document is re-judged (yes/no) against the changed instruction; "
        "`qrels_changed.tsv` sets those judged not relevant to 0.",
        f"5. A query is kept when at least {config.min_kept} document(s) stay relevant, at least "
        f"{config.min_lost} lose relevance, and at most {config.max_kept_share:.0%} stay.",
        "",
        "## Counts",
        "",
        f"- queries tried: {rows['input']}; kept: {rows['kept']}; rejected: {rows['rejected']}; "
        f"unfinished: {rows['unfinished']}",
        f"- relevant (query, document) pairs of the kept queries: {docs['relevant_og']}; still relevant "
        f"under the changed instruction: {docs['still_relevant']}; lost relevance: {docs['lost_relevance']}",
        "",
        "Rejected queries, by stage and reason (details in `synth/rejects.jsonl`):",
        "",
        *(reasons or ["- none"]),
        "",
        "Queries of the collection not used:",
        "",
        *(skipped or ["- none"]),
        "",
    ]
    return "\n".join(lines)
