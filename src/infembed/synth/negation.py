"""Negation-aware rows (``infembed synth run --style negation``): the InF-IR schema plus ``"style": "negation"``,
as the hand-written ``inf-ir-msmarco-negation`` rows of the shared data.

Both instructions share ONE general statement G and differ only in an exclusion sentence, mirrored:
I+ = G + E+, E+ excluding the salient aspect of the negative passage P1- in P1-'s own words, and I- = G + E-,
E- excluding that of the positive passage P+. So for (I+, Q+) against (I-, Q+) the choice between P+ and
P1- hinges on the exclusion alone; Q- and P2- are as in the InF-IR style. The stages of one row:

1. ``general`` (2 requests, in turn): G from (Q+, P+); then E-, the exclusion of P+'s aspect.
2. ``contrast`` (2, at once): P1- answering (I-, Q+) on another aspect of the query; Q- (the InF-IR poisoned
   query, read with G).
3. ``exclusion`` (2, in turn): E+, the exclusion of an aspect of P1- that P+ does not have; then P2-
   answering (I+, Q-) (the InF-IR negative passage prompt).
4. ``rules`` (no request): the InF-IR row rules; neither exclusion restates G; E+ names a word of P1- that P+
   lacks and E- a word of P+ that P1- lacks (besides the query's and G's words and generic ones).
5. ``judge`` (7 requests, at once): the three InF-IR scenarios over {P+, P1-, P2-} and the distractors; (I+,
   Q+) and (I-, Q+) over {P+, P1-} alone, which must pick P+ and P1-; and G alone with Q+ must admit both P+
   and P1- (yes/no each), else the general statement, not the exclusion, decides.

It is a :class:`~infembed.synth.pipeline.Pipeline` with these stages: the same client, response cache,
retries, record files, resume (a SIGKILL loses and duplicates nothing), reject reasons and summary.
"""

from __future__ import annotations

import re
from typing import Any

from infembed.data.records import Triplet
from infembed.synth import negation_prompts as np_
from infembed.synth import prompts
from infembed.synth.filters import _norm, check_row
from infembed.synth.inputs import SeedPair
from infembed.synth.pipeline import Pipeline
from infembed.synth.run_state import RunState, reason_kinds
from infembed.synth.stages import (
    SCENARIO_TEXT,
    SCENARIOS,
    Reject,
    _add_usage,
    _gather,
    _rng,
    ask_yes_no,
    new_usage,
)

STYLE = "negation"
NEGATION_STAGES: tuple[str, ...] = ("general", "contrast", "exclusion", "rules", "judge")
STAGE_FILES = {
    "general": "general.jsonl",
    "contrast": "contrast.jsonl",
    "exclusion": "exclusion.jsonl",
    "judge": "judged.jsonl",
}
#: the two judgments over {P+, P1-} alone: name, instruction field, intended passage
PAIR_SCENARIOS: tuple[tuple[str, str, str], ...] = (
    ("pos_pair", "instruction_positive", "P+"),
    ("inst_neg_pair", "instruction_negative", "P1-"),
)
JUDGE_TEXT = {
    **SCENARIO_TEXT,
    "pos_pair": "(I+, Q+) over {P+, P1-}",
    "inst_neg_pair": "(I-, Q+) over {P+, P1-}",
}
INTENDED = {name: label for name, _, _, label in SCENARIOS} | {
    name: label for name, _, label in PAIR_SCENARIOS
}
ALONE = "the exclusion must decide alone"

#: words that name no aspect (how exclusions are phrased, what passages are)
_GENERIC = frozenset(
    """about also answer answers anything article articles aspect aspects being case cases content cover covers
    covering describe describes describing detail details discuss discusses discussing document documents does
    each exclude excluded excluding explain explains explaining focus focuses from give gives ignore include
    includes including information instead interested into just leave like mention mentions mentioning more
    most need only other page pages passage passages rather relevant result results return show skip some
    source sources such than that their them there these they this those topic topics want what when where
    which whether with would your""".split()
)


def _content_words(text: str) -> set[str]:
    """Words that may name an aspect: 4+ characters or holding a digit, generic ones left out, a plural 's'
    dropped."""
    words = set()
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if len(word) < 4 and not any(c.isdigit() for c in word):
            continue
        if word.endswith("s") and len(word) > 4 and not word.endswith("ss"):
            word = word[:-1]
        if word not in _GENERIC:
            words.add(word)
    return words


def exclusion_words(exclusion: str, target: str, kept: str, query: str, general: str) -> set[str]:
    """The words by which ``exclusion`` names ``target``'s own aspect: words of ``target`` that ``kept``, the
    query and the general statement do not have (269 of the 270 hand-written shared rows have some, both
    ways)."""
    named = _content_words(exclusion) & _content_words(target)
    return named - _content_words(kept) - _content_words(query) - _content_words(general)


