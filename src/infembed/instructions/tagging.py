"""Labelled instructions and the token tags the learned decomposer predicts (torch-free).

A labelled instruction (one JSON object per line, ``data/decomposer/*.jsonl``) is::

    {"text": "Find hybrid cars, not electric cars.", "aspects": ["electric cars"], "clauses": [", not electric cars"]}

``aspects`` are the excluded aspects and ``clauses`` the parts of the text that carry the exclusions (removed from
what is searched), each an exact substring of ``text``; every aspect lies inside a clause; a plain instruction
has neither. Each token gets one of four tags: :data:`KEEP` (searched), :data:`CUE` (part of an exclusion
clause, not an aspect: "are not relevant", "skip", "rather than"), :data:`BEGIN` / :data:`INSIDE` (the first and
further tokens of an excluded aspect, so "A, B and C" are three aspects). :func:`decode` turns predicted tags
back into an :class:`~infembed.instructions.Instruction`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.instructions.clauses import GUARD_END, Exceptions, Spans, sentence_spans
from infembed.instructions.instruction import Instruction
from infembed.instructions.syntax import tag_operators

TAGS = ("keep", "cue", "aspect-begin", "aspect-inside")
KEEP, CUE, BEGIN, INSIDE = range(4)
IGNORE = -100  # special tokens: no loss


@dataclass(frozen=True)
class LabelledInstruction:
    """One instruction with its excluded aspects and exclusion clauses as character spans of ``text``."""

    text: str
    aspects: tuple[tuple[int, int], ...] = ()
    clauses: tuple[tuple[int, int], ...] = ()
    source: str = field(default="", compare=False)

    @property
    def aspect_texts(self) -> list[str]:
        return [self.text[s:e] for s, e in self.aspects]

    def char_tags(self) -> list[int]:
        """One tag per character: KEEP, CUE, or BEGIN at an aspect's first character and INSIDE after it."""
        tags = [KEEP] * len(self.text)
        for start, end in self.clauses:
            tags[start:end] = [CUE] * (end - start)
        for start, end in self.aspects:
            tags[start:end] = [BEGIN] + [INSIDE] * (end - start - 1)
        return tags

    def joined(self, other: LabelledInstruction, sep: str = " ") -> LabelledInstruction:
        """This instruction followed by ``other`` (spans shifted): multi-sentence instructions for training."""
        shift = len(self.text) + len(sep)
        moved = lambda spans: tuple((s + shift, e + shift) for s, e in spans)  # noqa: E731
        return LabelledInstruction(
            self.text + sep + other.text,
            self.aspects + moved(other.aspects),
            self.clauses + moved(other.clauses),
            self.source,
        )


def _find(
    text: str, part: str, inside: Sequence[tuple[int, int]] | None, taken: set[int]
) -> tuple[int, int] | None:
    """The first occurrence of ``part`` in ``text`` (inside one of the spans ``inside`` if given) not yet taken."""
    start = text.find(part)
    while start >= 0:
        end = start + len(part)
        if start not in taken and (inside is None or any(s <= start and end <= e for s, e in inside)):
            return start, end
        start = text.find(part, start + 1)
    return None


def labelled_from_json(
    obj: object, path: str | Path | None = None, line: int | None = None
) -> LabelledInstruction:
    """One row of a labelled-instructions file; a bad row is a DataError naming file, line and field."""
    if not isinstance(obj, dict):
        raise DataError("expected a JSON object", path, line)
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise DataError("must be a non-empty string", path, line, "text")
    lists = {}
    for key in ("aspects", "clauses"):
        value = obj.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise DataError("must be a list of non-empty strings", path, line, key)
        lists[key] = value
    if bool(lists["aspects"]) != bool(lists["clauses"]):
        raise DataError(
            "aspects and clauses are both empty (a plain instruction) or both given", path, line, "clauses"
        )
    clauses: list[tuple[int, int]] = []
    for part in lists["clauses"]:
        span = _find(text, part, None, {s for s, _ in clauses})
        if span is None:
            raise DataError(f"{part!r} is not a substring of the text", path, line, "clauses")
        clauses.append(span)
    aspects: list[tuple[int, int]] = []
    for part in lists["aspects"]:
        span = _find(text, part, clauses, {s for s, _ in aspects})
        if span is None:
            raise DataError(
                f"{part!r} is not a substring of the text inside one of its clauses", path, line, "aspects"
            )
        aspects.append(span)
    source = obj.get("writer") or obj.get("source") or ""
    return LabelledInstruction(text, tuple(sorted(aspects)), tuple(sorted(clauses)), str(source))


