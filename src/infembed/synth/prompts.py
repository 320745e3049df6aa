"""Prompts of the five LLM tasks of the InF-IR recipe (paper section 4.1, appendices B and H).

Each builder returns chat messages. The first line of every system message names the task (see
:data:`TASK_HEADERS`), which :func:`task_of` reads back; the answer is asked for on one line after a label
(``Instruction:``, ``Query:``, ``Passage:``, ``Answer:``) that :mod:`infembed.synth.filters` strips.

The poisoning prompts follow the paper's structure in our own words: find the passage's central points,
aim at content that contradicts or departs from them, stay on the same subject (other time, place, entity,
outcome, direction of cause, viewpoint or level of detail), and make the difference plain to a human.

Domains (paper B.2): ``web`` (MS MARCO-like, the default), ``code`` (problem -> solution; the programming
language stays the same in every instruction, so a model cannot tell positives from negatives by language
alone; instructions name the language and the technical approach) and ``math`` (problem -> worked solution;
instructions name the mathematical method).
"""

from __future__ import annotations

from collections.abc import Sequence

from infembed.data.errors import SettingsError
from infembed.synth.negation_prompts import TASKS as NEGATION_TASKS

DOMAINS = ("web", "code", "math")

TASK_HEADERS: dict[str, str] = {
    "instruction": "Task: write a retrieval instruction.",
    "poison_instruction": "Task: write a contrasting retrieval instruction.",
    "poison_query": "Task: write a contrasting search query.",
    "negative_passage": "Task: write a passage for a search request.",
    "judge": "Task: pick the most relevant passage.",
    # infembed synth benchmark (instruction benchmarks from a judged collection)
    "benchmark_og": "Task: write the original instruction of a benchmark query.",
    "benchmark_changed": "Task: narrow the instruction of a benchmark query.",
    "benchmark_exclusion": "Task: restate a narrowing as an exclusion.",
    "benchmark_judge": "Task: judge one document against an instruction.",
    # infembed synth run --style negation (the prompts: infembed.synth.negation_prompts)
    **NEGATION_TASKS,
}

Messages = list[dict[str, str]]


def task_of(messages: Sequence[dict[str, str]]) -> str | None:
    """The task of a prompt built here, from the first line of its system message."""
    for message in messages:
        if message.get("role") == "system":
            first = (message.get("content") or "").split("\n", 1)[0].strip()
            for task, header in TASK_HEADERS.items():
                if first == header:
                    return task
    return None


def _domain_note(domain: str, language: str | None, task: str) -> str:
    if domain == "code":
        lang = language or "the programming language of the solution"
        if task == "instruction":
            return (
                f"The passage is a solution written in {lang}. The instruction must name {lang} and the "
                "technical approach the solution takes (algorithm, data structure, library, complexity)."
            )
        if task in ("poison_instruction", "poison_query"):
            return (
                f"Keep {lang} as the programming language: do NOT switch language. Change the technical "
                "approach, constraint or goal instead."
            )
        if task == "negative_passage":
            return f"Write the passage as a solution in {lang}, in the same style as the reference solution."
    if domain == "math":
        if task == "instruction":
            return "The passage is a worked solution. The instruction must name the mathematical method or strategy it uses."
        if task in ("poison_instruction", "poison_query"):
            return "Change the mathematical method, the quantity asked for or the given conditions."
        if task == "negative_passage":
            return "Write the passage as a worked solution in the same style as the reference."
    return ""


def _system(task: str, body: str, domain: str, language: str | None) -> dict[str, str]:
    note = _domain_note(domain, language, task)
    text = TASK_HEADERS[task] + "\n" + body
    if note:
        text += "\n" + note
    return {"role": "system", "content": text}


def _check_domain(domain: str) -> None:
    if domain not in DOMAINS:
        raise SettingsError(f"unknown domain '{domain}'; choose one of {', '.join(DOMAINS)}")


