"""Run the InF-IR stages over many seed pairs: concurrently, resumably, and without losing work.

Output directory (``--output``)::

    run.json           the settings of the run (a resume with other generation settings is refused)
    instructions.jsonl stage 1 records  {id, instruction_positive, usage}
    poisoned.jsonl     stage 2 records  {id, instruction_negative, query_negative, usage}
    negatives.jsonl    stage 3 records  {id, hard_negative_document_1, hard_negative_document_2, usage}
    judged.jsonl       stage 5 records of KEPT rows {id, judge: {pos, inst_neg, query_neg}, usage}
    rejects.jsonl      {id, stage, reason, detail, usage}: every dropped row, once
    train.jsonl        the InF-IR rows, in input order (rewritten atomically at the end of every run)
    summary.json       counts, keep rate per stage, tokens, requests, cache hits, cost

Reliability. A row's outcome at a stage is ONE appended, fsynced line, either in that stage's file or in
``rejects.jsonl``; a line torn by a kill is cut off when the file is opened again. A rerun reads the files,
skips every row and stage already done, and redoes only what is missing, with answers already received
coming from the response cache; so a run killed with SIGKILL and started again ends with no duplicate and
no missing row. When the endpoint keeps failing (``max_consecutive_failures`` requests in a row fail after
all their retries), refuses all work (bad key, unknown model) or cannot be connected to (the message names
its URL), the run stops, still writes ``train.jsonl`` and ``summary.json`` from what is done, and raises
:class:`SynthAborted` with a message saying what failed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.data.jsonl import JsonlAppender, iter_jsonl, write_json, write_jsonl
from infembed.data.records import Triplet
from infembed.synth.costs import Price, price_for
from infembed.synth.filters import DEFAULT_BOUNDS
from infembed.synth.inputs import SeedData, SeedPair
from infembed.synth.llm import (
    Deferred,
    EndpointError,
    EndpointUnreachable,
    FatalEndpointError,
    LLMClient,
    Sampling,
    UsageMeter,
)
from infembed.synth.stages import (
    SCENARIO_TEXT,
    SCENARIOS,
    STAGES,
    Reject,
    RowStages,
    StageSettings,
    default_judge_sampling,
    new_usage,
)

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
#: how often the record files are flushed and fsynced while a run goes on
SYNC_SECONDS = 0.5
#: settings that change what is generated: a resume must use the same ones
_FINGERPRINT = (
    "model",
    "judge_model",
    "temperature",
    "max_tokens",
    "judge_max_tokens",
    "domain",
    "language",
    "distractors",
    "seed",
    "max_passage_chars",
    "judge",
    "json_output",
)


class SynthAborted(RuntimeError):
    """The run stopped early because of the endpoint; everything done so far is on disk."""


@dataclass
class SynthConfig:
    """Settings of a synthesis run (saved as ``run.json`` in the output directory)."""

    model: str = "gpt-4o-mini"
    judge_model: str | None = None  # None: the same as model
    temperature: float | None = 0.0
    max_tokens: int = 512
    judge_max_tokens: int | None = None  # None: 32 for chat models, 4096 for reasoning models
    domain: str = "web"
    language: str | None = None  # code: the programming language kept fixed (or per pair: "language")
    distractors: int = 4  # k random corpus passages added to {P+, P1-, P2-} for the judge
    answer_attempts: int = 3  # tries per field when the answer is unusable
    max_passage_chars: int = 2000
    seed: int = 0
    judge: bool = True
    max_consecutive_failures: int = 3
    rows_in_flight: int | None = None  # None: twice the client's concurrency
    json_output: str = "off"  # off | json_object | json_schema (synth/structured.py)

    def stage_settings(self) -> StageSettings:
        judge_model = self.judge_model or self.model
        return StageSettings(
            model=self.model,
            judge_model=judge_model,
            sampling=Sampling(
                temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed or None
            ),
            judge_sampling=default_judge_sampling(judge_model, self.judge_max_tokens),
            domain=self.domain,
            language=self.language,
            distractors=self.distractors,
            answer_attempts=self.answer_attempts,
            max_passage_chars=self.max_passage_chars,
            seed=self.seed,
            bounds=dict(DEFAULT_BOUNDS),
            json_output=self.json_output,
        )


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


ProgressHook = Callable[[str, str], None]  # (row id, outcome: kept | rejected | pending | failed)


class Pipeline:
    """Runs the stages over ``seed.pairs`` into ``out_dir``. Call :meth:`run` (async) or :func:`run_sync`.

    A subclass with other stages (``infembed.synth.benchmark``) sets ``stage_files`` and ``fingerprint`` and
    overrides ``_process`` and ``finalize``; the workers, the record files and the resume are shared.
    """

    stage_files: dict[str, str] = STAGE_FILES
    fingerprint: tuple[str, ...] = _FINGERPRINT

    def __init__(
        self,
        seed: SeedData,
        out_dir: str | Path,
        client: LLMClient,
        config: SynthConfig | None = None,
        *,
        prices: dict[str, Price] | None = None,
        batch_prices: bool = False,
        progress: ProgressHook | None = None,
    ) -> None:
        self.seed = seed
        self.out_dir = Path(out_dir)
        self.client = client
        self.config = config or SynthConfig()
        self.prices = prices or {}
        self.batch_prices = batch_prices
        self.progress = progress
        self.stages = RowStages(client, self.config.stage_settings(), seed.distractors)
        self.state = RunState()
        self._appenders: dict[str, JsonlAppender] = {}
        self._consecutive_failures = 0
        self._abort_reason: str | None = None
        self._outcomes: Counter[str] = Counter()
        self._deferred = 0

    # ------------------------------------------------------------------------------------------- files
    def _check_run_file(self) -> None:
        path = self.out_dir / RUN_FILE
        current = asdict(self.config)
        if path.exists():
            try:
                previous = json.loads(path.read_text(encoding="utf-8")).get("config", {})
            except (OSError, ValueError):
                previous = None
            if previous:
                changed = [k for k in self.fingerprint if k in previous and previous[k] != current.get(k)]
                if changed:
                    raise DataError(
                        "this output directory was made with other settings: "
                        + ", ".join(f"{k}={previous[k]!r} (now {current.get(k)!r})" for k in changed),
                        path,
                        hint="use the same settings to resume, or a new --output",
                    )
        write_json(path, {"config": current, "source": self.seed.source, "pairs": len(self.seed.pairs)})

    def _write(self, name: str, record: dict[str, Any]) -> None:
        appender = self._appenders.get(name)
        if appender is None:
            appender = self._appenders[name] = JsonlAppender(self.out_dir / name)
        # Buffered; _syncer flushes and fsyncs every SYNC_SECONDS. A kill loses at most that much of the
        # record files, never a request: the answers are already committed to the cache, so the rerun
        # redoes those rows from the cache. One fsync per row would cost more CPU than the HTTP client.
        appender.write(record, sync=False)

    def _sync(self) -> None:
        for appender in self._appenders.values():
            appender.sync()

    async def _syncer(self) -> None:
        while True:
            await asyncio.sleep(SYNC_SECONDS)
            self._sync()

    def _record(self, stage: str, record: dict[str, Any]) -> None:
        self._write(self.stage_files[stage], record)
        self.state.records[stage][record["id"]] = record

    def _reject(self, pair: SeedPair, stage: str, error: Reject) -> None:
        record = {"id": pair.id, "stage": stage, "reason": error.reason}
        if error.detail:
            record["detail"] = error.detail
        record["usage"] = error.usage or new_usage()
        self._write(REJECTS_FILE, record)
        self.state.rejects[pair.id] = record

    # --------------------------------------------------------------------------------------------- rows
    async def _process(self, pair: SeedPair) -> str:
        state, stages = self.state, self.stages
        if pair.id in state.rejects:
            return "rejected"
        if pair.id in state.records["judge"]:
            return "kept"
        stage = "instruction"
        try:
            inst = state.records["instruction"].get(pair.id)
            if inst is None:
                inst = await stages.instruction(pair)
                self._record("instruction", inst)
            stage = "poison"
            poison = state.records["poison"].get(pair.id)
            if poison is None:
                poison = await stages.poison(pair, inst["instruction_positive"])
                self._record("poison", poison)
            stage = "negatives"
            neg = state.records["negatives"].get(pair.id)
            if neg is None:
                neg = await stages.negatives(
                    pair,
                    inst["instruction_positive"],
                    poison["instruction_negative"],
                    poison["query_negative"],
                )
                self._record("negatives", neg)
            stage = "rules"
            row = state.row(pair)
            assert row is not None
            stages.rules(pair, row)
            if not self.config.judge:
                return "kept"
            stage = "judge"
            self._record("judge", await stages.judge(pair, row))
            return "kept"
        except Reject as error:
            self._reject(pair, stage, error)
            return "rejected"

    async def _worker(self, queue: asyncio.Queue[SeedPair | None], stop: asyncio.Event) -> None:
        while not stop.is_set():
            pair = queue.get_nowait() if not queue.empty() else None
            if pair is None:
                return
            try:
                outcome = await self._process(pair)
                if outcome in ("kept", "rejected"):
                    self._consecutive_failures = 0
            except Deferred:
                outcome = "pending"
                self._deferred += 1
            except EndpointError as error:
                outcome = "failed"
                self._consecutive_failures += 1
                if self._consecutive_failures >= self.config.max_consecutive_failures and not stop.is_set():
                    self._abort_reason = (
                        f"the endpoint kept failing ({self._consecutive_failures} requests in a row failed "
                        f"after {self.client.max_retries + 1} tries each); last error: {error}"
                    )
                    stop.set()
            except FatalEndpointError as error:
                outcome = "failed"
                if not stop.is_set():
                    if isinstance(error, EndpointUnreachable):  # it says which URL and why
                        self._abort_reason = str(error)
                    else:
                        self._abort_reason = f"the endpoint refused the work: {error}"
                    stop.set()
            except Exception:
                stop.set()  # a bug or bad data: stop the other rows too, the error is raised by run()
                raise
            self._outcomes[outcome] += 1
            if self.progress is not None:
                self.progress(pair.id, outcome)

    async def run(self) -> dict[str, Any]:
        """Process every pair not yet finished; returns the summary (also written to ``summary.json``)."""
        started = time.monotonic()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._check_run_file()
        self.state = RunState.load(self.out_dir, self.stage_files)
        queue: asyncio.Queue[SeedPair | None] = asyncio.Queue()
        for pair in self.seed.pairs:
            queue.put_nowait(pair)
        stop = asyncio.Event()
        n_workers = self.config.rows_in_flight or 2 * self.client.concurrency
        workers = [asyncio.ensure_future(self._worker(queue, stop)) for _ in range(max(1, n_workers))]
        stopper = asyncio.ensure_future(stop.wait())
        syncer = asyncio.ensure_future(self._syncer())
        try:
            pending = set(workers)
            while pending and not stop.is_set():
                _, pending = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
                pending.discard(stopper)
            for worker in pending:
                worker.cancel()  # stuck in retries against a failing endpoint: nothing half-written is lost
            results = await asyncio.gather(*workers, return_exceptions=True)
            errors = [r for r in results if isinstance(r, Exception)]
            if errors:
                raise errors[0]
        finally:
            stopper.cancel()
            syncer.cancel()
            for worker in workers:
                worker.cancel()
            for appender in self._appenders.values():
                appender.close()
            self._appenders.clear()
            summary = self.finalize(time.monotonic() - started)
        if self._abort_reason:
            raise SynthAborted(
                f"{self._abort_reason}. Stopped with {summary['rows']['kept']} rows kept and "
                f"{summary['rows']['unfinished']} unfinished; everything done is saved in {self.out_dir}, "
                "run the same command again to resume."
            )
        return summary

    # ---------------------------------------------------------------------------------------- summaries
    def finalize(self, seconds: float = 0.0) -> dict[str, Any]:
        """Write ``train.jsonl`` (kept rows, input order) and ``summary.json`` from the files on disk."""
        state = RunState.load(self.out_dir)
        rows = []
        for pair in self.seed.pairs:
            if pair.id in state.rejects:
                continue
            row = state.row(pair)
            if row is None or (self.config.judge and pair.id not in state.records["judge"]):
                continue
            rows.append(Triplet(**row, id=pair.id, query_id=pair.query_id, doc_id=pair.doc_id).to_dict())
        write_jsonl(self.out_dir / TRAIN_FILE, rows)
        summary = self.summarize(state, len(rows), seconds)
        write_json(self.out_dir / SUMMARY_FILE, summary)
        return summary

    def _stage_models(self) -> dict[str, str]:
        settings = self.stages.settings
        return {s: settings.judge_model if s == "judge" else settings.model for s in STAGES}

    def summarize(self, state: RunState, kept: int, seconds: float) -> dict[str, Any]:
        ids = [p.id for p in self.seed.pairs]
        passed = Counter[str]()
        rejected = Counter[str]()
        reasons: dict[str, Counter[str]] = {s: Counter() for s in STAGES}
        for pid in ids:
            reject = state.rejects.get(pid)
            for stage in STAGES:
                if stage == "judge" and not self.config.judge:
                    break
                if reject is not None and reject["stage"] == stage:
                    rejected[stage] += 1
                    reasons[stage].update(_reason_kinds(reject))
                    break
                if stage == "rules":
                    done = pid in state.records["negatives"]
                else:
                    done = pid in state.records[stage]
                if not done:
                    break  # not through this stage yet
                passed[stage] += 1
        per_stage = {}
        for stage in STAGES:
            if stage == "judge" and not self.config.judge:
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
        tokens: dict[str, dict[str, int]] = {s: new_usage() for s in STAGES if s != "rules"}
        for stage in STAGE_FILES:
            for record in state.records[stage].values():
                for k, v in (record.get("usage") or {}).items():
                    tokens[stage][k] = tokens[stage].get(k, 0) + int(v)
        for record in state.rejects.values():
            stage = record.get("stage")
            if stage in tokens:
                for k, v in (record.get("usage") or {}).items():
                    tokens[stage][k] = tokens[stage].get(k, 0) + int(v)
        last = "judge" if self.config.judge else "rules"
        finished = passed[last] + sum(1 for pid in ids if pid in state.rejects)
        models = self._stage_models()
        cost_total: float | None = 0.0
        costs: dict[str, float | None] = {}
        for stage, usage in tokens.items():
            price = price_for(models[stage], self.prices)
            if price is None:
                costs[stage] = None
                cost_total = None
                continue
            costs[stage] = round(
                price.cost(usage["prompt_tokens"], usage["completion_tokens"], self.batch_prices), 6
            )
            if cost_total is not None:
                cost_total += costs[stage]
        meter: UsageMeter = self.client.meter
        this_run_cost: float | None = 0.0
        for stage, usage in meter.stages.items():
            price = price_for(models.get(stage, self.stages.settings.model), self.prices)
            if price is None:
                if usage.requests:
                    this_run_cost = None
                continue
            if this_run_cost is not None:
                this_run_cost += price.cost(usage.prompt_tokens, usage.completion_tokens, self.batch_prices)
        all_prompt = sum(u["prompt_tokens"] for u in tokens.values())
        all_completion = sum(u["completion_tokens"] for u in tokens.values())
        return {
            "source": self.seed.source,
            "output": str(self.out_dir),
            "models": {"generation": self.stages.settings.model, "judge": self.stages.settings.judge_model},
            "rows": {
                "input": len(ids),
                "kept": kept,
                "rejected": sum(1 for pid in ids if pid in state.rejects),
                "unfinished": len(ids) - finished,
                "deferred_to_batch": self._deferred,
            },
            "keep_rate": round(kept / finished, 4) if finished else None,
            "stages": per_stage,
            "tokens": {
                "per_stage": tokens,
                "prompt_tokens": all_prompt,
                "completion_tokens": all_completion,
                "per_finished_pair": {
                    "prompt_tokens": round(all_prompt / finished, 1) if finished else None,
                    "completion_tokens": round(all_completion / finished, 1) if finished else None,
                },
            },
            "cost_usd": {
                "all_answers": round(cost_total, 6) if cost_total is not None else None,
                "per_stage": costs,
                "this_run": round(this_run_cost, 6) if this_run_cost is not None else None,
                "per_1000_pairs": round(cost_total / finished * 1000, 4)
                if cost_total is not None and finished
                else None,
                "batch_prices": self.batch_prices,
            },
            "this_run": {
                "seconds": round(seconds, 3),
                "outcomes": dict(self._outcomes),
                **meter.to_json(),
            },
        }


def _reason_kinds(reject: dict[str, Any]) -> list[str]:
    """Reasons grouped for the summary: the judge's per scenario, others without their details."""
    choices = (reject.get("detail") or {}).get("judge")
    if reject.get("stage") == "judge" and isinstance(choices, dict):
        intended = {name: label for name, _, _, label in SCENARIOS}
        return [
            f"judge wrong on {SCENARIO_TEXT[n]}" for n, label in choices.items() if label != intended.get(n)
        ]
    head = str(reject.get("reason", "")).split(" (", 1)[0]
    return [head if len(head) <= 80 else head[:77] + "..."]


def run_sync(pipeline: Pipeline) -> dict[str, Any]:
    """Run a pipeline from synchronous code, closing the client afterwards."""

    async def main() -> dict[str, Any]:
        try:
            return await pipeline.run()
        finally:
            await pipeline.client.aclose()

    return asyncio.run(main())
