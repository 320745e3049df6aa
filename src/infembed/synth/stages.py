"""The five stages of the InF-IR recipe for ONE row (paper section 4.1); :mod:`infembed.synth.pipeline` runs
them over many rows, resumably.

1. ``instruction``: I+ for (Q+, P+).
2. ``poison``: I- (read with Q+) and Q- (read with I+), two requests.
3. ``negatives``: P1- answering (I-, Q+) and P2- answering (I+, Q-), two requests.
4. ``rules``: the row-level rule filters (:func:`infembed.synth.filters.check_row`); no request. They run
   before the judge so that the judge is not paid for rows the rules drop.
5. ``judge``: for each of (I+, Q+) -> P+, (I-, Q+) -> P1- and (I+, Q-) -> P2-, the judge sees the instruction,
   the query and the candidates {P+, P1-, P2-} plus ``k`` random distractors from the corpus, shuffled, and
   names the most relevant; the row is kept only when all three answers are the intended passage.

Every generated field goes through :func:`infembed.synth.filters.clean_answer`; an unusable answer (empty,
refused, too short or long, cut off) is asked again with another seed, up to ``answer_attempts`` times,
then the row is rejected with the reason (:class:`Reject`).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from infembed.synth import prompts, structured
from infembed.synth.filters import DEFAULT_BOUNDS, check_row, clean_answer, parse_choice
from infembed.synth.inputs import SeedPair
from infembed.synth.llm import (
    ChatRequest,
    ChatResponse,
    LLMClient,
    RequestRejected,
    Sampling,
    is_reasoning_model,
)

STAGES: tuple[str, ...] = ("instruction", "poison", "negatives", "rules", "judge")
#: the three judge scenarios: name, instruction field, query field, intended passage label
SCENARIOS: tuple[tuple[str, str, str, str], ...] = (
    ("pos", "instruction_positive", "query_positive", "P+"),
    ("inst_neg", "instruction_negative", "query_positive", "P1-"),
    ("query_neg", "instruction_positive", "query_negative", "P2-"),
)
SCENARIO_TEXT = {"pos": "(I+, Q+)", "inst_neg": "(I-, Q+)", "query_neg": "(I+, Q-)"}
#: the reply label of each field kind (the prompts' ``in the form\nLabel: <...>`` line)
LABELS = {"instruction": "Instruction", "query": "Query", "passage": "Passage"}


class Reject(Exception):
    """The row is dropped at this stage, for ``reason``."""

    def __init__(
        self, reason: str, detail: dict[str, Any] | None = None, usage: dict[str, int] | None = None
    ):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail or {}
        self.usage = usage or {}


@dataclass
class StageSettings:
    """What the stages need besides the row; see :class:`infembed.synth.pipeline.SynthConfig`."""

    model: str = "gpt-4o-mini"
    judge_model: str = "gpt-4o-mini"
    sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=512))
    judge_sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=32))
    domain: str = "web"
    language: str | None = None
    distractors: int = 4
    answer_attempts: int = 3
    max_passage_chars: int = 2000
    seed: int = 0
    bounds: dict[str, tuple[int, int, int]] = field(default_factory=lambda: dict(DEFAULT_BOUNDS))
    json_output: str = "off"  # off | json_object | json_schema (infembed.synth.structured)


def new_usage() -> dict[str, int]:
    """Token accounting of a record; ``unusable`` counts answers the filters could not use."""
    return {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "unusable": 0}


def _add_usage(total: dict[str, int], other: dict[str, int]) -> dict[str, int]:
    for key, value in other.items():
        total[key] = total.get(key, 0) + value
    return total


async def ask(client: LLMClient, request: ChatRequest, what: str, usage: dict[str, int]) -> ChatResponse:
    """One request through the client, its tokens added to ``usage``; when the endpoint refuses it (400/422),
    the row is rejected (:class:`Reject`, naming ``what`` was asked for)."""
    try:
        response = await client.complete(request)
    except RequestRejected as error:
        raise Reject(f"{what}: the endpoint refused the request ({error})", usage=usage) from None
    counts = {"prompt_tokens": response.prompt_tokens, "completion_tokens": response.completion_tokens}
    _add_usage(usage, {"requests": 1, **counts})
    return response


async def ask_yes_no(
    client: LLMClient, settings: Any, messages: list[dict[str, str]], what: str
) -> tuple[bool | None, dict[str, int], list[str]]:
    """A yes/no question to the judge model, asked up to ``settings.answer_attempts`` times until an answer holds a
    verdict (JSON-constrained when ``settings.json_output`` says so): ``(verdict or None, usage, the unusable
    answers)``. The caller rejects its row when the verdict is None."""
    from infembed.synth.benchmark import parse_yes_no

    choices = ("yes", "no")
    fmt = structured.response_format(settings.json_output, "Answer", choices)
    if fmt is not None:
        messages = structured.json_messages(messages, "Answer", choices)
    usage = new_usage()
    answers: list[str] = []
    for attempt in range(settings.answer_attempts):
        usage["unusable"] = len(answers)
        request = ChatRequest.build(settings.judge_model, messages, settings.judge_sampling, attempt, "judge", fmt)
        response = await ask(client, request, what, usage)
        text = structured.unwrap(response.text, "Answer") if fmt is not None else response.text
        verdict = parse_yes_no(text)
        if verdict is not None:
            return verdict, usage, answers
        answers.append(response.text[:80])
    usage["unusable"] = len(answers)
    return None, usage, answers


def shorten(text: str, max_chars: int) -> str:
    """Cut ``text`` at a word boundary to at most ``max_chars`` characters (prompts stay bounded)."""
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip() + " ..."


def _rng(*parts: object) -> random.Random:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


async def _gather(*coroutines: Any) -> list[Any]:
    """Run concurrently and let all finish (so a batch export records every request), then raise the first
    error, preferring errors that concern the endpoint over row rejections."""
    results = await asyncio.gather(*coroutines, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        errors.sort(key=lambda e: isinstance(e, Reject))
        raise errors[0]
    return list(results)


class RowStages:
    """The stage functions, bound to a client, settings and the distractor pool."""

    def __init__(self, client: LLMClient, settings: StageSettings, distractors: list[str]) -> None:
        self.client = client
        self.settings = settings
        self.distractors = distractors

    # ------------------------------------------------------------------------------------------ helpers
    def _language(self, pair: SeedPair) -> str | None:
        return pair.language or self.settings.language

    def _passage(self, text: str) -> str:
        return shorten(text, self.settings.max_passage_chars)

    async def _generate(
        self, stage: str, what: str, kind: str, messages: list[dict[str, str]], label: str | None = None
    ) -> tuple[str, dict]:
        """Ask until the answer is usable; returns (clean text, usage). ``label``: the prompt's reply label
        when it is not the kind's own (e.g. ``Restriction``), stripped before the filters."""
        s = self.settings
        usage = new_usage()
        reasons: list[str] = []
        own_label = label
        label = label or LABELS[kind]
        fmt = structured.response_format(s.json_output, label)
        if fmt is not None:
            messages = structured.json_messages(messages, label)
        for attempt in range(s.answer_attempts):
            usage["unusable"] = len(reasons)
            request = ChatRequest.build(s.model, messages, s.sampling, attempt, stage, fmt)
            response = await ask(self.client, request, what, usage)
            if response.finish_reason == "content_filter":
                reasons.append("refused (content filter)")
                continue
            text = structured.unwrap(response.text, label) if fmt is not None else response.text
            if own_label:
                text = structured.strip_label(text, own_label)
            cleaned = clean_answer(text, kind, domain=s.domain, bounds=s.bounds)
            if cleaned.ok and response.finish_reason == "length":
                one_line = kind != "passage" and "\n" in response.text.strip()
                if not one_line:
                    reasons.append("answer cut off by the token limit")
                    continue
            if cleaned.ok:
                assert cleaned.text is not None
                return cleaned.text, usage
            reasons.append(str(cleaned.reason))
        usage["unusable"] = len(reasons)
        tries = "try" if s.answer_attempts == 1 else "tries"
        raise Reject(f"{what}: {reasons[-1]} ({s.answer_attempts} {tries})", {"answers": reasons}, usage)

    # ------------------------------------------------------------------------------------------- stages
    async def instruction(self, pair: SeedPair) -> dict[str, Any]:
        s = self.settings
        messages = prompts.instruction_prompt(
            pair.query, self._passage(pair.passage), s.domain, self._language(pair)
        )
        text, usage = await self._generate("instruction", "instruction", "instruction", messages)
        return {"id": pair.id, "instruction_positive": text, "usage": usage}

    async def poison(self, pair: SeedPair, instruction: str) -> dict[str, Any]:
        s = self.settings
        passage, lang = self._passage(pair.passage), self._language(pair)
        return await self._two_requests(pair, "poison", (
            ("instruction_negative", "poisoned instruction", "instruction",
             prompts.poison_instruction_prompt(pair.query, instruction, passage, s.domain, lang)),
            ("query_negative", "poisoned query", "query",
             prompts.poison_query_prompt(pair.query, instruction, passage, s.domain, lang)),
        ))

    async def negatives(
        self, pair: SeedPair, instruction: str, instruction_negative: str, query_negative: str
    ) -> dict[str, Any]:
        s = self.settings
        passage, lang = self._passage(pair.passage), self._language(pair)
        return await self._two_requests(pair, "negatives", (
            ("hard_negative_document_1", "negative passage 1", "passage",
             prompts.negative_passage_prompt(pair.query, instruction_negative, passage, s.domain, lang)),
            ("hard_negative_document_2", "negative passage 2", "passage",
             prompts.negative_passage_prompt(query_negative, instruction, passage, s.domain, lang)),
        ))

    async def _two_requests(self, pair: SeedPair, stage: str, requests: tuple) -> dict[str, Any]:
        """Both generations of a stage, concurrently: ``(field, label, kind, messages)`` each."""
        (first, u1), (second, u2) = await _gather(
            *(self._generate(stage, label, kind, messages) for _, label, kind, messages in requests)
        )
        return {"id": pair.id, requests[0][0]: first, requests[1][0]: second, "usage": _add_usage(u1, u2)}

    def rules(self, pair: SeedPair, row: dict[str, str]) -> None:
        reason = check_row(row, domain=self.settings.domain, language=self._language(pair))
        if reason:
            raise Reject(reason)

    def candidates(self, pair: SeedPair, row: dict[str, str], scenario: str) -> list[tuple[str, str]]:
        """The shuffled (label, text) candidates shown to the judge for one scenario; deterministic in
        (seed, row id, scenario), distractors in (seed, row id), never one of the row's own passages."""
        s = self.settings
        own = [
            ("P+", row["document_positive"]),
            ("P1-", row["hard_negative_document_1"]),
            ("P2-", row["hard_negative_document_2"]),
        ]
        taken = {" ".join(text.split()) for _, text in own}
        chosen: list[tuple[str, str]] = []
        if self.distractors and s.distractors:
            rng = _rng(s.seed, pair.id, "distractors")
            tries = 0
            while len(chosen) < s.distractors and tries < 20 * s.distractors:
                tries += 1
                text = self.distractors[rng.randrange(len(self.distractors))]
                key = " ".join(text.split())
                if key and key not in taken:
                    taken.add(key)
                    chosen.append((f"D{len(chosen) + 1}", text))
        candidates = own + chosen
        _rng(s.seed, pair.id, scenario).shuffle(candidates)
        return candidates

    async def choose(
        self, what: str, query: str, instruction: str, candidates: list[tuple[str, str]]
    ) -> tuple[str, dict[str, int]]:
        """The judge's pick among the ``(label, text)`` candidates for (``instruction``, ``query``): its label
        and the usage. ``what`` names the scenario in a rejection (no passage number after all attempts, or
        a request the endpoint refuses)."""
        s = self.settings
        messages = prompts.judge_prompt(
            query, instruction, [self._passage(text) for _, text in candidates], s.domain
        )
        usage = new_usage()
        answers: list[str] = []
        fmt = structured.response_format(s.json_output, "Answer")
        if fmt is not None:
            messages = structured.json_messages(messages, "Answer")
        for attempt in range(s.answer_attempts):
            usage["unusable"] = len(answers)
            request = ChatRequest.build(s.judge_model, messages, s.judge_sampling, attempt, "judge", fmt)
            try:
                response = await self.client.complete(request)
            except RequestRejected as error:
                raise Reject(f"judge {what}: the endpoint refused the request ({error})") from None
            _add_usage(
                usage,
                {
                    "requests": 1,
                    "prompt_tokens": response.prompt_tokens,
                    "completion_tokens": response.completion_tokens,
                },
            )
            text = structured.unwrap(response.text, "Answer") if fmt is not None else response.text
            index = parse_choice(text, len(candidates))
            if index is not None:
                return candidates[index][0], usage
            answers.append(response.text[:80])
        usage["unusable"] = len(answers)
        raise Reject(
            f"judge {what}: no passage number in the answer ({s.answer_attempts} tries)",
            {"answers": answers},
            usage,
        )

    async def _judge_one(self, pair: SeedPair, row: dict[str, str], scenario: tuple[str, str, str, str]):
        name, inst_field, query_field, _ = scenario
        candidates = self.candidates(pair, row, name)
        label, usage = await self.choose(SCENARIO_TEXT[name], row[query_field], row[inst_field], candidates)
        return name, label, usage

    async def judge(self, pair: SeedPair, row: dict[str, str]) -> dict[str, Any]:
        results = await _gather(*(self._judge_one(pair, row, scenario) for scenario in SCENARIOS))
        choices = {name: label for name, label, _ in results}
        usage = new_usage()
        for _, _, u in results:
            _add_usage(usage, u)
        wrong = [
            f"chose {choices[name]} for {SCENARIO_TEXT[name]}"
            for name, _, _, intended in SCENARIOS
            if choices[name] != intended
        ]
        if wrong:
            raise Reject("judge " + "; ".join(wrong), {"judge": choices}, usage)
        return {"id": pair.id, "judge": choices, "usage": usage}


def default_judge_sampling(judge_model: str, max_tokens: int | None = None) -> Sampling:
    """Greedy and short for chat models; reasoning models need room for their hidden reasoning."""
    if is_reasoning_model(judge_model):
        return Sampling(temperature=None, max_tokens=max_tokens or 4096, reasoning_effort="medium")
    return Sampling(temperature=0.0, max_tokens=max_tokens or 32)
