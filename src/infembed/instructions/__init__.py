"""Instruction decomposition: what to find (``keep``) and what to leave out (``exclude``).

Retrievers treat an instruction as more words to match, so "documents on supersonic flow are not relevant" pulls
exactly the supersonic documents *up*. :func:`split_instruction` separates the exclusion clauses from the rest,
so that exclusion-aware scoring (:mod:`infembed.exclusions`) can search with ``keep`` and penalise documents
that match an excluded aspect::

    >>> split_instruction("Find reviews of hybrid cars. Anything about electric cars is not relevant.")
    Instruction(keep='Find reviews of hybrid cars.', exclude=['electric cars'])

Two splitters give the same :class:`Instruction`:

* ``rules`` (default): English clause patterns, no model, microseconds per instruction. It recognises predicate
  exclusions ("X are not relevant / irrelevant / off-topic / out of scope / should be excluded"), imperative ones
  ("ignore / skip / leave out / avoid / exclude / rule out / filter out / disregard X", "do not return X"), first
  person ones ("I am not interested in X", "I don't want X"), short forms ("no X", "nothing on X", "not X",
  "but not X", "excluding X", "except X", "other than X"), a list continued in the next sentence ("Also X.",
  "Nor X."), and it leaves alone negations that do not exclude ("need not", "not only ... but", "does not
  matter", "not necessarily", "whether or not"). Positive constraints ("only X are relevant") stay in ``keep``.
* ``llm``: any OpenAI-compatible endpoint through the synthesis client (cache, retries), asked for the same JSON
  (:func:`llm_splitter`).
"""

from infembed.instructions.instruction import Instruction
from infembed.instructions.llm import LLM_SCHEMA, LLM_SYSTEM_PROMPT, llm_splitter, parse_llm_answer
from infembed.instructions.split import DEFAULT_SPLITTER, SPLITTERS, split_instruction, split_instructions

__all__ = [
    "Instruction",
    "split_instruction",
    "split_instructions",
    "SPLITTERS",
    "DEFAULT_SPLITTER",
    "llm_splitter",
    "LLM_SYSTEM_PROMPT",
    "LLM_SCHEMA",
    "parse_llm_answer",
]
