"""Prompts of the negation style of ``infembed synth run --style negation`` (:mod:`infembed.synth.negation`).

A negation row's two instructions share ONE general statement G and differ only in an exclusion sentence:
I+ = G + E+, where E+ excludes the salient aspect of the negative passage P1- (named in P1-'s own words), and
I- = G + E-, where E- excludes that of the positive passage P+. The prompts here write G, the exclusions,
P1- and the judge's check that G alone admits both passages; Q-, P2- and the judge's choice among passages
use the InF-IR prompts of :mod:`infembed.synth.prompts`.

Every prompt is a system message (its first line names the task, see :data:`TASKS`; our test server and
:func:`infembed.synth.prompts.task_of` read it) and a user message made from a template; the reply is asked
for on one labelled line, as in the other prompts. docs/synthesis.md shows them verbatim
(:func:`documented`).
"""

from __future__ import annotations

Messages = list[dict[str, str]]

TASKS: dict[str, str] = {
    "negation_general": "Task: write the general statement of an instruction.",
    "negation_exclusion": "Task: write an exclusion sentence for a passage.",
    "negation_passage": "Task: write a passage on another aspect of a query.",
    "negation_check": "Task: judge whether a passage fits a general request.",
}

GENERAL_SYSTEM = (
    TASKS["negation_general"]
    + "\n"
    + (
        "You help build training data for search engines that must follow instructions with exclusions. A user "
        "typed a short query; their instruction will be a general statement of what they want, followed by a "
        "sentence that excludes something. Write only the general statement: ONE sentence from the user saying "
        "what kind of information they want for this query (the kind of answer, the level of detail, the kind of "
        "source). The passage shown must satisfy it, and so must good passages on the same query that cover "
        "other aspects: keep it general, without the passage's specific facts, figures, names or sub-topics.\n"
        "Rules: refer to the query's subject with a general phrase ('this drug', 'the state') instead of repeating "
        "the query; do not copy phrases from the passage; no negation, nothing about what is not wanted; one line "
        "only."
    )
)
GENERAL_USER = (
    "Query: {query}\n\nPassage: {passage}\n\n"
    "Reply with one line in the form\nStatement: <the general statement>"
)

EXCLUSION_SYSTEM = (
    TASKS["negation_exclusion"]
    + "\n"
    + (
        "You help build training data for search engines that must follow instructions with exclusions. A user "
        "gave a query and a general statement of what they want. Find the passage's most salient aspect: the "
        "specific sub-topic, case, figure or angle that sets it apart from other passages answering the same "
        "query. Write ONE sentence that the user could add after the general statement to exclude passages about "
        "that aspect, naming it in the passage's own words (its key terms, names and figures). When a passage to "
        "keep is also shown, choose an aspect that the passage to keep does not have, so that the sentence "
        "excludes the passage and not the passage to keep.\n"
        "Rules: exclude only that aspect, not the query's subject as a whole; do not repeat the general "
        "statement; say nothing about what is wanted; one line only."
    )
)
EXCLUSION_USER = (
    "Query: {query}\nGeneral statement: {general}\n\nPassage: {passage}\n\n"
    "Phrase the sentence like: {cue}\n"
    "Reply with one line in the form\nExclusion: <the sentence>"
)
#: shown in the user message of E+ (the exclusion of P1-'s aspect), after the passage
KEEP_USER = "Passage to keep: {keep}\n\n"

PASSAGE_SYSTEM = (
    TASKS["negation_passage"]
    + "\n"
    + (
        "You write passages for a search training set. A user gave a query and an instruction: a general "
        "statement of what they want, then a sentence that excludes one aspect. The reference passage answers the "
        "query but is about the excluded aspect. Write ONE passage that answers the query and fits the general "
        "statement but is about ANOTHER specific aspect of the query's subject (another sub-topic, case, figure "
        "or angle), covered in concrete terms with its own key words, so that the instruction wants it and not "
        "the reference. Do not mention the excluded aspect. Match the reference's length, register and style. "
        "Write plain text, as found on a web page; no title, no notes about the task."
    )
)
PASSAGE_USER = (
    "Query: {query}\nInstruction: {instruction}\n\nReference passage: {passage}\n\n"
    "Reply in the form\nPassage: <the passage>"
)

CHECK_SYSTEM = (
    TASKS["negation_check"]
    + "\n"
    + (
        "You are a relevance assessor. A user gave a query and a general statement of what they want. Decide "
        "whether the passage is relevant: it answers the query and fits the statement. A passage that covers one "
        "specific aspect of the subject is relevant when the statement allows that aspect."
    )
)
CHECK_USER = (
    "Instruction: {general}\nQuery: {query}\n\nPassage: {passage}\n\n"
    "Is the passage relevant? Reply in the form\nAnswer: <yes or no>"
)

#: how an exclusion may be phrased; each row's E+ and E- are asked for in one of these (drawn from the seed)
EXCLUSION_CUES = (
    "Passages about ... are not relevant.",
    "Leave out any passage about ...",
    "Do not return passages that ...",
    "I am not interested in ...",
    "Exclude passages on ...",
    "Ignore anything about ...",
    "Skip passages that ...",
    "Anything on ... does not count.",
)


def _messages(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def general_prompt(query: str, passage: str) -> Messages:
    """G: the general statement, satisfied by P+ and by passages on other aspects of the query."""
    return _messages(GENERAL_SYSTEM, GENERAL_USER.format(query=query, passage=passage))


def exclusion_prompt(query: str, general: str, passage: str, cue: str, keep: str | None = None) -> Messages:
    """An exclusion of ``passage``'s salient aspect in its own words: E- (of P+) without ``keep``; E+ (of P1-)
    with ``keep`` = P+, whose aspects it must not exclude."""
    user = EXCLUSION_USER.format(query=query, general=general, passage=passage, cue=cue)
    if keep is not None:
        head, tail = user.split("Phrase the sentence", 1)
        user = head + KEEP_USER.format(keep=keep) + "Phrase the sentence" + tail
    return _messages(EXCLUSION_SYSTEM, user)


def passage_prompt(query: str, instruction: str, passage: str) -> Messages:
    """P1-: a passage that answers ``query`` under I- = G + E- (``instruction``), on another aspect than P+."""
    return _messages(
        PASSAGE_SYSTEM, PASSAGE_USER.format(query=query, instruction=instruction, passage=passage)
    )


def check_prompt(query: str, general: str, passage: str) -> Messages:
    """Does ``passage`` fit the general statement alone? (yes for both P+ and P1-, else G decides, not E±)"""
    return _messages(CHECK_SYSTEM, CHECK_USER.format(general=general, query=query, passage=passage))


def documented() -> list[str]:
    """The texts docs/synthesis.md shows verbatim (its test checks each is there)."""
    return [
        GENERAL_SYSTEM, GENERAL_USER, EXCLUSION_SYSTEM, EXCLUSION_USER, KEEP_USER.rstrip("\n"), PASSAGE_SYSTEM,
        PASSAGE_USER, CHECK_SYSTEM, CHECK_USER,
    ]  # fmt: skip
