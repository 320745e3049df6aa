"""Search syntax that excludes whatever the words around it say (torch-free): a search box's minus
("vite ssr -webpack", ``-"gore tex"``, "-site:medium.com", "-lot_status:scrap"), a filter line's negated field
("population != paediatric", "vendor <> Cisco", "vendor not in (Microsoft, Cisco)") and the negations of the query
languages people paste into a search box: SQL (``WHERE zoning = 'R1' AND flood_zone <> 'AE'``, ``NOT (carrier =
'COSCO' OR ...)``), Lucene/Elasticsearch query strings (``NOT status:(withdrawn OR suspended)``), Kusto (``where
EventType !in ("Drought", "Heat")``, ``!has "dr-"``) and MongoDB filters (``{"doc_type": {"$nin": [...]}}``).
The learned decomposer seldom reads these symbols as cues, and they are syntax, not phrasing:
:func:`tag_operators` tags them in the decoded words whatever the model tagged
(:func:`infembed.instructions.tagging.decode`)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

_FIELD = r"[A-Za-z_][\w.]*"
#: A value list in parentheses (or brackets), up to 300 characters on one line.
_LIST = r"\(([^()\n]{1,300})\)"
#: A search box's minus: ``-term``, ``-"a phrase"``, ``-site:term``, ``-field:(a OR b)`` after a space (or first)
#: excludes the term(s), as web search engines and Lucene read it; a hyphen inside a word, a dash between spaces, a
#: minus before a number or a command-line flag ("-la", "-std=c++20", "java -jar app.jar") is none. Not the minus
#: sign U+2212: in the tables it was arithmetic ("+income \u2212expenses") as often as search syntax. The logic sign
#: "¬" (``¬droperidol ¬peds``) is a minus: it has no other use.
OPERATOR = re.compile(
    rf'(?:^|(?<=[\s(]))[-¬](?:{_FIELD}:(?:"([^"\n]+)"|{_LIST}|([^\s()"`]+))|"([^"\n]+)"'
    r'|([^\W\d_][^\s,;!?()\[\]{}"=/\\:`]{2,})(?![=/\\\w:])'
    r"(?!\s+[\"'*./~]|\s+\S*[./]\w))"
)
#: Lucene's ``NOT field:value`` (``NOT field:"a phrase"``, ``NOT field:(a OR b)``; arXiv's ``ANDNOT abs:x``); NOT in capitals, as the
#: query syntax has it (prose "not" is the model's to read).
NOT_FIELD = re.compile(rf'\b(?:AND)?NOT[ \t]+{_FIELD}:(?:{_LIST}|"([^"\n]+)"|\'([^\'\n]+)\'|([^\s()"\'`]+))')
#: ``NOT (a = 'x' OR field:"y")``: a negated group of SQL comparisons or Lucene clauses; each value is excluded.
NOT_GROUP = re.compile(rf"\bNOT[ \t]*{_LIST}")
#: A negated field of a filter line or a WHERE clause, ``key != value`` (or ``<>``, Kusto's ``!~``; the value quoted
#: or up to the next separator). It must be a whole field: a separator (; | , & or a bracket) or a query keyword
#: (WHERE, AND, OR) before it and a separator or keyword after it, so that a question about the operator ("why is
#: a != b true") is none. Not the sign "≠", which is prose as often ("tours ≠ wanted": tours are not wanted).
_BEFORE = "|".join(rf"(?<=\b{k}\s)" for k in ("AND", "OR", "WHERE", "and", "or", "where", "Where"))
#: What ends a field: a separator, the end, or a query keyword in capitals (also "and"/"or" after a quoted value,
#: where they cannot belong to it: "vendor <> Johnson and Johnson" keeps its value whole).
_AFTER = r"[;|,&\n)]|$|[^\S\n]+(?:AND|OR|ORDER|GROUP|LIMIT)\b"  # any space but a line break (U+0085 too)
NOT_EQUAL = re.compile(
    rf"(?:^|(?<=[;|,&\n(])|{_BEFORE})[ \t]*{_FIELD}[ \t]*(?:!=|<>|!~)[ \t]*"
    rf"(?:(?:\"([^\"\n]+)\"|'([^'\n]+)')[ \t]*(?={_AFTER}|(?<=[\"'])[ \t]*(?:and|or)\b)"
    rf"|([^\s;|,&()\"'<>=!][^;|,&()\n\"<>=!]{{0,60}}?)[ \t]*(?={_AFTER}))"
)
#: ``key not in (a, b)``, Kusto's ``key !in (a, b)`` (``!in~``, ``!has_any``) and MongoDB's ``"key": {"$nin":
#: [a, b]}``: each listed value is excluded.
NOT_IN = re.compile(
    rf"\b{_FIELD}(?:[ \t]+(?:not[ \t]+in|NOT[ \t]+IN)|[ \t]*!(?:in|has_any)(?:_cs)?~?)[ \t]*{_LIST}"
    r"|[\"']?\$nin[\"']?[ \t]*:[ \t]*\[([^\[\]\n]{1,300})\]"
)
#: Kusto's negated string operators and MongoDB's ``$ne``, with a quoted value: ``Name !has "dr-"``,
#: ``{"$ne": "draft"}``.
NOT_MATCH = re.compile(
    rf"\b{_FIELD}[ \t]*!(?:has|contains|startswith|endswith|hasprefix|hassuffix)(?:_cs)?[ \t]*"
    r"(?:\"([^\"\n]+)\"|'([^'\n]+)')"
    r"|[\"']?\$ne[\"']?[ \t]*:[ \t]*(?:\"([^\"\n]+)\"|'([^'\n]+)')"
)
#: The items of a value list: split at commas, ``||`` and the words OR/AND; each is a value, quoted or not, or a
#: comparison whose value counts (``field:"v"``, ``field = 'v'``).
_SEPARATOR = re.compile(r"\s*(?:,|\|\||&&)\s*|\s+(?:OR|AND|or|and)\s+")
_COMPARED = re.compile(rf"{_FIELD}[ \t]*(?::|==?|LIKE\b|like\b)[ \t]*")
_PIECE = re.compile(r"\S+")
_FIELD_TAG = re.compile(r"\[[A-Za-z]{2,5}\]?$")
_NOTHING = frozenset({"", "0", "null", "none", "nil", "n/a", "na", "nan", "true", "false", "''", '""'})


def _value(text: str, start: int, end: int) -> tuple[int, int] | None:
    """The span of the value in ``text[start:end]`` (one list item): a comparison's value, unquoted."""
    piece = text[start:end]
    compared = _COMPARED.match(piece)
    if compared:
        start += compared.end()
        piece = text[start:end]
    stripped = piece.strip().strip("\"'[]").strip()
    if not stripped:
        return None
    first = start + piece.index(stripped)
    return first, first + len(stripped)


