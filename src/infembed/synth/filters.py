"""Rule filters (paper appendix B.1 and our additions): pure functions, no I/O.

* :func:`clean_answer` turns a raw LLM answer into the field's text or a rejection reason: it drops a
  leading label (``Instruction:``, ``**New query:**`` ...), cuts instructions and queries at the first
  newline (the paper's rule) and passages at the first blank line (code keeps its lines), strips wrapping
  quotes and markdown emphasis, and recognises empty answers, refusals, length violations, JSON instead of
  text (a complete ``{"instruction": "..."}`` is unwrapped; a fragment such as ``{"instr`` is rejected) and
  markup (an HTML page such as a proxy's "502 Bad Gateway", or text in tags).
* :func:`check_row` applies the row-level rules once all generated fields exist: the poisoned instruction and
  query must differ from the positives, the three passages must differ, and for code the programming
  language must stay the same in both instructions.
* :func:`parse_choice` reads the judge's ``Answer: <number>``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

#: field kind -> (min characters, max characters, min words)
DEFAULT_BOUNDS: dict[str, tuple[int, int, int]] = {
    "instruction": (20, 600, 4),
    "query": (3, 250, 1),
    "passage": (40, 4000, 8),
}

_LABEL = re.compile(
    r"""^\s*(?:[#>*_`\s]*)                     # markdown noise
        (?:(?:new|negative|positive|poisoned|contrasting|final|synthetic|rewritten)\s+)?
        (?:instruction|query|search\s+query|passage|document|answer)
        (?:\s*\([^)]*\))?                          # e.g. "Instruction (I-):"
        \s*[*_]*\s*[:：]\s*[*_]*""",
    re.IGNORECASE | re.VERBOSE,
)
_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry,|i can(?:no|')t|i cannot|i am unable|i'?m unable|i won'?t|"
    r"as an ai|i'?m not able|i am not able|unfortunately,? i)",
    re.IGNORECASE,
)
_QUOTES = [
    ('"', '"'),
    ("'", "'"),
    ("\u201c", "\u201d"),
    ("\u2018", "\u2019"),
    ("`", "`"),
    ("\u00ab", "\u00bb"),
]
_WORD = re.compile(r"[^\W\d_]{2,}")
#: an answer that starts as JSON: ``{"``, ``{`` alone, ``[{``, ``["``, ``[[`` (not ``{x | x > 0}``)
_JSON_START = re.compile(r'^\s*(?:\{\s*(?:"|$)|\[\s*(?:[{\["]|$))')
#: a JSON key inside an instruction or query: ``{"query":`` or ``, "query":`` (passages may quote code)
_JSON_KEY = re.compile(r'[{,]\s*"[^"\n]{1,60}"\s*:')
#: the start of an HTML or XML document
_MARKUP_DOCUMENT = re.compile(
    r"\s*(?:<!doctype\s+html|<\?xml\b|<\s*(?:html|head|body)\b[^<>]*>)", re.IGNORECASE
)
_TAG = re.compile(r"\s*</?[a-z][a-z0-9]*(?:\s[^<>]*)?/?>", re.IGNORECASE)
_CLOSING_TAG = re.compile(r"</[a-z][a-z0-9]*\s*>", re.IGNORECASE)
#: an HTTP error page (checked in code passages too, where other markup may be the code itself)
_ERROR_PAGE = re.compile(
    r"<(?:title|h1)\b[^<>]*>\s*(?:[45]\d\d\b|error\b|bad gateway|service unavailable|gateway time-?out)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Cleaned:
    """``text`` when the answer is usable, else ``reason`` says why not."""

    text: str | None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.text is not None


def _strip_wrappers(text: str) -> str:
    text = text.strip()
    changed = True
    while changed and len(text) >= 2:
        changed = False
        for mark in ("**", "__"):
            if text.startswith(mark) and text.endswith(mark) and len(text) > 2 * len(mark):
                text, changed = text[len(mark) : -len(mark)].strip(), True
        for left, right in _QUOTES:
            if text.startswith(left) and text.endswith(right) and len(text) >= 2:
                inner = text[1:-1]
                if left not in inner or left in ("'",):  # keep "a" and "b" as is
                    text, changed = inner.strip(), True
    return text


def _is_markup(text: str, kind: str, domain: str) -> bool:
    """An HTTP error page, or a text that starts as markup: an HTML/XML document, or a tag closed later
    (``<p>...</p>``). Text that only quotes markup (``use <b>bold</b>``, ``the <br> tag``) stays; code
    passages may be markup themselves, so only error pages count there."""
    if _ERROR_PAGE.search(text):
        return True
    if kind == "passage" and domain == "code":
        return False
    if _MARKUP_DOCUMENT.match(text):
        return True
    return bool(_TAG.match(text)) and bool(_CLOSING_TAG.search(text))


def _unwrap_json(text: str, kind: str) -> Cleaned | str:
    """``{"instruction": "..."}`` -> its text; a JSON fragment or other JSON -> a rejection."""
    try:
        value = json.loads(text)
    except ValueError:
        return Cleaned(None, "JSON fragment instead of text")
    if isinstance(value, dict):
        texts = {k: v for k, v in value.items() if isinstance(v, str) and v.strip()}
        named = [
            v
            for k, v in texts.items()
            if kind in k.lower() or (kind == "passage" and "document" in k.lower())
        ]
        if len(texts) == 1 and len(value) == 1:
            return next(iter(texts.values()))
        if len(named) == 1:
            return named[0]
    return Cleaned(None, "JSON instead of text")


def strip_code_fences(text: str) -> str:
    match = re.search(r"```[\w+#.-]*\n(.*?)(?:```|$)", text, re.DOTALL)
    return match.group(1).rstrip() if match else text


def clean_answer(
    raw: str | None,
    kind: str,
    *,
    domain: str = "web",
    bounds: dict[str, tuple[int, int, int]] | None = None,
) -> Cleaned:
    """Clean one generated field. ``kind`` is ``instruction``, ``query`` or ``passage``.

    >>> clean_answer('**Instruction:** "Focus on costs per day."\\nThis works because...', "instruction").text
    'Focus on costs per day.'
    """
    if kind not in DEFAULT_BOUNDS:
        raise ValueError(f"unknown field kind '{kind}'")
    text = (raw or "").replace("\r\n", "\n").replace("\r", "\n").strip()
    if not text:
        return Cleaned(None, "empty answer")
    if _REFUSAL.match(text):
        return Cleaned(None, "refused")
    # the label may stand alone on the first line with the text below it
    text = _LABEL.sub("", text, count=1).lstrip()
    code = kind == "passage" and domain == "code"
    # a whole answer in JSON or markup: judged before the cut below, which could keep just `<html>`
    if not code and _JSON_START.match(text):
        unwrapped = _unwrap_json(text, kind)
        if isinstance(unwrapped, Cleaned):
            return unwrapped
        text = _LABEL.sub("", unwrapped.replace("\r\n", "\n").strip(), count=1).lstrip()
    if _is_markup(text, kind, domain):
        return Cleaned(None, "markup instead of text")
    if code:
        text = strip_code_fences(text).strip("\n")
    elif kind == "passage":
        text = re.split(r"\n\s*\n", text, maxsplit=1)[0]
        text = " ".join(line.strip() for line in text.split("\n") if line.strip())
    else:
        text = text.split("\n", 1)[0]
    text = _strip_wrappers(text) if not code else text
    if not text.strip():
        return Cleaned(None, "empty answer")
    if _REFUSAL.match(text):
        return Cleaned(None, "refused")
    if not code and (_JSON_START.match(text) or (kind != "passage" and _JSON_KEY.search(text))):
        return Cleaned(None, "JSON fragment instead of text")
    if _is_markup(text, kind, domain):
        return Cleaned(None, "markup instead of text")
    low, high, min_words = (bounds or DEFAULT_BOUNDS)[kind]
    if len(_WORD.findall(text)) < min_words or len(text) < low:
        return Cleaned(None, f"{kind} too short ({len(text)} characters)")
    if len(text) > high:
        return Cleaned(None, f"{kind} too long ({len(text)} characters)")
    return Cleaned(text)


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def check_row(row: dict[str, str], *, domain: str = "web", language: str | None = None) -> str | None:
    """Row-level rules; returns the first violated rule's reason, or ``None`` when the row passes."""
    if _norm(row["instruction_negative"]) == _norm(row["instruction_positive"]):
        return "poisoned instruction equals the positive instruction"
    if _norm(row["query_negative"]) == _norm(row["query_positive"]):
        return "poisoned query equals the positive query"
    passages = {
        "document_positive": _norm(row["document_positive"]),
        "hard_negative_document_1": _norm(row["hard_negative_document_1"]),
        "hard_negative_document_2": _norm(row["hard_negative_document_2"]),
    }
    if passages["hard_negative_document_1"] == passages["document_positive"]:
        return "negative passage 1 repeats the positive passage"
    if passages["hard_negative_document_2"] == passages["document_positive"]:
        return "negative passage 2 repeats the positive passage"
    if passages["hard_negative_document_1"] == passages["hard_negative_document_2"]:
        return "the two negative passages are identical"
    if domain == "code" and language:
        pattern = re.compile(r"(?<![\w+#])" + re.escape(language.lower()) + r"(?![\w+#])")
        for field in ("instruction_positive", "instruction_negative"):
            if not pattern.search(row[field].lower()):
                return f"{field} does not name the programming language {language}"
    return None


_ANSWER = re.compile(r"answer\W{0,5}(?:passage\s*)?\[?#?(\d+)\]?", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])\[?#?(\d+)\]?(?![\w.])")


def parse_choice(raw: str | None, n_candidates: int) -> int | None:
    """The judge's chosen candidate as a 0-based index, or ``None`` when the answer names no valid number.

    Takes the last ``Answer: N``; otherwise, for a short answer, its only number (``"3"``, ``"[3]"``,
    ``"Passage 3"``). A long answer without the label is not guessed at.
    """
    text = (raw or "").strip()
    if not text:
        return None
    labelled = _ANSWER.findall(text)
    if labelled:
        value = int(labelled[-1])
    else:
        if len(text) > 40:
            return None
        numbers = set(_NUMBER.findall(text))
        if len(numbers) != 1:
            return None
        value = int(numbers.pop())
    return value - 1 if 1 <= value <= n_candidates else None