def read_labelled(path: str | Path, digest: Any = None) -> list[LabelledInstruction]:
    """A labelled-instructions JSONL file (the decomposer's training data); ``digest`` (a ``hashlib`` object) is
    fed the bytes the rows were read from."""
    from infembed.data.jsonl import iter_jsonl

    return [labelled_from_json(obj, path, line) for line, obj in iter_jsonl(path, digest)]


def read_labelled_files(
    data: str | Path | Sequence[str | Path], digest: Any = None
) -> tuple[list[LabelledInstruction], list[str]]:
    """The rows of each file, and of every ``*.jsonl`` in each directory (sorted), in the order given, and the
    files read; a file named twice (itself and through its directory) is read once. ``digest`` (a ``hashlib``
    object) is fed the bytes of each file as its rows are read: it records what was read, not what a file holds
    by the time a long training ends."""
    specs = [data] if isinstance(data, (str, Path)) else list(data)
    if not specs:
        raise DataError("no labelled instructions given", field="data", hint="give --data FILE_OR_DIR")
    files: list[Path] = []
    for spec in map(Path, specs):
        found = sorted(spec.glob("*.jsonl")) if spec.is_dir() else [spec]
        if not found or not all(f.is_file() for f in found):
            raise DataError("holds no labelled-instructions .jsonl file", spec, field="data")
        files += [f for f in found if f.resolve() not in {g.resolve() for g in files}]
    rows = [row for f in files for row in read_labelled(f, digest)]
    if len(rows) < 2:
        raise DataError("needs at least two labelled instructions", specs[0], field="data")
    return rows, [str(f) for f in files]


def _clip(spans: tuple[tuple[int, int], ...], cut: int) -> tuple[tuple[int, int], ...]:
    return tuple((s, min(e, cut)) for s, e in spans if s < cut)


def augmented(
    items: Sequence[LabelledInstruction], seed: int, joins: float = 1.0
) -> list[LabelledInstruction]:
    """The rows, plus as many again made of two rows joined (an exclusion before or after other sentences), plus
    a lower-cased and an unpunctuated copy of some rows: the registers users type in, without new phrasings."""
    rng = random.Random(seed)
    out = list(items)
    for _ in range(int(len(items) * joins)):
        a, b = rng.sample(range(len(items)), 2)
        out.append(items[a].joined(items[b]))
    for item in items:
        roll = rng.random()
        if roll < 0.15 and len(item.text.lower()) == len(item.text):
            out.append(LabelledInstruction(item.text.lower(), item.aspects, item.clauses, item.source))
        elif roll < 0.25 and item.text.rstrip()[-1:] in ".!?":
            cut = len(item.text.rstrip()) - 1
            out.append(
                LabelledInstruction(
                    item.text[:cut], _clip(item.aspects, cut), _clip(item.clauses, cut), item.source
                )
            )
    return out


def token_tags(item: LabelledInstruction, offsets: Sequence[tuple[int, int]]) -> list[int]:
    """The tag of each token (given its character offsets; ``(0, 0)`` marks special tokens): the tag of its first
    non-space character, BEGIN only for the first token of an aspect."""
    chars = item.char_tags()
    tags = []
    for start, end in offsets:
        if end <= start:
            tags.append(IGNORE)
            continue
        first = next((i for i in range(start, end) if not item.text[i].isspace()), start)
        tag = chars[first]
        if tag != BEGIN and BEGIN in chars[first:end]:
            tag = BEGIN  # a token that runs into an aspect's first character
        tags.append(tag)
    return tags


# ----------------------------------------------------------------------------------------------- decoding
_WORD = re.compile(r"\w", re.UNICODE)
_NAMES = re.compile(r"\w\w", re.UNICODE)  # an aspect that can name something (not a stray "4" of "1921.4.60")
_JOINERS = frozenset("-'’‐‑")
_EDGE = " \t\n\r\"'`“”‘’«».,;:!?()[]{}<>-–—/*_#&|"


