"""Decompose instructions with a named splitter (``"rules"``, ``"off"``) or a callable such as an LLM
splitter; rule results are cached per text."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from infembed.data.errors import SettingsError
from infembed.instructions.instruction import Instruction
from infembed.instructions.rules import rules_split

SPLITTERS = ("off", "rules", "llm")


_RULES_CACHE: dict[str, Instruction] = {}


def drop_unsearchable(split: Instruction, text: str) -> Instruction:
    """``split`` without the excluded aspects that hold no searchable word (only stop words, as BM25 tokenises
    them: "the", "not not not"), listed in ``dropped``; such an aspect matches nothing lexically and only noise
    densely. An instruction left with nothing to exclude is kept whole, as one that excludes nothing."""
    if not split.exclude:
        return split
    from infembed.search.bm25 import terms

    kept = [j for j, aspect in enumerate(split.exclude) if terms(aspect)]
    if len(kept) == len(split.exclude):
        return split
    dropped = [aspect for j, aspect in enumerate(split.exclude) if j not in kept]
    if not kept:
        return Instruction(text, dropped=dropped)
    guards = [split.guard_of(j) for j in kept] if split.guards else []
    return Instruction(split.keep, [split.exclude[j] for j in kept], guards, dropped=dropped)


def split_instruction(
    text: str | None, splitter: str | Callable[[str], Instruction] = "rules"
) -> Instruction:
    """Decompose one instruction. ``splitter`` is ``"rules"``, ``"off"`` (no split) or a callable such as
    :func:`llm_splitter`'s result. ``None``/empty gives ``Instruction("")``; an instruction with no exclusion gives
    ``keep`` equal to the (stripped) input and no exclusions, so plain scoring is unchanged. An excluded aspect
    with no searchable word is dropped (:func:`drop_unsearchable`)."""
    if text is None:
        return Instruction("")
    if not isinstance(text, str):
        raise TypeError(f"an instruction must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped or splitter == "off":
        return Instruction(stripped)
    if callable(splitter):
        return drop_unsearchable(splitter(stripped), stripped)
    if splitter == "llm":
        raise SettingsError("the llm splitter needs an endpoint: use llm_splitter(...) and pass the callable")
    if splitter != "rules":
        raise SettingsError(f"unknown splitter {splitter!r}; choose one of {SPLITTERS}")
    cached = _RULES_CACHE.get(stripped)
    if cached is None:
        cached = drop_unsearchable(rules_split(stripped), stripped)
        if not cached.exclude and not cached.dropped:
            cached = Instruction(stripped)
        if len(_RULES_CACHE) > 100_000:
            _RULES_CACHE.clear()
        _RULES_CACHE[stripped] = cached
    return cached


def split_instructions(
    texts: Sequence[str | None], splitter: str | Callable[[str], Instruction] = "rules"
) -> list[Instruction]:
    """:func:`split_instruction` over a list; an LLM splitter with a ``batch`` method answers them concurrently."""
    batch = getattr(splitter, "batch", None)
    if batch is not None:
        return [drop_unsearchable(split, (text or "").strip()) for split, text in zip(batch(texts), texts)]
    return [split_instruction(t, splitter) for t in texts]
