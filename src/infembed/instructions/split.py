"""Decompose instructions with a named splitter (``"rules"``, ``"off"``) or a callable such as an LLM
splitter; rule results are cached per text."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from infembed.data.errors import SettingsError
from infembed.instructions.instruction import Instruction
from infembed.instructions.rules import rules_split

SPLITTERS = ("off", "rules", "llm")


_RULES_CACHE: dict[str, Instruction] = {}


def split_instruction(
    text: str | None, splitter: str | Callable[[str], Instruction] = "rules"
) -> Instruction:
    """Decompose one instruction. ``splitter`` is ``"rules"``, ``"off"`` (no split) or a callable such as
    :func:`llm_splitter`'s result. ``None``/empty gives ``Instruction("")``; an instruction with no exclusion gives
    ``keep`` equal to the (stripped) input and no exclusions, so plain scoring is unchanged."""
    if text is None:
        return Instruction("")
    if not isinstance(text, str):
        raise TypeError(f"an instruction must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped or splitter == "off":
        return Instruction(stripped)
    if callable(splitter):
        return splitter(stripped)
    if splitter == "llm":
        raise SettingsError("the llm splitter needs an endpoint: use llm_splitter(...) and pass the callable")
    if splitter != "rules":
        raise SettingsError(f"unknown splitter {splitter!r}; choose one of {SPLITTERS}")
    cached = _RULES_CACHE.get(stripped)
    if cached is None:
        cached = rules_split(stripped)
        if not cached.exclude:
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
        return batch(texts)
    return [split_instruction(t, splitter) for t in texts]