def _clean_aspect(text: str) -> str:
    return text.strip(_EDGE).strip()


def _words(
    text: str, offsets: Sequence[tuple[int, int]], tags: Sequence[int], scores: Sequence[float]
) -> Iterator[tuple[int, int, int, float]]:
    """``(start, end, tag, score)`` per word: a token glued to the previous one (no space between, both word
    characters) belongs to its word, which takes the tag and the score of its first token; so does a hyphen or
    an apostrophe between two word characters and the token after it ("shock-boundary-layer", "children's"),
    so that a compound is never cut into aspects at its hyphens."""
    current: list | None = None
    for k, ((start, end), tag, score) in enumerate(zip(offsets, tags, scores)):
        if end <= start:
            continue
        before = text[current[1] - 1] if current is not None and start == current[1] else ""
        glued = bool(before) and (
            (_WORD.match(before) and _WORD.match(text[start]))
            or (  # a joiner between two word characters, the next token touching it
                _WORD.match(before)
                and end == start + 1
                and text[start] in _JOINERS
                and k + 1 < len(offsets)
                and offsets[k + 1][0] == end
                and _WORD.match(text[end])
            )
            or (before in _JOINERS and current[1] - current[0] > 1 and _WORD.match(text[start]))  # after it
        )
        if glued:
            current[1] = end
            continue
        if current is not None:
            yield current[0], current[1], current[2], current[3]
        current = [start, end, tag, score]
    if current is not None:
        yield current[0], current[1], current[2], current[3]


def _tidy(text: str) -> str:
    """Whitespace and punctuation left behind where clauses were cut out."""
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\(\s*\)|\[\s*\]", "", text)
    text = re.sub(r"\s+([,.;:!?)\]])", r"\1", text)
    text = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", text)
    text = re.sub(r"[,;:]\s*([.!?])", r"\1", text)
    text = re.sub(r"([.!?])\s*[,;:]+", r"\1", text)
    text = re.sub(r"^[\s,;:.!?\-–—]+", "", text)
    text = re.sub(r"(?<=[.!?])\s*[.]+", "", text)
    return text.strip().rstrip(",;:–—-").strip()


#: Heads that name "what is retrieved", not content: an aspect made only of these (and stop words) is no aspect.
GENERIC = frozenset(
    "a an the of in on at to for from by with about and or that which who this these those it its any all some "
    "only just mainly purely solely also too other such as is are be s document documents doc docs paper papers "
    "article articles passage passages page pages result results post posts item items source sources text texts "
    "study studies report reports content coverage material materials info information stuff thing things one ones "
    "entry entries piece pieces listing listings answer answers link links site sites website websites".split()
)


def _generic(aspect: str) -> bool:
    return all(w in GENERIC for w in re.findall(r"\w+", aspect.lower()))


#: Words that link the items of a list or a phrase ("X, Y or Z", "such as", "as well as", "around X or in Y"):
#: the model tags them as cue where they join excluded items, but they carry no exclusion. A sentence whose only
#: cue words are these (or punctuation) excludes nothing. Negations and contrasts ("not", "no", "but", "rather",
#: "than", "instead", "except", "without", "out", "off") are not in it.
LINKING = frozenset(
    "a an the and or & plus as well such including include includes like e g i etc of in on at to for from by "
    "with into onto around about over under along within between through via per this that these those which "
    "who whom whose it its their there here is are was were be been being both either".split()
)


#: Negations that loosen a requirement instead of excluding ("X is not required", "Y is optional", "need not",
#: "does not matter"): the loosening part of the rules' ``phrasing.NOT_EXCLUSION``, without its limits ("no more
#: than") and "cannot", which sit beside real exclusions ("black I cannot choose, please exclude it").
LOOSENING = re.compile(
    r"\b(?:needs? not(?! apply\s*$)|needn't(?! apply\s*$)|do(?:es)? not (?:have|need) to|don't (?:have|need) to|"
    r"not necessarily|(?:does|do|did) not matter|doesn't matter|don't matter|no matter|whether or not|"
    r"not (?:strictly )?(?:required|necessary|essential|mandatory|obligatory|compulsory)|(?:is|are) not a requirement|"
    r"not a must|optional|is not critical|not only|not just|not merely|not limited to|"
    r"(?:are|is|can be|may be|could be|might be|would be) (?:still |also |equally )+(?:relevant|fine|welcome|acceptable|useful))\b",
    re.IGNORECASE,
)


