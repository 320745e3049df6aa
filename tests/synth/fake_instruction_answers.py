"""How our test server (fake_openai_server.py) answers the prompt of ``infembed synth instructions``:
deterministically, from the prompt alone, five rows a batch (the first ``n`` of them when fewer are asked),
made unique by a hash of the prompt ``h``:

* a batch asking for excluding instructions: 2 valid rows (one aspect; two aspects in a sentence of their own),
  1 row whose aspect is not in the text, 1 plain row (not what was asked), 1 repeat of the first row;
* a batch asking for plain instructions: 3 valid plain rows, 1 row that marks an exclusion (not what was
  asked), 1 row whose clause is not in the text.

With ``constrained`` (the request had a ``response_format``) the answer is the bare JSON object, else the JSON
in a code fence after a line of prose, as chat models write it.
"""

from __future__ import annotations

import hashlib
import json
import re

#: rows of a batch: per kind, (kept?, the row) with {d} the domain and {h} the prompt's hash
EXCLUDING = [
    (True, {"text": "Find {d} pages on solar {h}, not wind {h}.", "aspects": ["wind {h}"], "clauses": [", not wind {h}"]}),
    (True, {
        "text": "I need {d} reports about rivers {h}. Documents about dams {h} and canals {h} are not relevant.",
        "aspects": ["dams {h}", "canals {h}"],
        "clauses": ["Documents about dams {h} and canals {h} are not relevant."],
    }),
    (False, {"text": "Show me {d} news on tides {h}, skip storms {h}.", "aspects": ["hurricanes {h}"], "clauses": ["skip storms {h}"]}),
    (False, {"text": "Anything about {d} maps {h} is welcome.", "aspects": [], "clauses": []}),
    (False, {"text": "Find {d} pages on solar {h}, not wind {h}.", "aspects": ["wind {h}"], "clauses": [", not wind {h}"]}),
]  # fmt: skip
PLAIN = [
    (True, {"text": "Why do some {d} patients {h} not respond to treatment?", "aspects": [], "clauses": []}),
    (True, {"text": "Not only {d} tables {h} but also charts are useful.", "aspects": [], "clauses": []}),
    (False, {"text": "Find {d} guides {h}, not videos {h}.", "aspects": ["videos {h}"], "clauses": [", not videos {h}"]}),
    (False, {"text": "Whether or not {d} fees {h} apply, list them.", "aspects": ["fees"], "clauses": ["no fees"]}),
    (True, {"text": "No more than five {d} sources {h}, please.", "aspects": [], "clauses": []}),
]  # fmt: skip
#: why each invalid row is rejected, in order (the duplicate only when the output is written)
EXCLUDING_REASONS = [
    "aspects: is not a substring of the text inside one of its clauses",
    "kind: marks no exclusion, but the batch asked for excluding instructions",
    "duplicate of an earlier instruction",
]
PLAIN_REASONS = [
    "kind: marks an exclusion, but the batch asked for plain instructions",
    "clauses: is not a substring of the text",
]


def _fill(value: object, domain: str, h: str) -> object:
    if isinstance(value, str):
        return value.replace("{d}", domain).replace("{h}", h)
    if isinstance(value, list):
        return [_fill(v, domain, h) for v in value]
    return {k: _fill(v, domain, h) for k, v in value.items()}  # type: ignore[attr-defined]


def instruction_answer(content: str, constrained: bool = False) -> str:
    domain = re.search(r"^Domain: (.*)$", content, re.MULTILINE)
    plain = re.search(r"^Kind: plain\b", content, re.MULTILINE) is not None
    n = re.search(r"^Write (\d+) ", content, re.MULTILINE)
    h = hashlib.sha1(content.encode("utf-8")).hexdigest()[:8]
    rows = [row for _, row in (PLAIN if plain else EXCLUDING)][: int(n.group(1)) if n else 5]
    body = {"instructions": _fill(rows, domain.group(1) if domain else "web", h)}
    if constrained:
        return json.dumps(body)
    return "Here are the instructions:\n```json\n" + json.dumps(body, indent=2) + "\n```"