def _values(text: str, spans: Sequence[tuple[int, int] | None]) -> list[tuple[int, int]]:
    """The spans that name something: a PubMed field tag ("rat[tiab]"), wildcards and backticks cut off; an empty
    value, null, a boolean or zero ("hoa_fee != 0", "source != 'N/A'": a constraint, no topic) dropped."""
    kept = []
    for span in spans:
        if span is None:
            continue
        start, end = span
        tag = _FIELD_TAG.search(text, start, end)
        end = tag.start() if tag else end
        while start < end and text[start] in "*`":
            start += 1
        while end > start and text[end - 1] in "*`":
            end -= 1
        if text[start:end].strip().lower() not in _NOTHING:
            kept.append((start, end))
    return kept


def _items(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The value spans of the list ``text[start:end]``."""
    cuts = [start] + [c for m in _SEPARATOR.finditer(text, start, end) for c in m.span()] + [end]
    return _values(text, [_value(text, a, b) for a, b in zip(cuts[::2], cuts[1::2])])


#: A command line's flag with its argument: a single character or a signed size ("find . -type f -size +100M"). A
#: line holding one is a command: none of its minus signs is a search box's (``-user deploy`` there is a flag too).
_COMMAND_FLAG = re.compile(r"(?:^|(?<=\s))-[A-Za-z][\w-]*[ \t]+(?:[A-Za-z0-9]|[+-]\d\w*)(?=\s|$)")


def _on_command_line(text: str, pos: int, commands: Sequence[int]) -> bool:
    """Whether the line of ``pos`` holds a command-line flag with an argument (``commands``: their starts)."""
    if not commands:
        return False
    start, end = text.rfind("\n", 0, pos) + 1, text.find("\n", pos)
    end = len(text) if end < 0 else end
    k = bisect.bisect_left(commands, start)
    return k < len(commands) and commands[k] < end


def operators(text: str) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``(start, end, aspects)`` of each operator in ``text`` (in order, none overlapping): the span of the whole
    construct and the character spans of the terms it excludes."""
    found: list[tuple[int, int, list[tuple[int, int]]]] = []
    commands = [m.start() for m in _COMMAND_FLAG.finditer(text)]
    for pattern, lists in ((OPERATOR, 2), (NOT_FIELD, 1), (NOT_MATCH, 0)):  # lists: the group of a value list
        for match in pattern.finditer(text):
            if pattern is OPERATOR and text[match.start()] == "-" and _on_command_line(text, match.start(), commands):
                continue
            group = next(g for g in range(1, pattern.groups + 1) if match.group(g) is not None)
            aspects = (
                _items(text, *match.span(group)) if group == lists else _values(text, [match.span(group)])
            )
            if aspects:
                found.append((match.start(), match.end(), aspects))
    for match in NOT_GROUP.finditer(text):
        inner = match.group(1)
        if _COMPARED.search(inner) or re.search(r"\s(?:OR|AND)\s|\"", inner):  # query syntax, not "NOT (yet)"
            found.append((match.start(), match.end(), _items(text, *match.span(1))))
    for match in NOT_EQUAL.finditer(text):
        start, end = match.span()
        if (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end] == "\n"):
            continue  # a field alone on its line: not a filter line
        group = next(g for g in (1, 2, 3) if match.group(g) is not None)
        if group == 3 and start and text[start - 1].isspace() and re.search(r"\s", match.group(3)):
            continue  # after a keyword, a bare value is one word: "why does WHERE x <> NULL never match" is prose
        aspects = _values(text, [match.span(group)])
        if aspects:
            found.append((start + len(match.group(0)) - len(match.group(0).lstrip()), end, aspects))
    for match in NOT_IN.finditer(text):
        group = 1 if match.group(1) is not None else 2
        items = _items(text, *match.span(group))
        if items:
            found.append((match.start(), match.end(), items))
    found.sort(key=lambda item: (item[0], -item[1]))
    kept: list[tuple[int, int, list[tuple[int, int]]]] = []
    for item in found:  # the first (and longest) of overlapping constructs wins
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
        return [
            (s, e, tags if isinstance(tags, int) else tags[min(k, 1)], 1.0) for k, (s, e) in enumerate(spans)
        ]

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
