"""Search syntax that excludes whatever the words around it say (torch-free): a search box's minus
("vite ssr -webpack", ``-"gore tex"``, "-site:medium.com") and a filter line's negated field ("population !=
paediatric", "vendor <> Cisco", "vendor not in (Microsoft, Cisco)"). The learned decomposer
seldom reads these symbols as cues, and they are syntax, not phrasing: :func:`tag_operators` tags them in the
decoded words whatever the model tagged (:func:`infembed.instructions.tagging.decode`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

#: A search box's minus: ``-term``, ``-"a phrase"`` or ``-site:term`` after a space (or first) excludes the term, as
#: web search engines read it; a hyphen inside a word, a dash between spaces, a minus before a number or a
#: command-line flag ("-la", "-std=c++20", "java -jar app.jar") is none. Not the minus sign U+2212: in the
#: tables it was arithmetic ("+income \u2212expenses") as often as search syntax.
OPERATOR = re.compile(
    r'(?:^|(?<=\s))-(?:[a-z]+:)?(?:"([^"\n]+)"|([^\W\d_][^\s,;!?()\[\]{}"=/\\]{2,})(?![=/\\\w])'
    r"(?!\s+[\"'*./~]|\s+\S*[./]\w))"
)
#: A negated field of a filter line, ``key != value`` (or ``<>``; the value quoted or up to the next separator).
#: It must be a whole field: a separator (; | , &) before or after it, so that a question about the operator ("why
#: is a != b true") is none. Not the sign "≠", which is prose as often ("tours ≠ wanted": tours are not wanted).
NOT_EQUAL = re.compile(
    r"(?:^|(?<=[;|,&\n]))[ \t]*[A-Za-z_][\w.]*[ \t]*(?:!=|<>)[ \t]*"
    r"(?:\"([^\"\n]+)\"|'([^'\n]+)'|([^\s;|,&()\"'<>=!][^;|,&()\n\"<>=!]{0,60}?))[ \t]*(?=[;|,&\n]|$)"
)
#: ``key not in (a, b)``: each listed value is excluded.
NOT_IN = re.compile(r"\b[A-Za-z_][\w.]*[ \t]+(?:not[ \t]+in|NOT[ \t]+IN)[ \t]*\(([^()\n]{1,300})\)")
_ITEM = re.compile(r"[^,|]+")
_PIECE = re.compile(r"\S+")


def operators(text: str) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``(start, end, aspects)`` of each operator in ``text`` (in order, none overlapping): the span of the whole
    construct and the character spans of the terms it excludes."""
    found: list[tuple[int, int, list[tuple[int, int]]]] = []
    for match in OPERATOR.finditer(text):
        found.append((match.start(), match.end(), [match.span(1) if match.group(1) is not None else match.span(2)]))
    for match in NOT_EQUAL.finditer(text):
        start, end = match.span()
        if (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end] == "\n"):
            continue  # a field alone on its line: not a filter line
        group = next(g for g in (1, 2, 3) if match.group(g) is not None)
        found.append((start + len(match.group(0)) - len(match.group(0).lstrip()), end, [match.span(group)]))
    for match in NOT_IN.finditer(text):
        offset = match.start(1)
        items = []
        for item in _ITEM.finditer(match.group(1)):
            value = item.group(0).strip().strip("\"'").strip()
            if value:
                first = offset + item.start() + item.group(0).index(value)
                items.append((first, first + len(value)))
        if items:
            found.append((match.start(), match.end(), items))
    found.sort()
    kept: list[tuple[int, int, list[tuple[int, int]]]] = []
    for item in found:  # the first of overlapping constructs wins
        if not kept or item[0] >= kept[-1][1]:
            kept.append(item)
    return kept


def tag_operators(
    text: str, words: Sequence[tuple[int, int, int, float]], cue: int, begin: int, inside: int
) -> tuple[list[tuple[int, int, int, float]], list[int]]:
    """``words`` (``(start, end, tag, score)`` in text order) with each operator's words replaced: its excluded
    terms tagged as aspects (``begin``, then ``inside``; score 1) and the rest of it as ``cue``, word by word of the
    text itself, so a token that straddles the symbol ("−mouse", "a≠b" read as one) is cut there; and the
    operators' start offsets."""
    found = operators(text)
    if not found:
        return list(words), []

    def pieces(a: int, b: int, tags: Sequence[int] | int) -> list[tuple[int, int, int, float]]:
        spans = [(a + m.start(), a + m.end()) for m in _PIECE.finditer(text[a:b])]
        return [(s, e, tags if isinstance(tags, int) else tags[min(k, 1)], 1.0) for k, (s, e) in enumerate(spans)]

    out, k = [], 0  # the words outside every operator (both in text order: one sweep)
    for word in words:
        while k < len(found) and found[k][1] <= word[0]:
            k += 1
        if k == len(found) or not (found[k][0] < word[1] and word[0] < found[k][1]):
            out.append(word)
    for start, end, aspects in found:
        cursor = start
        for a, b in aspects:
            out += pieces(cursor, a, cue) + pieces(a, b, (begin, inside))
            cursor = b
        out += pieces(cursor, end, cue)
    return sorted(out), [start for start, _, _ in found]
