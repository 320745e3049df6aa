"""Sentences, clauses and the exception or reason clauses of an instruction, as the decode reads them (torch-free):
where a sentence ends (:func:`sentence_spans`), spans found by bisection (:class:`Spans`) and which aspects lie in
a clause that excepts them from an exclusion (:class:`Exceptions`)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

SENTENCE_END = re.compile(r"[.!?;]+(?=\s|$)|\n+")


#: A guard is the positive requirement of the aspect's whole sentence, across a semicolon ("Only documents on X are
#: relevant; documents on Y are not relevant": the guard of Y is the first clause), as the rules read it.
GUARD_END = re.compile(r"[.!?]+(?=\s|$)|\n+")


#: The number or letter of an enumerated item, "1." or "a." after the start, a space, a colon or a bracket
#: ("Exclusion criteria: 1. A. 2. B.", "Exclusion: A. X. B. Y."): its full stop ends no sentence where the text
#: numbers its items 1, 2, ... or a, b, ... in order (:func:`_item_numbers`).
_ITEM_NUMBER = re.compile(r"(?<![^\s:(\[])(\d{1,2}|[A-Za-z])\.(?=\s)")


def _item_numbers(text: str) -> set[int]:
    """Where the full stops of an enumerated list's item numbers are: a run of at least two items 1, 2, ... (or a,
    b, ... or A, B, ...) in the order they are written; a lone "2." ("season 2.") or "A." ("vitamin A.") ends its
    sentence as before."""
    stops: set[int] = set()
    run: list[int] = []
    kind = ""
    for m in _ITEM_NUMBER.finditer(text):
        mark = m.group(1)
        mark_kind = "1" if mark.isdigit() else "a" if mark.islower() else "A"
        number = int(mark) if mark.isdigit() else ord(mark.lower()) - ord("a") + 1
        if run and mark_kind == kind and number == len(run) + 1:
            run.append(m.end(1))
            continue
        if len(run) >= 2:
            stops.update(run)
        run, kind = ([m.end(1)], mark_kind) if number == 1 else ([], "")
    if len(run) >= 2:
        stops.update(run)
    return stops


def sentence_spans(text: str, ends: re.Pattern[str] = SENTENCE_END) -> list[tuple[int, int]]:
    spans, start = [], 0
    numbers = _item_numbers(text) if "1." in text or "a." in text or "A." in text else set()
    for match in ends.finditer(text):
        if match.start() in numbers and match.end() - match.start() == 1:
            continue
        spans.append((start, match.end()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


#: Words that open a clause stating an exception to an exclusion, a reason for it, or a turn back to what is wanted
#: ("X is off-topic *unless they also report Y*", "skip Z *because it crashes*", "skip X *and stick to Y*", "cut
#: X *in favour of Y*", "drop X, *except those on Y*", "no X *apart from Y*"): what follows them is not what is
#: excluded. Only after an excluded aspect of the same clause (:class:`Exceptions`): "every film except Z" excludes Z.
EXCEPTION = re.compile(
    r"\b(?:unless|even (?:if|though|where|when)|provided(?: that)?|providing|as long as|so long as|because|since|"
    r"although|though|given that|except(?:ing)?|apart from|aside from|other than|save for|with the exception of|"
    r"in favou?r of|stick(?:ing)? (?:to|with)|"
    r"(?<!not )(?<!n't )(?:focus(?:ing)?|concentrat(?:e|ing)) (?:instead )?on|what (?:I|we) (?:need|want) is)\b",
    re.IGNORECASE,
)
#: Where a clause of its own is joined on after an exception or reason ("..., and please no flip phones").
_NEXT_CLAUSE = re.compile(
    r"[,\u2014\u2013]\s*(?:and|but|or|plus|also|oh and)\b|\s[\u2014\u2013-]\s", re.IGNORECASE
)


class Spans:
    """Spans of a text in order, none overlapping, found by bisection (the decode stays linear in a long text)."""

    def __init__(self, spans: Sequence[tuple[int, int]]):
        self.spans, self.starts = list(spans), [a for a, _ in spans]

    def index(self, pos: int) -> int:  # of the span that holds pos; -1: none
        k = bisect.bisect_right(self.starts, pos) - 1
        return k if k >= 0 and pos < self.spans[k][1] else -1

    def at(self, pos: int) -> tuple[int, int] | None:
        return self.spans[self.index(pos)] if self.index(pos) >= 0 else None


#: A clause joined on with a conjunction (not a bare dash: "skip X \u2014 except Y" is one clause).
_JOINED = re.compile(r"[,;\u2014\u2013]\s*(?:and|but|or|plus|also)\b", re.IGNORECASE)


class Exceptions:
    """The exception and reason clauses of a text (:data:`EXCEPTION`), found once, and :meth:`covers`: whether an
    aspect lies in one that follows an excluded aspect of its own clause. "Muon spin studies are off-topic unless
    they also report neutron data" excludes muon spin studies, not neutron data. The model tags such a clause as
    part of the exclusion (cue), so it is told by its place: "Because I'm vegan, skip meat" keeps meat, and "every
    film except Z" excludes Z. A clause runs to the end of its sentence or to where a new one is joined on ("no X
    because Y, and no Z" excludes Z), and an exclusion in an earlier joined clause is not the one excepted ("skip X,
    and trials testing nothing except Y" excludes Y). Each aspect looks back only within its own clause, so a long
    text stays fast."""

    def __init__(self, text: str, sentences: Spans, excluded: Sequence[tuple[int, int]]):
        self.text, self.sentences, self.excluded = text, sentences, Spans(excluded)
        self.matches = list(EXCEPTION.finditer(text))
        self.ends = [m.end() for m in self.matches]
        self.clauses = Spans([m.span() for m in _NEXT_CLAUSE.finditer(text)])
        self.joined = Spans([m.span() for m in _JOINED.finditer(text)])

    @staticmethod
    def _after(spans: Spans, pos: int) -> tuple[int, int] | None:  # the first span starting at pos or later
        k = bisect.bisect_left(spans.starts, pos)
        return spans.spans[k] if k < len(spans.spans) else None

    def covers(self, start: int) -> bool:
        a, b = self.sentences.at(start) or (0, len(self.text))
        k = bisect.bisect_right(self.ends, start) - 1  # the last exception word before the aspect, then back
        while k >= 0 and self.matches[k].start() >= a:
            match, k = self.matches[k], k - 1
            clause = self._after(self.clauses, match.end())
            if clause is not None and clause[1] <= b and clause[0] <= start:
                return False  # a new clause began before the aspect (and after every earlier exception word)
            # the last excluded aspect before it
            j = bisect.bisect_right(self.excluded.starts, match.start()) - 1
            if j < 0 or self.excluded.spans[j][0] < a:
                return False
            end = self.excluded.spans[j][1]
            joined = self._after(self.joined, end)
            if end <= match.start() and (joined is None or joined[1] > match.start()):
                return True
        return False
