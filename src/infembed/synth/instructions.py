"""Labelled search instructions from an LLM: the training data of the learned exclusion decomposer
(:mod:`infembed.instructions.decomposer`), made by ``infembed synth instructions``.

A run asks for ``rows`` instructions in batches of ``batch_size``, one request a batch. Each batch is one cell
of a grid (domain x register x form): ``plain_fraction`` of the batches ask for plain instructions (nothing
excluded; hard cases where a negation does not exclude, in a form of ``plain_forms``), the others for
instructions that exclude something, in a form of ``forms``. Batch ``i``'s cell, and a hint of where the
exclusion sits, how many aspects and how long, depend only on ``seed`` and ``i``: the grid is walked in a
seeded shuffled order, pass after pass, so a larger ``rows`` adds batches after the same first ones.

The answer is a JSON object ``{"instructions": [{"text", "aspects", "clauses"}, ...]}`` (with ``json_output``,
the server is held to that schema). An answer without it is asked again (``answer_attempts``), then the batch
is rejected. Every row is read by the project's one reader of the format,
:func:`infembed.instructions.tagging.labelled_from_json` (exact substrings, every aspect inside a clause), and
must be of the kind its batch asked for; a row that fails is rejected with the reason. Rows whose text repeats
an earlier row's are dropped when the output is written.

Output directory (``--output``)::

    run.json            the settings and the endpoint; a resume with other settings (but rows,
                        max_consecutive_failures, batches_in_flight) or against another endpoint is refused
    batches.jsonl       one record a finished batch {id, domain, register, form, plain, rows, rejected, usage}
    rejects.jsonl       batches without a usable answer {id, stage, reason, detail, usage}
    instructions.jsonl  the kept rows in batch order (rewritten atomically at the end of every run):
                        {id, text, aspects, clauses, domain, register, form, source: "synth:<model>"},
                        read by tagging.read_labelled: ``infembed decomposer train --data OUTPUT/instructions.jsonl``
    summary.json        batches and rows kept and rejected with reasons, kept rows per cell, tokens, cost
    cache.sqlite        the response cache

It is a :class:`~infembed.synth.pipeline.Pipeline` with one stage: the same workers, response cache, retries,
endpoint identity and resume (a run killed with SIGKILL and started again loses and duplicates nothing).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from itertools import product
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import write_json, write_jsonl
from infembed.instructions.tagging import labelled_from_json
from infembed.settings import check_number, setting, settings_from_dict
from infembed.synth import structured
from infembed.synth.instruction_prompts import (
    ASPECTS,
    DOMAINS,
    FORMS,
    LENGTHS,
    PLACEMENTS,
    PLAIN_FORMS,
    REGISTERS,
    batch_prompt,
    response_format,
)
from infembed.synth.llm import ChatRequest, LLMClient, Sampling
from infembed.synth.pipeline import Pipeline, RunState
from infembed.synth.run_state import SUMMARY_FILE, stage_tokens, tokens_and_cost
from infembed.synth.stages import Reject, StageSettings, ask, new_usage

STAGE = "instructions"
STAGE_FILES = {STAGE: "batches.jsonl"}
OUTPUT_FILE = "instructions.jsonl"
#: settings a resume may change: how many rows (batches are added or left out at the end), when to give up,
#: how many batches at once
FREE_ON_RESUME = ("rows", "max_consecutive_failures", "batches_in_flight")


@dataclass
class InstructionsConfig:
    """Every setting of ``infembed synth instructions`` (its flags, the keys of a ``--config`` file and the
    ``config`` saved in ``run.json``); the endpoint's are :class:`~infembed.synth.llm.ClientConfig`'s."""

    rows: int = setting(100, "Instructions to ask for in all (rounded up to whole batches).")
    batch_size: int = setting(5, "Instructions asked for in one request (one grid cell).")
    plain_fraction: float = setting(
        1 / 3, "Share of batches asking for plain instructions (nothing excluded); default 1/3."
    )
    domains: list[str] = setting(default_factory=lambda: list(DOMAINS), help="Domains of the grid.")
    registers: list[str] = setting(default_factory=lambda: list(REGISTERS), help="Registers of the grid.")
    forms: list[str] = setting(default_factory=lambda: list(FORMS), help="Forms of an exclusion.")
    plain_forms: list[str] = setting(
        default_factory=lambda: list(PLAIN_FORMS),
        help="Forms of the plain batches (negations that exclude nothing).",
    )
    model: str = setting("gpt-4o-mini", "Model that writes the instructions.")
    temperature: float | None = setting(0.9, "Sampling temperature.")
    max_tokens: int = setting(2048, "Token limit of an answer (a whole batch).")
    answer_attempts: int = setting(3, "Tries per batch when the answer holds no JSON list of instructions.")
    seed: int = setting(0, "Seed of the grid's order and the per-batch hints.")
    json_output: str = setting(
        "off", "JSON-constrained answers: off, json_object (llama.cpp servers) or json_schema (OpenAI, vLLM)."
    )
    max_consecutive_failures: int = setting(
        3, "Stop after this many requests in a row failed after all their retries."
    )
    batches_in_flight: int | None = setting(None, "Batches worked on at once (default: twice --concurrency).")

    def __post_init__(self) -> None:
        check_number("rows", self.rows, integer=True, minimum=1)
        check_number("batch_size", self.batch_size, integer=True, minimum=1, maximum=50)
        check_number("plain_fraction", self.plain_fraction, minimum=0, maximum=1)
        for name in ("domains", "registers", "forms", "plain_forms"):
            values = getattr(self, name)
            if any(not v.strip() for v in values) or len(set(values)) != len(values):
                raise SettingsError(f"{name} must be distinct non-empty names; got {values!r}")
        for name, needed in (
            ("domains", True), ("registers", True),
            ("forms", self.plain_fraction < 1), ("plain_forms", self.plain_fraction > 0),
        ):  # fmt: skip
            if needed and not getattr(self, name):
                raise SettingsError(f"{name} is empty; give at least one")
        check_number("temperature", self.temperature, minimum=0, optional=True)
        check_number("max_tokens", self.max_tokens, integer=True, minimum=1)
        check_number("answer_attempts", self.answer_attempts, integer=True, minimum=1)
        check_number("seed", self.seed, integer=True, minimum=0)
        structured.check_mode(self.json_output)
        check_number("max_consecutive_failures", self.max_consecutive_failures, integer=True, minimum=1)
        check_number("batches_in_flight", self.batches_in_flight, integer=True, minimum=1, optional=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | Path | None = None) -> InstructionsConfig:
        return settings_from_dict(cls, data, source)

    @property
    def rows_in_flight(self) -> int | None:  # the pipeline's name for its units at once
        return self.batches_in_flight

    @property
    def batches(self) -> int:
        return math.ceil(self.rows / self.batch_size)

    def stage_settings(self) -> StageSettings:
        sampling = Sampling(temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed or None)
        return StageSettings(
            model=self.model,
            judge_model=self.model,
            sampling=sampling,
            answer_attempts=self.answer_attempts,
            seed=self.seed,
            json_output=self.json_output,
        )


# ------------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class Cell:
    """One batch: its grid cell, its kind and the hints of its request."""

    id: str
    domain: str
    register: str
    form: str
    plain: bool
    hints: tuple[str, ...] = ()


@dataclass
class Plan:
    """The batches of a run (``pairs``: the pipeline's name for its units of work)."""

    pairs: list[Cell]
    source: str = "synth instructions"
    distractors: list[str] = field(default_factory=list)  # unused; the pipeline's interface


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def plan(config: InstructionsConfig) -> Plan:
    """The batches of ``config``: batch ``i`` depends only on the seed, the grid and ``i``."""
    p, eps = config.plain_fraction, 1e-9
    grids = {
        False: list(product(config.domains, config.registers, config.forms)),
        True: list(product(config.domains, config.registers, config.plain_forms)),
    }
    cells = []
    for i in range(config.batches):
        plain = math.floor((i + 1) * p + eps) > math.floor(i * p + eps)
        j = math.floor(i * p + eps) if plain else i - math.floor(i * p + eps)  # index among its kind
        grid = grids[plain]
        order = list(range(len(grid)))
        _rng(config.seed, "plain" if plain else "excluding", j // len(grid)).shuffle(order)
        domain, register, form = grid[order[j % len(grid)]]
        rng = _rng(config.seed, "hints", i)
        hints = (
            (rng.choice(LENGTHS),)
            if plain
            else (rng.choice(PLACEMENTS), rng.choice(ASPECTS), rng.choice(LENGTHS))
        )
        cells.append(Cell(f"b{i:06d}", domain, register, form, plain, hints))
    return Plan(cells)


# ------------------------------------------------------------------------------------------ the answers
def parse_answer(text: str) -> list[Any] | None:
    """The list of rows of an answer: ``{"instructions": [...]}`` or a bare list of objects, possibly in a code
    fence or after some prose; None when there is none (an answer cut off inside it has none: the complete
    rows or lists of strings inside are not taken for it)."""
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL)
    if fence:
        body = fence.group(1)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", body):
        try:
            value, _ = decoder.raw_decode(body, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("instructions"), list) and value["instructions"]:
            return value["instructions"]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return value
    return None


def _reason(error: DataError) -> str:
    """A reader's error without the quoted part, so that reasons group: ``clauses: is not a substring ...``."""
    reason = re.sub(r"""^(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*") """, "", error.reason, flags=re.DOTALL)
    return f"{error.field}: {reason}" if error.field else reason


def check_row(obj: Any, plain: bool) -> tuple[dict[str, Any] | None, str | None]:
    """``(row, None)`` when ``obj`` is a labelled instruction of the kind asked for, else ``(None, reason)``."""
    try:
        item = labelled_from_json(obj)
    except DataError as error:
        return None, _reason(error)
    if plain and item.aspects:
        return None, "kind: marks an exclusion, but the batch asked for plain instructions"
    if not plain and not item.aspects:
        return None, "kind: marks no exclusion, but the batch asked for excluding instructions"
    assert isinstance(obj, dict)
    return {"text": item.text, "aspects": obj.get("aspects", []), "clauses": obj.get("clauses", [])}, None


def text_key(text: str) -> str:
    """What makes two texts duplicates: the words, case and spacing aside."""
    return " ".join(text.casefold().split())


class InstructionsRun(Pipeline):
    """Asks for every batch of ``config`` not yet done, into ``out_dir``. Call :meth:`run` (async) or
    :func:`infembed.synth.pipeline.run_sync`."""

    stage_files = STAGE_FILES
    fingerprint = tuple(f.name for f in fields(InstructionsConfig) if f.name not in FREE_ON_RESUME)

    def __init__(self, out_dir: str | Path, client: LLMClient, config: InstructionsConfig, **options: Any):
        super().__init__(plan(config), out_dir, client, config, **options)  # type: ignore[arg-type]
        self.config: InstructionsConfig = config  # type: ignore[assignment]

    async def _ask(self, cell: Cell) -> dict[str, Any]:
        s, c = self.stages.settings, self.config
        messages = batch_prompt(cell.domain, cell.register, cell.form, cell.plain, cell.hints, c.batch_size)
        fmt = response_format(s.json_output)
        usage = new_usage()
        reasons: list[str] = []
        for attempt in range(s.answer_attempts):
            usage["unusable"] = len(reasons)
            request = ChatRequest.build(s.model, messages, s.sampling, attempt, STAGE, fmt)
            response = await ask(self.client, request, "instructions", usage)
            found = parse_answer(response.text)
            if found is None:
                cut = response.finish_reason == "length"
                reasons.append("answer cut off by the token limit" if cut else "no JSON list of instructions")
                continue
            rows, rejected = [], []
            for k, obj in enumerate(found):
                if k < c.batch_size:
                    row, reason = check_row(obj, cell.plain)
                else:
                    row, reason = None, f"more rows than the {c.batch_size} asked for"
                if row is not None:
                    rows.append(row)
                else:
                    rejected.append({"reason": reason, "row": obj})
            base = {k: v for k, v in asdict(cell).items() if k != "hints"}
            return {**base, "rows": rows, "rejected": rejected, "usage": usage}
        usage["unusable"] = len(reasons)
        tries = "try" if s.answer_attempts == 1 else "tries"
        raise Reject(
            f"instructions: {reasons[-1]} ({s.answer_attempts} {tries})", {"answers": reasons}, usage
        )

    async def _process(self, cell: Cell) -> str:  # type: ignore[override]
        if cell.id in self.state.rejects:
            return "rejected"
        try:
            await self._stage(STAGE, cell.id, lambda: self._ask(cell))
            return "kept"
        except Reject as error:
            self._reject(cell, STAGE, error)  # type: ignore[arg-type]
            return "rejected"

    def _finished(self, state: RunState, row_id: str) -> bool:
        return row_id in state.rejects or row_id in state.records[STAGE]

    # ------------------------------------------------------------------------------------------- outputs
    def finalize(self, seconds: float = 0.0) -> dict[str, Any]:
        """Write ``instructions.jsonl`` (kept rows, batch order, no duplicate text) and ``summary.json``."""
        state = RunState.load(self.out_dir, self.stage_files)
        source = f"synth:{self.config.model}"
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        duplicates = 0
        for cell in self.seed.pairs:
            record = state.records[STAGE].get(cell.id)
            if record is None or cell.id in state.rejects:
                continue
            for k, row in enumerate(record["rows"]):
                key = text_key(row["text"])
                if key in seen:
                    duplicates += 1
                    continue
                seen.add(key)
                tags = {"domain": cell.domain, "register": cell.register, "form": cell.form}
                rows.append({"id": f"{cell.id}-{k}", **row, **tags, "source": source})
        write_jsonl(self.out_dir / OUTPUT_FILE, rows)
        summary = self.summarize(state, rows, duplicates, seconds)
        write_json(self.out_dir / SUMMARY_FILE, summary)
        return summary

    def summarize(  # type: ignore[override]
        self, state: RunState, rows: list[dict[str, Any]], duplicates: int, seconds: float
    ) -> dict[str, Any]:
        """The ``summary.json``: batches and rows kept and rejected (with reasons), kept rows per cell, tokens,
        cost and what this process asked for; in the form of ``synth run``'s."""
        size = self.config.batch_size
        batch_reasons, row_reasons = Counter[str](), Counter[str]()
        done = answered = missing = 0
        for cell in self.seed.pairs:
            reject = state.rejects.get(cell.id)
            record = state.records[STAGE].get(cell.id)
            if reject is not None:
                batch_reasons[str(reject.get("reason", "")).split(" (", 1)[0]] += 1
            elif record is not None:
                done += 1
                n = len(record["rows"]) + len(record["rejected"])
                answered += n
                missing += max(0, size - n)
                row_reasons.update(str(r["reason"]) for r in record["rejected"])
        if duplicates:
            row_reasons["duplicate of an earlier instruction"] = duplicates
        n_batches, rejected = len(self.seed.pairs), sum(batch_reasons.values())

        def stage(n_in: int, kept: int, reasons: Counter[str]) -> dict[str, Any]:
            return {
                "in": n_in,
                "kept": kept,
                "rejected": n_in - kept,
                "keep_rate": round(kept / n_in, 4) if n_in else None,
                "reasons": dict(reasons.most_common()),
            }

        tokens = stage_tokens(state, self.stage_files)
        finished = done + rejected
        money = tokens_and_cost(self, tokens, {STAGE: self.config.model}, finished, ("batch", "batches"))
        total = money["cost_usd"]["all_answers"]
        money["cost_usd"]["per_1000_rows"] = (
            round(total / len(rows) * 1000, 4) if total is not None and rows else None
        )
        return {
            "output": str(self.out_dir),
            "file": str(self.out_dir / OUTPUT_FILE),
            "models": {"generation": self.config.model},
            "batches": {
                "input": n_batches,
                "done": done,
                "rejected": rejected,
                "unfinished": n_batches - finished,
                "deferred_to_batch": self._deferred,
            },
            "rows": {
                "asked": n_batches * size,
                "answered": answered,
                "kept": len(rows),
                "rejected": answered - len(rows),
                "not_written": missing,  # asked for, but the answers held fewer rows
                "unfinished": (n_batches - finished) * size,
                "plain": sum(1 for r in rows if not r["aspects"]),
                "excluding": sum(1 for r in rows if r["aspects"]),
            },
            "keep_rate": round(len(rows) / answered, 4) if answered else None,
            "stages": {"batches": stage(finished, done, batch_reasons), "instructions": stage(answered, len(rows), row_reasons)},
            "kept_by": {name: dict(Counter(r[name] for r in rows).most_common()) for name in ("domain", "register", "form")},
            **money,
            "this_run": {"seconds": round(seconds, 3), "outcomes": dict(self._outcomes), **self.client.meter.to_json()},
        }  # fmt: skip