def instruction_prompt(
    query: str, passage: str, domain: str = "web", language: str | None = None
) -> Messages:
    """Stage 1: a positive instruction I+ for (Q+, P+)."""
    _check_domain(domain)
    body = (
        "You help build training data for search engines that follow user instructions. A user typed a "
        "short query and also gave an instruction: one or two sentences saying what kind of answer they "
        "want (an aspect to focus on, a level of detail, a point of view, a kind of source, a format). "
        "Given the query and the passage that the user found relevant, write the instruction this user "
        "could have given so that this passage, and not other passages on the topic, is what they want.\n"
        "Rules: do not repeat the query; do not copy sentences from the passage; do not reveal the answer; "
        "write it as a request from the user; one line only."
    )
    user = (
        f"Query: {query}\n\nRelevant passage: {passage}\n\n"
        "Reply with one line in the form\nInstruction: <the instruction>"
    )
    return [_system("instruction", body, domain, language), {"role": "user", "content": user}]


_POISON_STEPS = (
    "How to do it:\n"
    "1. Find the passage's two or three central points (facts, claims, figures, aspects).\n"
    "2. Aim the new {thing} at information that contradicts these points or moves clearly away from them.\n"
    "3. Stay on the same subject and close in wording, but change what matters: the time, place, entity or "
    "outcome; the direction of a cause and effect; the viewpoint (advantages vs. drawbacks, for vs. "
    "against); or the level of detail.\n"
    "4. A person comparing the passage with an ideal answer to the new request should see at once that "
    "they differ in at least three concrete points.\n"
)


_POISON_TASK = {
    "instruction": "Write a NEW instruction that, paired with the SAME query, asks for clearly different passages: "
    "the given passage must no longer be a good answer.\n",
    "query": "Write a NEW search query that, paired with the SAME instruction, asks for clearly different passages: "
    "the given passage must no longer be a good answer. Make it look like a real search query: short, no full stop.\n",
}
_POISON_REPLY = {
    "instruction": "Reply with one line, concise but specific, in the form\nInstruction: <the new instruction>",
    "query": "Reply with one line in the form\nQuery: <the new query>",
}


def _poison_prompt(thing: str, query: str, instruction: str, passage: str, domain: str, language: str | None) -> Messages:
    _check_domain(domain)
    body = (
        "You create hard negative examples for training search engines that follow instructions. You see a "
        "query, the instruction the user gave with it, and the passage that satisfies both. "
        + _POISON_TASK[thing] + _POISON_STEPS.format(thing=thing)
    )
    user = f"Query: {query}\nInstruction: {instruction}\nPassage: {passage}\n\n" + _POISON_REPLY[thing]
    return [_system(f"poison_{thing}", body, domain, language), {"role": "user", "content": user}]


def poison_instruction_prompt(
    query: str, instruction: str, passage: str, domain: str = "web", language: str | None = None
) -> Messages:
    """Stage 2a: the poisoned instruction I-, read together with the ORIGINAL query Q+."""
    return _poison_prompt("instruction", query, instruction, passage, domain, language)


def poison_query_prompt(
    query: str, instruction: str, passage: str, domain: str = "web", language: str | None = None
) -> Messages:
    """Stage 2b: the poisoned query Q-, read together with the ORIGINAL instruction I+."""
    return _poison_prompt("query", query, instruction, passage, domain, language)


def negative_passage_prompt(
    query: str,
    instruction: str,
    reference_passage: str,
    domain: str = "web",
    language: str | None = None,
) -> Messages:
    """Stage 3: a passage that answers (instruction, query) well; used for P1- = f(I-, Q+) and
    P2- = f(I+, Q-). The original passage is shown as a model of length and style and as what NOT to say."""
    _check_domain(domain)
    body = (
        "You write passages for a search training set. Given a search query and the user's instruction, "
        "write one passage that a search engine should return for them: it answers the query and does "
        "exactly what the instruction asks. A reference passage on a related request is shown: match its "
        "length, register and style, stay on its subject, but do not answer what the reference answers "
        "where that differs from the request. Write plain text, as found on a web page; no title, no "
        "notes about the task."
    )
    user = (
        f"Query: {query}\nInstruction: {instruction}\n\nReference passage: {reference_passage}\n\n"
        "Reply in the form\nPassage: <the passage>"
    )
    return [_system("negative_passage", body, domain, language), {"role": "user", "content": user}]


def judge_prompt(query: str, instruction: str, passages: Sequence[str], domain: str = "web") -> Messages:
    """Stage 4: show the instruction, the query and numbered candidates; ask for the best one's number."""
    _check_domain(domain)
    body = (
        "You judge search results. A user gave a query and an instruction describing what they need. "
        "Several candidate passages follow. Pick the ONE passage that best satisfies the query AND follows "
        "the instruction; a passage that matches the topic but not the instruction is not the best. "
        "Reply with the passage's number only."
    )
    listing = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(passages, start=1))
    user = (
        f"Instruction: {instruction}\nQuery: {query}\n\nPassages:\n\n{listing}\n\n"
        f"Which passage (1-{len(passages)}) is the most relevant? Reply in the form\nAnswer: <number>"
    )
    return [
        {"role": "system", "content": TASK_HEADERS["judge"] + "\n" + body},
        {"role": "user", "content": user},
    ]


