"""How our test server (fake_openai_server.py) answers the prompts of ``infembed synth benchmark`` and requests
for JSON-constrained output; deterministic, from the prompt alone.

* ``benchmark_og``: an instruction naming the query's longest words.
* ``benchmark_changed``: "Only documents that mention 'W' are relevant; ...", W being the word (5+ letters)
  whose share of the shown documents is closest to one half (ties: alphabetical), so that the judge keeps
  some documents and drops others, as a real narrowing does.
* ``benchmark_exclusion``: "Documents that do not mention 'W' are not relevant."
* ``benchmark_judge``: yes when the document contains W (always yes without a restriction).
* ``response_format`` set: the labelled answer ``Label: value`` as ``{"label": value}``.
"""

from __future__ import annotations

import json
import re


def _field(content: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}: (.*)$", content, re.MULTILINE)
    return match.group(1).strip() if match else ""


def _documents(content: str) -> list[str]:
    listing = content.split("Relevant documents:", 1)[-1]
    pattern = r"^\[\d+\] (.*?)(?=\n\n\[\d+\] |\n\nReply |\Z)"
    return [m.group(1).strip() for m in re.finditer(pattern, listing, re.MULTILINE | re.DOTALL)]


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{5,}", text)}


def splitting_word(documents: list[str]) -> str:
    """The word whose document frequency is closest to half of the documents (present in some, not all)."""
    n = len(documents)
    counts: dict[str, int] = {}
    for doc in documents:
        for word in _words(doc):
            counts[word] = counts.get(word, 0) + 1
    candidates = [(abs(c - n / 2), w) for w, c in counts.items() if 0 < c < n]
    return min(candidates)[1] if candidates else "zzzzz"


def benchmark_answer(task: str, content: str) -> str | None:
    query = _field(content, "Query")
    if task == "benchmark_og":
        words = sorted(_words(query), key=lambda w: (-len(w), w))[:3] or ["topic"]
        return f"Instruction: Relevant documents discuss {', '.join(words)} and closely related work."
    if task == "benchmark_changed":
        word = splitting_word(_documents(content))
        return (
            f"Restriction: Only documents that mention '{word}' are relevant; documents that do not mention "
            "it are not relevant."
        )
    if task == "benchmark_exclusion":
        match = re.search(r"mention '(\w+)'", _field(content, "Restriction"))
        word = match.group(1) if match else "zzzzz"
        return f"Exclusion: Documents that do not mention '{word}' are not relevant."
    if task == "benchmark_judge":
        match = re.search(r"mention '(\w+)'", _field(content, "Instruction"))
        document = content.split("\nDocument: ", 1)[-1].split("\n\nIs the document relevant?", 1)[0]
        relevant = match is None or match.group(1) in _words(document)
        return f"Answer: {'yes' if relevant else 'no'}"
    return None


def as_json(text: str) -> str:
    """``Label: value`` -> ``{"label": value}`` (a number stays a number), as a constrained decoder writes it."""
    match = re.match(r"^(\w+): (.*)$", text, re.DOTALL)
    if match is None:
        return json.dumps({"text": text})
    value: object = match.group(2)
    if re.fullmatch(r"\d+", str(value)):
        value = int(str(value))
    return json.dumps({match.group(1).lower(): value})
