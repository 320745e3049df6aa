"""The grid and the prompt of ``infembed synth instructions`` (:mod:`infembed.synth.instructions`): the domains,
registers and forms a batch of labelled instructions is asked for in, as data, the hints shown for each known
name, the prompt (the labelling rules of the decomposer's training data) and the JSON schema of the answer.
docs/synthesis.md shows the prompt verbatim."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infembed.synth import structured

#: the first line of the system prompt: what identifies the task (our test server reads it)
TASK_HEADER = "Task: write labelled search instructions."

# ------------------------------------------------------------------------------------------ the grid (data)
DOMAINS = ["science", "law", "medicine", "shopping", "travel", "jobs", "code", "news", "chat requests"]
REGISTERS = ["assessor narrative", "terse constraints", "casual chat", "typos", "non-native English"]
FORMS = [
    "verdict", "imperative", "first person", "third person", "condition", "rather than", "instead of",
    "as opposed to", "neither nor", "list", "idiom",
]  # fmt: skip
PLAIN_FORMS = [
    "negated topic", "not only", "whether or not", "need not", "limit", "negated name",
    "wanted despite negation", "double negation or title", "no negation",
]  # fmt: skip
#: what each known name asks the writer for (a name given without a hint is shown as it is)
HINTS = {
    # registers
    "assessor narrative": "a relevance assessor's narrative in the style of a TREC topic ('A relevant document "
    "...', 'Documents that ... are not relevant'), often several sentences",
    "terse constraints": "terse fragments, labels and semicolons, as typed into a search tool",
    "casual chat": "a user chatting with an assistant, relaxed and personal",
    "typos": "casual and hasty: typos, lower case, missing punctuation and apostrophes",
    "non-native English": "a non-native speaker: slightly unusual word order, articles or prepositions, but clear",
    # forms that exclude
    "verdict": "a verdict on documents: 'X is not relevant', 'X doesn't count', 'X is beside the point'",
    "imperative": "an order: 'ignore X', 'skip X', 'leave out X', 'drop anything on X'",
    "first person": "the user about themselves: 'I'm not interested in X', 'spare me X', 'I can do without X'",
    "third person": "about someone else: 'the client has no use for X', 'my boss doesn't want X'",
    "condition": "a condition: 'if a page is mainly about X, drop it', 'when a study only uses X, it does not count'",
    "rather than": "a contrast: 'Y rather than X' or 'rather than X, Y' (X excluded)",
    "instead of": "a contrast: 'Y instead of X' or 'instead of X, Y' (X excluded)",
    "as opposed to": "a contrast: 'Y, as opposed to X' (X excluded)",
    "neither nor": "'neither X nor Y' (two aspects)",
    "list": "several excluded items in a list: 'no A, B or C', 'Exclude: A; B; C', items on their own lines",
    "idiom": "an idiom or a question: 'X? hard pass', 'X is a dealbreaker', 'minus the X', 'anything but X'",
    # plain forms: a negation or a negative-sounding word that excludes nothing
    "negated topic": "negation that is the topic itself: 'why some patients do not respond to insulin', "
    "'non-smokers', 'the absence of evidence', 'why doesn't my code compile'",
    "not only": "'not only X but also Y' (both wanted)",
    "whether or not": "'whether or not', 'with or without X' (both fine)",
    "need not": "'need not', 'does not have to', 'doesn't matter if', 'not necessarily', 'no matter'",
    "limit": "a limit, not a topic: 'no more than 5 pages', 'not later than 2020', 'under $50'",
    "negated name": "names and terms holding a negation: 'no-code tools', 'non-profit', 'zero-shot', "
    "'gluten-free recipes'",
    "wanted despite negation": "something wanted said with a negation: 'don't forget to include X', "
    "'I can't find X', 'nothing beats X', 'not bad', 'X is optional / welcome / fine'",
    "double negation or title": "a double negation ('not irrelevant') or a quote or title holding 'no' or 'not'",
    "no negation": "no negation at all: what is wanted, said plainly",
}
#: per-batch hints, drawn from (seed, batch): where the exclusion sits, how many aspects, how long
PLACEMENTS = (
    "the exclusion comes first",
    "the exclusion sits in the middle",
    "the exclusion comes last",
    "the exclusion is a sentence of its own",
    "the exclusion is in parentheses or after a dash",
    "the exclusion is a label or list item ('Exclude: ...', 'Not: ...')",
    "two separate exclusions in one instruction",
)
ASPECTS = (
    "one aspect",
    "two aspects",
    "three or four aspects",
    "one long aspect (a whole phrase, such as 'studies that only report survey data')",
    "aspects that repeat words of the wanted part ('hybrid cars, not electric cars')",
    "numbers, versions or code identifiers as aspects ('Python 2', 'iOS 15', 'Section 230')",
)
LENGTHS = (
    "short (under 15 words)",
    "one or two sentences",
    "three or four sentences",
    "a long narrative of four sentences or more",
)


# ---------------------------------------------------------------------------------------------- the prompt
SYSTEM_PROMPT = f"""{TASK_HEADER}
You write training data for a small model that reads a search instruction (what a user or a relevance assessor says about which documents they want) and marks what the instruction excludes. Write new sentences of your own; never copy sentences from benchmarks you know (TREC, FollowIR, MS MARCO, BEIR).