_PUNCTUATION = frozenset(_EDGE + "…·•+=~^%$@")
#: Symbols that affirm or rate, never exclude: check marks of a filter list ("balcony ✓ | parking ✓"), a thumbs-up,
#: rating stars, the variation selector of an emoji, and the regional indicators that spell a flag ("ships to 🇨🇦").
_AFFIRMING = frozenset("✓✔☑✅👍★☆⭐\ufe0f") | frozenset(map(chr, range(0x1F1E6, 0x1F200)))


def _carries_cue(word: str) -> bool:
    """Whether a word tagged as cue can say an exclusion: not only linking words or punctuation (a symbol such as
    an emoji can: "pineapple toppings ❌"; a check mark cannot)."""
    tokens = re.findall(r"\w+", word.lower())
    if tokens:
        return not all(t in LINKING for t in tokens)
    return any(not ch.isspace() and ch not in _PUNCTUATION and ch not in _AFFIRMING for ch in word)


_LIST_ITEM = re.compile(r"\s*(?:[-*•–—]|\(?(?:\d{1,2}|[A-Za-z])[.)])\s")
#: What ends a line (as str.splitlines reads it: "\n", "\r", U+0085, U+2028, ...): no aspect runs over one
_LINE_BREAK = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
#: A numbered list opened inside a sentence after a label: "Exclusion criteria: 1. A." continued by "2. B.", "a) X" by "b) Y"
_LIST_OPENS = re.compile(r":\s*\(?[1aA][.)]\s")


