"""Build an instruction-following benchmark (FollowIR style) from a collection with relevance judgments.

For each query with judged-relevant documents, an LLM

1. ``og``: writes an original instruction consistent with every judged-relevant document;
2. ``changed``: writes ONE sentence that narrows it; the changed instruction is the original followed by it;
3. ``judge``: re-judges every originally relevant document against the changed instruction (yes/no, one
   request per document);
4. ``select`` (no request): the query is kept when at least ``min_kept`` documents stay relevant, at least
   ``min_lost`` lose relevance and no more than ``max_kept_share`` of them stay; else it is rejected with
   the counts;
5. ``exclusion`` (``exclusions=True``, kept queries only): the narrowing restated only as an exclusion of what
   lost relevance ("Documents that ... are not relevant."), the adversarial variant of ``followir-cranfield-excl``.

The output directory IS the benchmark (``infembed eval -b OUTPUT`` reads it)::

    corpus.jsonl queries.jsonl qrels_og.tsv qrels_changed.tsv benchmark.json README.md (method and counts)
    exclusions/     the same benchmark with the exclusion-only changed instructions (with --exclusions)
    synth/          the run: run.json, og.jsonl, changed.jsonl, judged.jsonl, exclusion.jsonl, rejects.jsonl,
                    summary.json, cache.sqlite

``qrels_og.tsv`` holds the collection's judgments of the kept queries; ``qrels_changed.tsv`` the same with
the documents that lost relevance set to 0. The run is a :class:`~infembed.synth.pipeline.Pipeline` with other
stages: the same workers, response cache, retries, record files and resume (a SIGKILL loses and duplicates
nothing; a rerun sends no request for what is done), and a summary in the same form as ``synth run``.

Example::

    from infembed.synth.benchmark import BenchmarkBuilder, BenchmarkConfig, load_judged
    source = load_judged("data/raw/cranfield", limit=40)
    client = LLMClient(OpenAIBackend(), ResponseCache("bench/synth/cache.sqlite"))
    run_sync(BenchmarkBuilder(source, "bench", client, BenchmarkConfig(model="gpt-4o-mini")))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError, SettingsError
from infembed.data.records import Benchmark, InstructionQuery
from infembed.settings import setting
from infembed.synth import prompts
from infembed.synth.costs import Price
from infembed.synth.llm import LLMClient
from infembed.synth.pipeline import Pipeline, RunState, SynthConfig, fingerprint_of
from infembed.synth.stages import Reject, _add_usage, _gather, ask_yes_no, new_usage, shorten

STAGE_FILES = {
    "og": "og.jsonl",
    "changed": "changed.jsonl",
    "judge": "judged.jsonl",
    "exclusion": "exclusion.jsonl",
}
BUILDER_STAGES = ("og", "changed", "judge", "select", "exclusion")
WORK_DIR = "synth"
EXCLUSIONS_DIR = "exclusions"
_YES_NO = re.compile(r"^[\W_]*(?:answer\s*[*_]*\s*[:：]\s*[*_\"']*)?\s*(yes|no)\b", re.IGNORECASE)
#: "is relevant" / "is not relevant" / "irrelevant": group 1 or 2 set = not relevant
_VERDICT = re.compile(r"\b(?:is|are)\s+(not\s+)?relevant\b|\b(irrelevant)\b", re.IGNORECASE)


@dataclass
class BenchmarkConfig(SynthConfig):
    """Settings of a benchmark build (saved in ``synth/run.json``; the flags of ``infembed synth benchmark``);
    the generation settings are :class:`~infembed.synth.pipeline.SynthConfig`'s (``judge_model`` re-judges the
    documents; ``domain``, ``language``, ``style``, ``distractors`` and ``judge`` are not used)."""

    max_passage_chars: int = setting(1000, "Each document in a prompt is cut to this many characters.")
    min_relevant: int = setting(3, "Use queries with at least N relevant documents.")
    max_relevant: int = setting(20, "... and at most N.")
    min_kept: int = setting(1, "Reject a query when fewer documents stay relevant when narrowed.")
    min_lost: int = setting(1, "Reject a query when fewer documents lose relevance when narrowed.")
    max_kept_share: float = setting(
        0.8, "Reject a query when a larger share of its documents stays relevant."
    )
    max_documents_in_prompt: int = setting(
        10, "Relevant documents shown to the writer per query (all are re-judged)."
    )
    exclusions: bool = setting(
        False, "Also write OUTPUT/exclusions: the narrowing stated only as an exclusion."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_relevant < 1 or self.max_relevant < self.min_relevant:
            raise SettingsError("need 1 <= min_relevant <= max_relevant")
        if self.min_kept < 0 or self.min_lost < 1:
            raise SettingsError("need min_kept >= 0 and min_lost >= 1 (a query must change)")
        if not 0 < self.max_kept_share <= 1:
            raise SettingsError("max_kept_share must be in (0, 1]")
        if self.max_documents_in_prompt < 1:
            raise SettingsError("max_documents_in_prompt must be at least 1")


@dataclass(frozen=True)
class QueryItem:
    """One query of the collection and its judged-relevant documents (the builder's unit of work)."""

    id: str
    query: str
    relevant: tuple[str, ...]


@dataclass
class JudgedCollection:
    """The builder's input: the collection and the queries to work on (``pairs``, the pipeline's name)."""

    benchmark: Benchmark
    pairs: list[QueryItem]
    source: str
    queries_judged: int = 0  # queries with at least one relevant document
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> queries not eligible
    distractors: list[str] = field(default_factory=list)  # unused; the pipeline's interface


def load_judged(
    source: str | Path,
    *,
    split: str = "test",
    limit: int | None = None,
    min_relevant: int = 3,
    max_relevant: int = 20,
) -> JudgedCollection:
    """A BEIR dir, an instruction benchmark dir (its instructions are not used) or a SMART collection
    (``cran.all.1400``, ``cran.qry``, ``cranqrel``); the first ``limit`` queries with ``min_relevant`` to
    ``max_relevant`` relevant documents, in the collection's order."""
    from infembed.data.benchmarks import load_benchmark
    from infembed.data.smart import find_smart_files, load_smart

    path = Path(source)
    if not path.exists():
        raise DataError(
            "not found", path, hint="give a BEIR dir, an instruction benchmark dir or a SMART dir"
        )
    if find_smart_files(path) is not None and not (path / "corpus.jsonl").exists():
        bench = load_smart(path)
    else:
        bench = load_benchmark(path, split=split) if (path / "qrels").is_dir() else load_benchmark(path)
    items: list[QueryItem] = []
    skipped: dict[str, int] = {}
    judged = 0
    for qid, query in bench.queries.items():
        relevant = tuple(d for d, score in bench.qrels_og.get(qid, {}).items() if score > 0)
        if not relevant:
            continue
        judged += 1
        missing = [d for d in relevant if d not in bench.corpus]
        if missing:
            skipped["relevant documents missing from the corpus"] = (
                skipped.get("relevant documents missing from the corpus", 0) + 1
            )
            continue
        if len(relevant) < min_relevant:
            reason = f"fewer than {min_relevant} relevant documents"
        elif len(relevant) > max_relevant:
            reason = f"more than {max_relevant} relevant documents"
        else:
            if limit is None or len(items) < limit:
                items.append(QueryItem(qid, query.text, relevant))
            continue
        skipped[reason] = skipped.get(reason, 0) + 1
    if not items:
        raise DataError(
            f"no query has {min_relevant} to {max_relevant} relevant documents",
            path,
            hint="change --min-relevant / --max-relevant",
        )
    return JudgedCollection(bench, items, str(source), judged, skipped)


def parse_yes_no(text: str) -> bool | None:
    """``Answer: yes`` / ``No.`` / ``**yes**`` / "The document is not relevant." -> True / False; None when
    the answer holds no verdict or both."""
    match = _YES_NO.match(text.strip())
    if match:
        return match.group(1).lower() == "yes"
    words = set(re.findall(r"\b(yes|no)\b", text.lower()))
    if len(words) == 1:
        return words == {"yes"}
    if words:
        return None
    verdicts = {bool(m.group(1) or m.group(2)) for m in _VERDICT.finditer(text)}
    return not verdicts.pop() if len(verdicts) == 1 else None


class BenchmarkBuilder(Pipeline):
    """Runs the builder's stages over ``source.pairs`` (queries); the benchmark goes to ``output``.
    Call :meth:`run` (async) or :func:`infembed.synth.pipeline.run_sync`."""

    stage_files = STAGE_FILES
    fingerprint = fingerprint_of(BenchmarkConfig)

    def __init__(
        self,
        source: JudgedCollection,
        output: str | Path,
        client: LLMClient,
        config: BenchmarkConfig | None = None,
        *,
        prices: dict[str, Price] | None = None,
        batch_prices: bool = False,
        progress: Any = None,
        allow_endpoint_change: bool = False,
    ) -> None:
        self.output = Path(output)
        config = config or BenchmarkConfig()
        super().__init__(
            source,  # type: ignore[arg-type]  (the pipeline needs .pairs with .id, .source, .distractors)
            self.output / WORK_DIR,
            client,
            config,
            prices=prices,
            batch_prices=batch_prices,
            progress=progress,
            allow_endpoint_change=allow_endpoint_change,
        )
        self.source = source
        self.config: BenchmarkConfig = config

    # ------------------------------------------------------------------------------------------- stages
    def _documents(self, item: QueryItem, limit: int | None = None) -> list[str]:
        corpus = self.source.benchmark.corpus
        ids = item.relevant[:limit] if limit else item.relevant
        return [shorten(corpus[d].full_text(), self.config.max_passage_chars) for d in ids]

    async def _og(self, item: QueryItem) -> dict[str, Any]:
        docs = self._documents(item, self.config.max_documents_in_prompt)
        messages = prompts.benchmark_og_prompt(item.query, docs)
        text, usage = await self.stages._generate("og", "original instruction", "instruction", messages)
        return {"id": item.id, "instruction_og": text, "usage": usage}

    async def _changed(self, item: QueryItem, og: str) -> dict[str, Any]:
        docs = self._documents(item, self.config.max_documents_in_prompt)
        messages = prompts.benchmark_changed_prompt(item.query, og, docs)
        text, usage = await self.stages._generate(
            "changed", "restriction", "instruction", messages, label="Restriction"
        )
        if " ".join(text.split()) in " ".join(og.split()):
            raise Reject("restriction: repeats the original instruction", usage=usage)
        changed = f"{og.rstrip()} {text}"
        return {"id": item.id, "restriction": text, "instruction_changed": changed, "usage": usage}

    async def _exclusion(self, item: QueryItem, og: str, restriction: str) -> dict[str, Any]:
        messages = prompts.benchmark_exclusion_prompt(item.query, og, restriction)
        text, usage = await self.stages._generate(
            "exclusion", "exclusion", "instruction", messages, label="Exclusion"
        )
        return {
            "id": item.id,
            "exclusion": text,
            "instruction_changed": f"{og.rstrip()} {text}",
            "usage": usage,
        }

    async def _judge_document(self, item: QueryItem, instruction: str, doc_id: str) -> tuple[str, bool, dict]:
        s = self.stages.settings
        document = shorten(self.source.benchmark.corpus[doc_id].full_text(), s.max_passage_chars)
        messages = prompts.benchmark_judge_prompt(item.query, instruction, document)
        verdict, usage, answers = await ask_yes_no(self.client, s, messages, "judge")
        if verdict is None:
            raise Reject(
                f"judge: no yes/no answer for document {doc_id} ({s.answer_attempts} tries)",
                {"document": doc_id, "answers": answers},
                usage,
            )
        return doc_id, verdict, usage

    async def _judge(self, item: QueryItem, changed: str) -> dict[str, Any]:
        results = await _gather(*(self._judge_document(item, changed, d) for d in item.relevant))
        usage = new_usage()
        for _, _, u in results:
            _add_usage(usage, u)
        return {"id": item.id, "relevant": {d: verdict for d, verdict, _ in results}, "usage": usage}

    def select(self, item: QueryItem, judged: dict[str, Any]) -> None:
        """Reject a query whose changed instruction keeps too few or too many documents relevant."""
        c = self.config
        n = len(item.relevant)
        kept = sum(1 for d in item.relevant if judged["relevant"].get(d))
        lost = n - kept
        counts = f"{kept} of {n} stay relevant"
        if kept < c.min_kept:
            raise Reject(f"too few documents stay relevant ({counts}; at least {c.min_kept})")
        if lost < c.min_lost:
            raise Reject(f"too many documents stay relevant ({counts}; at least {c.min_lost} must not)")
        if kept > c.max_kept_share * n:
            raise Reject(f"too many documents stay relevant ({counts}; at most {c.max_kept_share:.0%} may)")

    async def _process(self, item: QueryItem) -> str:  # type: ignore[override]
        state = self.state
        if item.id in state.rejects:
            return "rejected"
        stage = "og"
        try:
            og = await self._stage(stage, item.id, lambda: self._og(item))
            stage = "changed"
            changed = await self._stage(stage, item.id, lambda: self._changed(item, og["instruction_og"]))
            stage = "judge"
            judged = await self._stage(
                stage, item.id, lambda: self._judge(item, changed["instruction_changed"])
            )
            stage = "select"
            self.select(item, judged)
            if self.config.exclusions and item.id not in state.records["exclusion"]:
                stage = "exclusion"
                self._record(
                    "exclusion", await self._exclusion(item, og["instruction_og"], changed["restriction"])
                )
            return "kept"
        except Reject as error:
            self._reject(item, stage, error)  # type: ignore[arg-type]
            return "rejected"

    def _finished(self, state: RunState, row_id: str) -> bool:
        last = "exclusion" if self.config.exclusions else "judge"
        return row_id in state.rejects or row_id in state.records[last]

    # ------------------------------------------------------------------------------------------ outputs
    def _kept(self, state: RunState) -> list[QueryItem]:
        last = "exclusion" if self.config.exclusions else "judge"
        return [
            item
            for item in self.source.pairs
            if item.id not in state.rejects and item.id in state.records[last]
        ]

    def _benchmark(self, state: RunState, kept: list[QueryItem], variant: str) -> Benchmark:
        bench = self.source.benchmark
        queries: dict[str, InstructionQuery] = {}
        qrels_og: dict[str, dict[str, int]] = {}
        qrels_changed: dict[str, dict[str, int]] = {}
        for item in kept:
            changed = state.records["exclusion" if variant == EXCLUSIONS_DIR else "changed"][item.id]
            queries[item.id] = InstructionQuery(
                text=item.query,
                instruction_og=state.records["og"][item.id]["instruction_og"],
                instruction_changed=changed["instruction_changed"],
            )
            judged = state.records["judge"][item.id]["relevant"]
            qrels_og[item.id] = dict(bench.qrels_og[item.id])
            qrels_changed[item.id] = {
                d: (0 if d in judged and not judged[d] else score)
                for d, score in bench.qrels_og[item.id].items()
            }
        name = self.output.name + ("-excl" if variant == EXCLUSIONS_DIR else "")
        return Benchmark(
            name=name,
            corpus=bench.corpus,
            queries=queries,
            qrels_og=qrels_og,
            qrels_changed=qrels_changed,
            main_score=bench.main_score if bench.main_score != "ndcg_at_10" else "map_at_1000",
            source=f"infembed synth benchmark from {self.source.source}",
        )

    def finalize(self, seconds: float = 0.0) -> dict[str, Any]:
        """Write the benchmark (and its exclusion variant) from the records, ``README.md`` and the summary."""
        from infembed.data.benchmarks.local import save_benchmark
        from infembed.data.jsonl import atomic_write, write_json
        from infembed.synth.benchmark_summary import readme

        state = RunState.load(self.out_dir, self.stage_files)
        kept = self._kept(state)
        summary = self.summarize(state, len(kept), seconds)
        written = []
        if kept:
            variants = ["", EXCLUSIONS_DIR] if self.config.exclusions else [""]
            for variant in variants:
                target = self.output / variant if variant else self.output
                save_benchmark(self._benchmark(state, kept, variant), target)
                with atomic_write(target / "README.md") as handle:
                    handle.write(readme(summary, self.config, variant=bool(variant)))
                written.append(str(target))
        summary["benchmark"] = written
        write_json(self.out_dir / "summary.json", summary)
        return summary

    def summarize(self, state: RunState, kept: int, seconds: float) -> dict[str, Any]:  # type: ignore[override]
        from infembed.synth.benchmark_summary import summarize

        return summarize(self, state, kept, seconds)