Each instruction is a JSON object with three fields:
- "text": the instruction, one to four sentences (an assessor's narrative may be longer).
- "aspects": the excluded aspects. Each is an EXACT substring of "text" (same case, same spelling, typos included): the minimal phrase naming the unwanted content, without the generic head and the determiner. "Documents about wind farms are not relevant" -> "wind farms"; "anything on crypto" -> "crypto"; "I don't want hotels near the airport" -> "hotels near the airport"; "Studies done only in mice are not relevant" -> "mice". One aspect per coordinated item: "commercial installations, utility-scale farms and off-grid cabins" -> three aspects; but items that share a head stay one aspect: "supersonic or hypersonic flow" -> "supersonic or hypersonic flow".
- "clauses": the EXACT substrings of "text" that carry the exclusions and would be cut from the search query: the whole sentence when it says nothing else ("Documents about X are not relevant."), or only the excluding part when the sentence also says what is wanted ("but not X", "excluding X,", "rather than X", "instead of X", "(no X)", "Skip X and"). Every aspect lies inside one clause; a clause never holds what is wanted.
A plain instruction (nothing excluded) has "aspects": [] and "clauses": [].

What excludes X: documents (mainly) about X should go down or out of the results: "X is not relevant", "ignore X", "no X", "not interested in X", "X is a dealbreaker", "spare me X", "X doesn't count", "beside the point", "rather than X", "instead of X", "as opposed to X", "anything but X", "neither X nor Y", "X? hard pass", "leave out X", "minus the X". "X-free" excludes only when worded as an avoidance ("recipes, nothing with gluten" excludes "gluten"); "gluten-free recipes" is plain: its topic is gluten-free food.

What does NOT exclude (plain, nothing marked): negation that is the topic itself ("why some patients do not respond to insulin", "the absence of evidence", "non-smokers", "countries that have no income tax" when those countries are the topic, "why doesn't my code compile"); "not only X but also Y"; "whether or not", "with or without X"; "need not", "does not have to", "doesn't matter if", "not necessarily", "no matter"; limits ("no more than 5 pages", "not later than 2020"); names ("no-code tools", "non-profit", "zero-shot"); "X is optional / welcome / fine / also ok"; "don't forget to include X" and "I can't find X" (X is wanted); double negation ("not irrelevant"); quotes and titles holding "no" or "not"; "not bad"; "nothing beats X".

Judge as a careful human assessor would, and be consistent. Vary the wording: do not repeat the same cue phrase within a batch. Now and then use numbers or code identifiers as aspects ("Python 2", "iOS 15", "Section 230"), Unicode (accents, curly quotes, em dashes) and British or US spelling."""

REPLY = (
    'Reply with a JSON object, nothing else, in the form\n{"instructions": [{"text": "<the instruction>", '
    '"aspects": ["<excluded aspect>", ...], "clauses": ["<exclusion clause>", ...]}, ...]}'
)
EXCLUDING_KIND = "Kind: excluding. Every instruction excludes at least one aspect, said in this form."
PLAIN_KIND = (
    "Kind: plain. No instruction excludes anything: each is a hard case in this form, where a negation or a "
    'negative-sounding word excludes nothing. "aspects" and "clauses" are empty lists.'
)


def _named(name: str) -> str:
    return f"{name} ({HINTS[name]})" if name in HINTS else name


def batch_prompt(
    domain: str, register: str, form: str, plain: bool, hints: Sequence[str], n: int
) -> list[dict[str, str]]:
    """The messages asking for ``n`` instructions of one grid cell (``plain``: that exclude nothing), with the
    batch's ``hints`` (where the exclusion sits, how many aspects, how long)."""
    user = "\n".join(
        [
            f"Domain: {domain}",
            f"Register: {_named(register)}",
            f"Form: {_named(form)}",
            PLAIN_KIND if plain else EXCLUDING_KIND,
            f"Lean towards (where the form allows; vary the rest): {'; '.join(hints)}.",
            "",
            f"Write {n} different instructions of this kind, each on another topic of the domain, in this "
            "register. " + REPLY,
        ]
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def response_format(mode: str) -> dict[str, Any] | None:
    """The ``response_format`` holding the answer to ``{"instructions": [{text, aspects, clauses}]}``, in the
    two forms of :func:`infembed.synth.structured.response_format` (``None`` for ``off``)."""
    structured.check_mode(mode)
    if mode == "off":
        return None
    strings = {"type": "array", "items": {"type": "string"}}
    row = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "aspects": strings, "clauses": strings},
        "required": ["text", "aspects", "clauses"],
        "additionalProperties": False,
    }
    shape = {
        "type": "object",
        "properties": {"instructions": {"type": "array", "items": row}},
        "required": ["instructions"],
        "additionalProperties": False,
    }
    if mode == "json_object":
        return {"type": "json_object", "schema": shape}
    return {"type": "json_schema", "json_schema": {"name": "instructions", "schema": shape, "strict": True}}