def decode(
    text: str,
    offsets: Sequence[tuple[int, int]],
    tags: Sequence[int],
    scores: Sequence[float] | None = None,
    min_score: float = 0.0,
) -> Instruction:
    """An :class:`Instruction` from predicted token tags: aspects are runs of adjacent aspect words (BEGIN or
    INSIDE; a list's items are separate because a cue token, "," "and" "or", stands between them), an aspect
    counts only if its sentence (or clause, up to a semicolon) holds a cue word that can exclude (not only words
    that link a list, :data:`LINKING`: "or", "as well as", "in"; none inside a negation that loosens,
    :data:`LOOSENING`: "is not required", "optional"), the clauses (cue and aspect words and the punctuation
    between them) are cut from ``keep``, and each aspect's guard is what its whole sentence keeps (across a
    semicolon, as the rules read it). ``scores`` (per token, the model's probability of its tag being an aspect
    tag): an aspect whose words score below ``min_score`` on average, or that names only generic heads and stop
    words ("passages about", "the"; listed in ``dropped``), is left to the kept part. No aspect: the instruction
    comes back whole."""
    words = list(_words(text, offsets, tags, scores if scores is not None else [1.0] * len(tags)))
    sentences = sentence_spans(text)
    spans_of = Spans(sentences)
    words, operators = tag_operators(text, words, CUE, BEGIN, INSIDE)
    # a cue word inside a negation that loosens ("X is not required", "Y is optional") says no exclusion
    loosening = Spans([m.span() for m in LOOSENING.finditer(text)])
    cue_words = [(start, end) for start, end, tag, _ in words if tag == CUE]
    loosened = {spans_of.index(s) for s, _ in cue_words if loosening.index(s) >= 0}
    cued = {
        spans_of.index(start)
        for start, end in cue_words
        if spans_of.index(start) not in loosened and _carries_cue(text[start:end])
    }
    cued |= {spans_of.index(start) for start in operators}
    # a clause whose cue words only link items takes its cue from a neighbour: the clause before it, whose list it
    # continues ("Exclude: A; B, C and D; E", "Not looking for:" then "- A" and "- B" on their lines), or the
    # verdict right after a question ("Chromebooks? Nah.", "X? Excluded.")
    whole = Spans(sentence_spans(text, GUARD_END))
    first = set(cued)
    with_cue_words = {spans_of.index(s) for s, _ in cue_words}
    for i, (a, b) in enumerate(sentences):
        if i in cued or i in loosened:
            continue
        before = text[sentences[i - 1][0] : sentences[i - 1][1]] if i else ""
        # the next item of a numbered or bulleted list under a cued one: "Exclude:\n1. A\n2. B", "Ineligible: 1. A. 2. B."
        item = i - 1 in cued and bool(_LIST_ITEM.match(text[a:b])) and bool(_LIST_ITEM.match(before) or _LIST_OPENS.search(before))
        if i not in with_cue_words and not item:
            continue
        same = whole.at(a)
        continues = item or (
            i - 1 in cued
            and (
                (same is not None and same[0] <= sentences[i - 1][0])  # "Exclude: A; B"
                or before.rstrip().endswith(":")  # "Not looking for:\n- A"
            )
        )
        asks = text[a:b].rstrip().endswith("?") and i + 1 in first
        if continues or asks:
            cued.add(i)
    words = [
        (s, e, t, p) if t == KEEP or t == CUE or spans_of.index(s) in cued else (s, e, KEEP, p)
        for s, e, t, p in words
    ]
    aspects: list[list] = []  # [start, end, first word, last word]
    previous = KEEP
    for k, (start, end, tag, _) in enumerate(words):
        if tag in (BEGIN, INSIDE) and (previous not in (BEGIN, INSIDE) or _LINE_BREAK.search(text, aspects[-1][1], start)):
            aspects.append([start, end, k, k])  # an aspect ends with its line ("pork\n- shellfish": two)
        elif tag in (BEGIN, INSIDE):
            aspects[-1][1], aspects[-1][3] = end, k
        previous = tag
    weak = {k for k, a in enumerate(aspects) if sum(w[3] for w in words[a[2] : a[3] + 1]) / (a[3] - a[2] + 1) < min_score}
    generic = {k for k, a in enumerate(aspects) if k not in weak and _generic(text[a[0] : a[1]])}
    excluded = [
        (a[0], a[1]) for k, a in enumerate(aspects) if k not in weak | generic and _NAMES.search(text, a[0], a[1])
    ]
    exceptions = Exceptions(text, spans_of, excluded) if aspects else None
    weak |= {k for k, a in enumerate(aspects) if k not in weak and exceptions is not None and exceptions.covers(a[0])}
    dropped = [d for d in (_clean_aspect(text[aspects[k][0] : aspects[k][1]]) for k in sorted(generic - weak)) if d]
    weak |= generic
    for a in (aspects[k] for k in weak):  # back to the kept part
        for k in range(a[2], a[3] + 1):
            words[k] = (words[k][0], words[k][1], KEEP, words[k][3])
    spans = [(a[0], a[1]) for k, a in enumerate(aspects) if k not in weak and _WORD.search(text[a[0] : a[1]])]
    exclude = [_clean_aspect(text[s:e]) for s, e in spans]
    spans = [span for span, aspect in zip(spans, exclude) if aspect]
    exclude = [aspect for aspect in exclude if aspect]
    if not exclude:
        return Instruction(text.strip(), dropped=dropped)
    # cut the clauses: every non-KEEP word, and the non-word characters between two of them
    removed = [False] * len(text)
    last_cut_end = None
    for start, end, tag, _ in words:
        if tag == KEEP:
            last_cut_end = None
            continue
        begin = last_cut_end if last_cut_end is not None else start
        removed[begin:end] = [True] * (end - begin)
        last_cut_end = end
    kept = "".join(" " if gone else ch for ch, gone in zip(text, removed))
    tidied: dict[tuple[int, int], str] = {}  # once per sentence, however many aspects it holds
    for s, e in {whole.at(start) or (0, len(text)) for start, _ in spans}:
        tidied[s, e] = _tidy(kept[s:e])
    guards = [g if _WORD.search(g) else "" for g in (tidied[whole.at(a) or (0, len(text))] for a, _ in spans)]
    # the same aspect said twice counts once
    seen: dict[str, int] = {}
    unique, unique_guards = [], []
    for aspect, guard in zip(exclude, guards):
        key = aspect.lower()
        if key not in seen:
            seen[key] = len(unique)
            unique.append(aspect)
            unique_guards.append(guard)
    return Instruction(keep=_tidy(kept), exclude=unique, guards=unique_guards, dropped=dropped)