# ------------------------------------------------------------------------ instruction benchmarks (builder)
def _documents(documents: Sequence[str]) -> str:
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(documents, start=1))


def _benchmark(task: str, body: str, user: str) -> Messages:
    return [
        {"role": "system", "content": TASK_HEADERS[task] + "\n" + body},
        {"role": "user", "content": user},
    ]


def benchmark_og_prompt(query: str, documents: Sequence[str]) -> Messages:
    """Builder stage 1: the original instruction, consistent with every judged-relevant document."""
    body = (
        "You help build a benchmark for search engines that follow instructions, from a test collection "
        "whose assessors judged which documents are relevant to each query. Given a query and the documents "
        "judged relevant to it, write the instruction a user could have given with this query, in the style "
        "of a TREC narrative: two or three sentences (25 to 70 words) saying what a relevant document "
        "contains. It must be broad enough that EVERY document shown stays relevant under it: describe what "
        "they have in common and allow the kinds of material among them (background, methods, related "
        "cases).\nRules: do not repeat the query word for word; do not mention document numbers; one line "
        "only."
    )
    user = (
        f"Query: {query}\n\nRelevant documents:\n\n{_documents(documents)}\n\n"
        "Reply with one line in the form\nInstruction: <the instruction>"
    )
    return _benchmark("benchmark_og", body, user)


def benchmark_changed_prompt(query: str, instruction: str, documents: Sequence[str]) -> Messages:
    """Builder stage 2: one added sentence that narrows the instruction (FollowIR's changed instruction is
    the original followed by it), so that some of the relevant documents stop being relevant."""
    body = (
        "You help build a benchmark for search engines that follow instructions. A query comes with its "
        "instruction and the documents relevant under it. Write ONE sentence that adds a restriction to the "
        "instruction: read after the instruction, it must make some of the documents shown no longer "
        "relevant (about a third to two thirds of them) while the others stay relevant. Base it on a real "
        "difference in content between the documents (a method, a condition or regime, a material, a kind "
        "of result, an application), and say both what a relevant document must now be about and what no "
        "longer counts, e.g. 'Only documents that ... are relevant; documents that ... are not relevant.'\n"
        "Rules: do not mention document numbers; one line only."
    )
    user = (
        f"Query: {query}\nInstruction: {instruction}\n\nRelevant documents:\n\n{_documents(documents)}\n\n"
        "Reply with one line in the form\nRestriction: <the added sentence>"
    )
    return _benchmark("benchmark_changed", body, user)


def benchmark_exclusion_prompt(query: str, instruction: str, restriction: str) -> Messages:
    """Builder, ``--exclusions``: the same narrowing stated only as an exclusion of what lost relevance."""
    body = (
        "You help build a benchmark for search engines that follow instructions. A restriction was added to "
        "a query's instruction. Restate it as ONE sentence that names only what is no longer relevant, as an "
        "exclusion ('Documents that ... are not relevant.'), without saying what remains relevant. It must "
        "exclude exactly the documents the restriction excludes.\nRules: one line only."
    )
    user = (
        f"Query: {query}\nInstruction: {instruction}\nRestriction: {restriction}\n\n"
        "Reply with one line in the form\nExclusion: <the sentence>"
    )
    return _benchmark("benchmark_exclusion", body, user)


def benchmark_judge_prompt(query: str, instruction: str, document: str) -> Messages:
    """Builder stage 3: is this (originally relevant) document relevant under the changed instruction?"""
    body = (
        "You are a relevance assessor. A user gave a query and an instruction saying what they need. Decide "
        "whether the document is relevant: it must be about the query AND meet every condition of the "
        "instruction, including any restriction on what no longer counts."
    )
    user = (
        f"Instruction: {instruction}\nQuery: {query}\n\nDocument: {document}\n\n"
        "Is the document relevant? Reply in the form\nAnswer: <yes or no>"
    )
    return _benchmark("benchmark_judge", body, user)
