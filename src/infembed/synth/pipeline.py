"""Run the InF-IR stages over many seed pairs: concurrently, resumably, and without losing work.

Output directory (``--output``)::

    run.json           the settings and the endpoint (its URL and the model it serves); a resume with
                       another value of a setting that changes rows, or against another endpoint, is refused
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
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from infembed.data.errors import SettingsError
from infembed.data.jsonl import JsonlAppender, write_json, write_jsonl
from infembed.data.records import Triplet
from infembed.settings import check_number, setting, settings_from_dict
from infembed.synth import structured
from infembed.synth.costs import Price
from infembed.synth.filters import DEFAULT_BOUNDS
from infembed.synth.inputs import SeedData, SeedPair
from infembed.synth.llm import (
    Deferred,
    EndpointError,
    EndpointUnreachable,
    FatalEndpointError,
    LLMClient,
    Sampling,
)
from infembed.synth.prompts import DOMAINS
from infembed.synth.run_state import (  # noqa: F401  (the file names are read from here too)
    REJECTS_FILE,
    RUN_FILE,
    STAGE_FILES,
    SUMMARY_FILE,
    TRAIN_FILE,
    RunState,
    check_run_file,
    drop_records,
    reason_kinds,
    summarize,
    writable_dir,
)
from infembed.synth.stages import STAGES, Reject, RowStages, StageSettings, default_judge_sampling, new_usage

#: how often the record files are flushed and fsynced while a run goes on
SYNC_SECONDS = 0.5
#: the row styles of ``--style``: the paper's InF-IR rows, or negation-aware ones (:mod:`infembed.synth.negation`)
STYLES = ("inf-ir", "negation")
#: the settings that do not change rows (when to give up, how many at once): free on resume. Every other
#: setting of SynthConfig and BenchmarkConfig changes rows, so a resume must use the same value.
FREE_ON_RESUME = ("max_consecutive_failures", "rows_in_flight")


class SynthAborted(RuntimeError):
    """The run stopped early because of the endpoint; everything done so far is on disk."""


@dataclass
class SynthConfig:
    """Every generation setting of a synthesis run, with its help text: the flags of ``infembed synth run`` /
    ``export-batch``, the keys of a ``--config`` YAML/JSON file and the ``config`` saved in ``run.json`` all come
    from these fields (:mod:`infembed.settings`)."""

    model: str = setting("gpt-4o-mini", "Model for instructions, poisoned negatives and negative passages.")
    judge_model: str | None = setting(None, "Model for the judge (default: --model). The paper: o3-mini.")
    temperature: float | None = setting(0.0, "Sampling temperature of the generation stages.")
    max_tokens: int = setting(512, "Token limit of a generated answer.")
    judge_max_tokens: int | None = setting(
        None, "Token limit of a judge answer (default 32; 4096 for reasoning models)."
    )
    domain: str = setting("web", "web (MS MARCO-like), code (language kept fixed) or math.")
    language: str | None = setting(
        None, "code: the programming language (else a 'language' field of each pair)."
    )
    style: str = setting(
        "inf-ir",
        "inf-ir (the paper's rows) or negation: I+ and I- share one general statement and differ only in an "
        "exclusion (I+ excludes P1-'s aspect, I- excludes P+'s), judged so that the exclusion alone decides.",
    )
    distractors: int = setting(4, "Random corpus passages added to {P+, P1-, P2-} for the judge.")
    answer_attempts: int = setting(3, "Tries per field when an answer is empty, refused or malformed.")
    max_passage_chars: int = setting(2000, "Each passage in a prompt is cut to this many characters.")
    seed: int = setting(0, "Seed of the judge's distractors and shuffles.")
    judge: bool = setting(True, "Run the LLM judge (stage 5).")
    max_consecutive_failures: int = setting(
        3, "Stop after this many requests in a row failed after all their retries."
    )
    rows_in_flight: int | None = setting(None, "Rows worked on at once (default: twice --concurrency).")
    json_output: str = setting(
        "off", "JSON-constrained answers: off, json_object (llama.cpp servers) or json_schema (OpenAI, vLLM)."
    )

    def __post_init__(self) -> None:
        """Every setting is checked here, so a bad value fails at once with one line naming it."""
        if self.domain not in DOMAINS:
            raise SettingsError(f"domain must be one of {', '.join(DOMAINS)}; got {self.domain!r}")
        if self.style not in STYLES:
            raise SettingsError(f"style must be one of {', '.join(STYLES)}; got {self.style!r}")
        if self.style == "negation" and self.domain != "web":
            raise SettingsError(f"--style negation is written for --domain web; got --domain {self.domain}")
        structured.check_mode(self.json_output)
        check_number("temperature", self.temperature, minimum=0, optional=True)
        check_number("max_tokens", self.max_tokens, integer=True, minimum=1)
        check_number("judge_max_tokens", self.judge_max_tokens, integer=True, minimum=1, optional=True)
        check_number("distractors", self.distractors, integer=True, minimum=0)
        check_number("answer_attempts", self.answer_attempts, integer=True, minimum=1)
        check_number("max_passage_chars", self.max_passage_chars, integer=True, minimum=100)
        check_number("seed", self.seed, integer=True, minimum=0)
        check_number("max_consecutive_failures", self.max_consecutive_failures, integer=True, minimum=1)
        check_number("rows_in_flight", self.rows_in_flight, integer=True, minimum=1, optional=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | Path | None = None) -> SynthConfig:
        """From a mapping (a settings file's, the ``config`` of a saved ``run.json``)."""
        return settings_from_dict(cls, data, source)

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


def fingerprint_of(config_class: type) -> tuple[str, ...]:
    """The settings of ``config_class`` that a resume must keep: all but :data:`FREE_ON_RESUME`."""
    return tuple(f.name for f in fields(config_class) if f.name not in FREE_ON_RESUME)


_FINGERPRINT = fingerprint_of(SynthConfig)


ProgressHook = Callable[[str, str], None]  # (row id, outcome: kept | rejected | pending | failed)


class Pipeline:
    """Runs the stages over ``seed.pairs`` into ``out_dir``. Call :meth:`run` (async) or :func:`run_sync`.

    A subclass with other stages (``infembed.synth.benchmark``) sets ``stage_files`` and ``fingerprint`` and
    overrides ``_process`` and ``finalize``; the workers, the record files and the resume are shared.
    """

    stage_files: dict[str, str] = STAGE_FILES
    #: every stage in order (``rules`` has no file: it asks nothing); the summary's table follows it
    stage_order: tuple[str, ...] = STAGES
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
        allow_endpoint_change: bool = False,
    ) -> None:
        self.seed = seed
        self.out_dir = Path(out_dir)
        self.client = client
        self.config = config or SynthConfig()
        self.prices = prices or {}
        self.batch_prices = batch_prices
        self.progress = progress
        self.allow_endpoint_change = allow_endpoint_change
        self.stages = RowStages(client, self.config.stage_settings(), seed.distractors)
        self.state = RunState()
        self._appenders: dict[str, JsonlAppender] = {}
        self._consecutive_failures = 0
        self._abort_reason: str | None = None
        self._outcomes: Counter[str] = Counter()
        self._deferred = 0

    # ------------------------------------------------------------------------------------------- files
    async def _check_run_file(self) -> None:
        """Refuse a resume with other settings or against another endpoint (asked for its identity here,
        before any request); with ``allow_endpoint_change``, the rows not finished are made again from the
        start on the new endpoint, so that no row holds answers of both."""
        s = self.stages.settings
        endpoint = await self.client.identity([s.model, s.judge_model])
        run = {
            "config": asdict(self.config),
            "source": self.seed.source,
            "pairs": len(self.seed.pairs),
            "endpoint": endpoint,
        }
        path = self.out_dir / RUN_FILE
        record, moved = check_run_file(
            path, run, self.fingerprint, allow_endpoint_change=self.allow_endpoint_change
        )
        if moved:  # before run.json names the new endpoint: after a kill in between, they are dropped again
            state = RunState.load(self.out_dir, self.stage_files)
            ids = {i for records in state.records.values() for i in records} | set(state.rejects)
            drop_records(self.out_dir, self.stage_files, {i for i in ids if not self._finished(state, i)})
        write_json(path, record)

    def _finished(self, state: RunState, row_id: str) -> bool:
        """The row is kept or rejected: nothing more is asked for it."""
        return row_id in state.rejects or row_id in state.records[self._last_stage()]

    def _last_stage(self) -> str:
        """The stage whose record finishes a kept row: the judge, or the last generation stage without it."""
        return "judge" if self.config.judge else self.stage_order[self.stage_order.index("rules") - 1]

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
    async def _stage(
        self, stage: str, row_id: str, make: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """The row's record of ``stage``: from the files when it is done, else made now and recorded."""
        record = self.state.records[stage].get(row_id)
        if record is None:
            record = await make()
            self._record(stage, record)
        return record

    async def _process(self, pair: SeedPair) -> str:
        state, stages = self.state, self.stages
        if pair.id in state.rejects:
            return "rejected"
        if pair.id in state.records["judge"]:
            return "kept"
        stage = "instruction"
        try:
            inst = await self._stage(stage, pair.id, lambda: stages.instruction(pair))
            stage = "poison"
            poison = await self._stage(
                stage, pair.id, lambda: stages.poison(pair, inst["instruction_positive"])
            )
            stage = "negatives"
            await self._stage(
                stage,
                pair.id,
                lambda: stages.negatives(
                    pair,
                    inst["instruction_positive"],
                    poison["instruction_negative"],
                    poison["query_negative"],
                ),
            )
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
        writable_dir(self.out_dir)
        await self._check_run_file()
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
    def row(self, state: RunState, pair: SeedPair) -> dict[str, str] | None:
        """The InF-IR fields of a row whose generation stages are done (else None)."""
        return state.row(pair)

    def triplet(self, row: dict[str, str], pair: SeedPair) -> Triplet:
        """The output row of a kept pair."""
        return Triplet(**row, id=pair.id, query_id=pair.query_id, doc_id=pair.doc_id)

    def reason_kinds(self, reject: dict[str, Any]) -> list[str]:
        """A rejection's reasons as the summary counts them."""
        return reason_kinds(reject)

    def finalize(self, seconds: float = 0.0) -> dict[str, Any]:
        """Write ``train.jsonl`` (kept rows, input order) and ``summary.json`` from the files on disk."""
        state = RunState.load(self.out_dir, self.stage_files)
        rows = []
        for pair in self.seed.pairs:
            if pair.id in state.rejects:
                continue
            row = self.row(state, pair)
            if row is None or (self.config.judge and pair.id not in state.records["judge"]):
                continue
            rows.append(self.triplet(row, pair).to_dict())
        write_jsonl(self.out_dir / TRAIN_FILE, rows)
        summary = self.summarize(state, len(rows), seconds)
        write_json(self.out_dir / SUMMARY_FILE, summary)
        return summary

    def summarize(self, state: RunState, kept: int, seconds: float) -> dict[str, Any]:
        return summarize(self, state, kept, seconds)


def make_pipeline(
    seed: SeedData,
    out_dir: str | Path,
    client: LLMClient,
    config: SynthConfig | None = None,
    **options: Any,
) -> Pipeline:
    """The pipeline of ``config.style``: :class:`Pipeline` for InF-IR rows,
    :class:`~infembed.synth.negation.NegationPipeline` for negation-aware ones; ``options`` as
    :class:`Pipeline`'s."""
    config = config or SynthConfig()
    cls: type[Pipeline] = Pipeline
    if config.style == "negation":
        from infembed.synth.negation import NegationPipeline

        cls = NegationPipeline
    return cls(seed, out_dir, client, config, **options)


def run_sync(pipeline: Pipeline) -> dict[str, Any]:
    """Run a pipeline from synchronous code, closing the client afterwards."""

    async def main() -> dict[str, Any]:
        try:
            return await pipeline.run()
        finally:
            await pipeline.client.aclose()

    return asyncio.run(main())