def check_negation_row(row: dict[str, str], general: str, exclusions: dict[str, str]) -> str | None:
    """The rules of a negation row (``exclusions``: ``{"I+": E+, "I-": E-}``); the first violated one's reason,
    or None."""
    reason = check_row(row)
    if reason:
        return reason
    sides = (
        ("I+", row["hard_negative_document_1"], row["document_positive"], "P1-", "P+"),
        ("I-", row["document_positive"], row["hard_negative_document_1"], "P+", "P1-"),
    )
    for side, *_ in sides:
        if _norm(general) in _norm(exclusions[side]):
            return f"the exclusion of {side} repeats the general statement"
    for side, target, kept, target_name, kept_name in sides:
        if not exclusion_words(exclusions[side], target, kept, row["query_positive"], general):
            return (
                f"the exclusion of {side} names no word of {target_name} that {kept_name} lacks "
                f"(it must name {target_name}'s aspect)"
            )
    return None


class NegationPipeline(Pipeline):
    """Negation-aware rows over ``seed.pairs``; built by :func:`infembed.synth.pipeline.make_pipeline` for
    ``SynthConfig(style="negation")``."""

    stage_files = STAGE_FILES
    stage_order = NEGATION_STAGES

    # ------------------------------------------------------------------------------------------- stages
    def _cue(self, pair: SeedPair, side: str) -> str:
        """How the exclusion of ``side`` is asked to be phrased: drawn from the seed and the row."""
        rng = _rng(self.config.seed, pair.id, "cue", side)
        return np_.EXCLUSION_CUES[rng.randrange(len(np_.EXCLUSION_CUES))]

    async def _generate(self, stage: str, what: str, kind: str, messages: list, label: str | None = None):
        return await self.stages._generate(stage, what, kind, messages, label)

    async def _general(self, pair: SeedPair) -> dict[str, Any]:
        passage = self.stages._passage(pair.passage)
        messages = np_.general_prompt(pair.query, passage)
        general, usage = await self._generate(
            "general", "general statement", "instruction", messages, "Statement"
        )
        messages = np_.exclusion_prompt(pair.query, general, passage, self._cue(pair, "I-"))
        try:
            exclusion, used = await self._generate(
                "general", "exclusion of I-", "instruction", messages, "Exclusion"
            )
        except Reject as error:
            raise Reject(error.reason, error.detail, _add_usage(error.usage or new_usage(), usage)) from None
        return {
            "id": pair.id,
            "general": general,
            "exclusion_negative": exclusion,
            "instruction_negative": f"{general} {exclusion}",
            "usage": _add_usage(usage, used),
        }

    async def _contrast(self, pair: SeedPair, general: str, instruction_negative: str) -> dict[str, Any]:
        passage = self.stages._passage(pair.passage)
        (p1, u1), (q_neg, u2) = await _gather(
            self._generate(
                "contrast", "negative passage 1", "passage",
                np_.passage_prompt(pair.query, instruction_negative, passage),
            ),
            self._generate(
                "contrast", "poisoned query", "query", prompts.poison_query_prompt(pair.query, general, passage)
            ),
        )  # fmt: skip
        return {
            "id": pair.id,
            "hard_negative_document_1": p1,
            "query_negative": q_neg,
            "usage": _add_usage(u1, u2),
        }

    async def _exclusion(self, pair: SeedPair, general: str, p1: str, query_negative: str) -> dict[str, Any]:
        passage = self.stages._passage(pair.passage)
        messages = np_.exclusion_prompt(
            pair.query, general, self.stages._passage(p1), self._cue(pair, "I+"), keep=passage
        )
        exclusion, usage = await self._generate(
            "exclusion", "exclusion of I+", "instruction", messages, "Exclusion"
        )
        instruction = f"{general} {exclusion}"
        messages = prompts.negative_passage_prompt(query_negative, instruction, passage)
        try:
            p2, used = await self._generate("exclusion", "negative passage 2", "passage", messages)
        except Reject as error:
            raise Reject(error.reason, error.detail, _add_usage(error.usage or new_usage(), usage)) from None
        return {
            "id": pair.id,
            "exclusion_positive": exclusion,
            "instruction_positive": instruction,
            "hard_negative_document_2": p2,
            "usage": _add_usage(usage, used),
        }

    def row(self, state: RunState, pair: SeedPair) -> dict[str, str] | None:
        try:
            general = state.records["general"][pair.id]
            contrast = state.records["contrast"][pair.id]
            exclusion = state.records["exclusion"][pair.id]
        except KeyError:
            return None
        return {
            "query_positive": pair.query,
            "instruction_positive": exclusion["instruction_positive"],
            "document_positive": pair.passage,
            "instruction_negative": general["instruction_negative"],
            "query_negative": contrast["query_negative"],
            "hard_negative_document_1": contrast["hard_negative_document_1"],
            "hard_negative_document_2": exclusion["hard_negative_document_2"],
        }

    def triplet(self, row: dict[str, str], pair: SeedPair) -> Triplet:
        return Triplet(**row, id=pair.id, query_id=pair.query_id, doc_id=pair.doc_id, extra={"style": STYLE})

    # -------------------------------------------------------------------------------------------- judge
    async def _pair_choice(self, pair: SeedPair, row: dict[str, str], name: str, field: str):
        candidates = [("P+", row["document_positive"]), ("P1-", row["hard_negative_document_1"])]
        _rng(self.config.seed, pair.id, name).shuffle(candidates)
        label, usage = await self.stages.choose(
            JUDGE_TEXT[name], row["query_positive"], row[field], candidates
        )
        return name, label, usage

    async def _fits_general(self, pair: SeedPair, general: str, label: str, passage: str):
        """Does the passage fit G alone (with Q+)? yes/no from the judge model."""
        s = self.stages.settings
        messages = np_.check_prompt(pair.query, general, self.stages._passage(passage))
        what = f"judge: does {label} fit the general statement"
        verdict, usage, answers = await ask_yes_no(self.client, s, messages, what)
        if verdict is None:
            raise Reject(f"{what}: no yes/no answer ({s.answer_attempts} tries)", {"answers": answers}, usage)
        return label, verdict, usage

    async def _judge(self, pair: SeedPair, row: dict[str, str], general: str) -> dict[str, Any]:
        passages = (("P+", row["document_positive"]), ("P1-", row["hard_negative_document_1"]))
        results = await _gather(
            *(self.stages._judge_one(pair, row, scenario) for scenario in SCENARIOS),
            *(self._pair_choice(pair, row, name, field) for name, field, _ in PAIR_SCENARIOS),
            *(self._fits_general(pair, general, label, text) for label, text in passages),
        )
        usage = new_usage()
        for *_, used in results:
            _add_usage(usage, used)
        choices = {name: label for name, label, _ in results[: len(INTENDED)]}
        fits = {label: verdict for label, verdict, _ in results[len(INTENDED) :]}
        wrong = [f"chose {choices[n]} for {JUDGE_TEXT[n]}" for n in INTENDED if choices[n] != INTENDED[n]]
        ruled_out = [label for label, verdict in fits.items() if not verdict]
        if ruled_out:
            wrong.append(f"the general statement alone rules out {' and '.join(ruled_out)} ({ALONE})")
        if wrong:
            reason = ("judge " if choices != INTENDED else "judge: ") + "; ".join(wrong)
            raise Reject(reason, {"judge": choices, "general": fits}, usage)
        return {"id": pair.id, "judge": choices, "general": fits, "usage": usage}

    def reason_kinds(self, reject: dict[str, Any]) -> list[str]:
        detail = reject.get("detail") or {}
        if reject.get("stage") != "judge" or not isinstance(detail.get("judge"), dict):
            return reason_kinds(reject)
        kinds = [
            f"judge wrong on {JUDGE_TEXT[n]}"
            for n, label in detail["judge"].items()
            if label != INTENDED.get(n)
        ]
        fits = detail.get("general") or {}
        return kinds + [
            f"the general statement alone rules out {label}" for label, ok in fits.items() if not ok
        ]

    # --------------------------------------------------------------------------------------------- rows
    async def _process(self, pair: SeedPair) -> str:
        state = self.state
        if pair.id in state.rejects:
            return "rejected"
        if pair.id in state.records["judge"]:
            return "kept"
        stage = "general"
        try:
            general = await self._stage(stage, pair.id, lambda: self._general(pair))
            g = general["general"]
            stage = "contrast"
            contrast = await self._stage(
                stage, pair.id, lambda: self._contrast(pair, g, general["instruction_negative"])
            )
            stage = "exclusion"
            exclusion = await self._stage(
                stage,
                pair.id,
                lambda: self._exclusion(
                    pair, g, contrast["hard_negative_document_1"], contrast["query_negative"]
                ),
            )
            stage = "rules"
            row = self.row(state, pair)
            assert row is not None
            exclusions = {"I+": exclusion["exclusion_positive"], "I-": general["exclusion_negative"]}
            reason = check_negation_row(row, g, exclusions)
            if reason:
                raise Reject(reason)
            if not self.config.judge:
                return "kept"
            stage = "judge"
            self._record("judge", await self._judge(pair, row, g))
            return "kept"
        except Reject as error:
            self._reject(pair, stage, error)
            return "rejected"
