"""Text helpers of the rules splitter (:mod:`infembed.instructions.rules`): sentences, quoted spans, aspects
cleaned to short standalone texts, lists of aspects, and the ``keep <cue> aspect`` match at a tail cue."""

from __future__ import annotations

import re

from infembed.instructions.phrasing import (
    ABBREVIATIONS,
    ASIDE_TAIL,
    ASPECT_HEAD,
    CONDITION_CONTENT,
    DETERMINER,
    FILLER_HEAD,
    GERUND_HEAD,
    SUBJECT_HEAD,
    TAIL_CUE,
    TRAILING,
)


# ----------------------------------------------------------------------------------------- sentences
def _sentences(text: str) -> list[str]:
    """Split into sentences on . ! ? and line breaks, sparing abbreviations and decimals."""
    masked = text
    for i, abbr in enumerate(ABBREVIATIONS):
        masked = re.sub(
            r"(?<![\w.])" + re.escape(abbr),
            lambda m, i=i: f"\x00{i}\x00" + "_" * (len(m.group(0)) - len(str(i)) - 2),
            masked,
            flags=re.IGNORECASE,
        )
    masked = re.sub(r"(?<=\d)\.(?=\d)", "\x01", masked)
    out, start = [], 0
    for match in re.finditer(r"[.!?]+(?=\s|$)|\n+", masked):
        end = match.end()
        piece = text[start:end].strip()
        if piece:
            out.append(piece)
        start = end
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def strip_end(text: str) -> str:
    return text.strip().rstrip(".!?;:,").strip()


def _clean_aspect(text: str) -> str:
    """The excluded aspect as a short standalone text: no item nouns, determiners, fillers or end punctuation."""
    aspect = strip_end(text)
    aspect = ASIDE_TAIL.sub("", aspect)
    aspect = TRAILING.sub("", aspect)
    aspect = FILLER_HEAD.sub("", aspect)
    for _ in range(3):
        before = aspect
        head = SUBJECT_HEAD.match(aspect)
        if head and head.end() < len(aspect):
            aspect = aspect[head.end() :].strip(" ,:")
        aspect = ASPECT_HEAD.sub("", aspect).strip(" ,:")
        aspect = DETERMINER.sub("", aspect).strip(" ,:")
        if aspect == before:
            break
    aspect = re.sub(r"^(?:with|on|about|of|in|for|to)\s+", "", aspect, flags=re.IGNORECASE)
    aspect = GERUND_HEAD.sub("", aspect)
    aspect = re.sub(r"\s*[,(]\s*(?:or|and)?\s*$", "", aspect)
    return strip_end(TRAILING.sub("", aspect))


def _is_aspect(text: str) -> bool:
    words = re.findall(r"[^\W_]+", text)
    return bool(words) and not (
        len(words) == 1
        and words[0].lower() in {"it", "this", "that", "them", "these", "those", "one", "ones"}
    )


class _TailMatch:
    def __init__(self, keep: str, cue: str, aspect: str):
        self._groups = {"keep": keep, "cue": cue, "aspect": aspect}

    def group(self, name: str) -> str:
        return self._groups[name]


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    """Where quoted text lies ("...", “...”, '...' between word boundaries): a title or slogan quoted in an
    instruction ("'no taxation without representation'") is not the user's own exclusion."""
    spans = [m.span() for m in re.finditer(r'"[^"]*"|“[^”]*”|‘[^’]*’', text)]
    spans += [m.span() for m in re.finditer(r"(?<![\w])'[^']+'(?![\w])", text)]
    return spans


def _condition_aspect(condition: str) -> str:
    """The content of a condition: "a patent is mainly about X" / "the page talks about X" -> X."""
    m = CONDITION_CONTENT.match(condition.strip())
    return m.group("aspect") if m else condition


def _tail_match(body: str) -> _TailMatch | None:
    """``keep <cue> aspect`` at the first cue that follows a word and is followed by a parenthesis-free aspect
    (a trailing ")" allowed), outside quotes."""
    quoted = _quoted_spans(body)
    for m in TAIL_CUE.finditer(body):
        if any(lo <= m.start() < hi for lo, hi in quoted):
            continue
        keep, aspect = body[: m.start()], body[m.end() :]
        if aspect.endswith(")"):
            aspect = aspect[:-1]
        if not re.search(r"\w", keep) or not aspect.strip() or "(" in aspect or ")" in aspect:
            continue
        return _TailMatch(keep, m.group("cue"), aspect)
    return None


def _split_list(aspect: str) -> list[str]:
    """One aspect per top-level list item ("X; Y", "X, or only Y", "X, nor Y"); "X or Y" stays one aspect."""
    parts = re.split(
        r"\s*;\s*|,\s*(?:or|and|nor)\s+(?=(?:only|those|ones|any|anything|documents?|passages?|articles?|papers?|"
        r"about|on|with|that|which)\b)|,?\s+(?:or|and|nor)\s+(?:only|those|ones|anything|documents?|passages?|"
        r"articles?|papers?)\s+(?:that|which|about|on|with|dealing)\b(?:\s+(?:only\s+)?(?:with|on|about))?|,\s*nor\s+",
        aspect,
        flags=re.IGNORECASE,
    )
    cleaned = [_clean_aspect(p) for p in parts]
    return [p for p in cleaned if _is_aspect(p)]
