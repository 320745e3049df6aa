"""How our test server (fake_openai_server.py) answers the prompts of ``infembed synth run --style negation``
(``infembed.synth.negation_prompts``): deterministically, from the prompt alone, so that the judge of the
server is right on every row unless a rule says otherwise.

* ``negation_general``: "I want a plain account of W for this search.", W the query's longest word (short,
  so that I+ and I- differ within the 100 characters the server's text hash reads).
* ``negation_exclusion``: "Passages about A and B are not relevant.", A and B the passage's longest words
  that the passage to keep (when shown), the query and the general statement lack; when a passage to keep is
  shown (E+, whose instruction I+ must win for P+), it ends with the server's ``ref <hash of P+>``, so the
  judge picks P+ for I+. Misbehaviours (a rule's ``reply``): ``vague`` names nothing of the passage; ``echo``
  restates the general statement first.
* ``negation_passage`` (P1-): a passage carrying the server's marker of the (instruction, query) it answers,
  about :data:`ASPECT_WORDS`, which seed passages do not hold.
* ``negation_check``: ``yes`` (``no`` with the rule reply ``wrong``).
"""

from __future__ import annotations

import hashlib
import re

#: the aspect the fake P1- is about (words no seed passage holds), so E+ names them
ASPECT_WORDS = ("custodianship", "provenance", "logistics")


def _hash(text: str) -> str:  # as fake_openai_server.text_hash
    return hashlib.sha1(" ".join(text.split())[:100].encode("utf-8")).hexdigest()[:8]


def _field(content: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}: (.*)$", content, re.MULTILINE)
    return match.group(1).strip() if match else ""


def _block(content: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}: (.*?)(?=\n\n|\Z)", content, re.MULTILINE | re.DOTALL)
    return match.group(1).strip() if match else ""


def _words(text: str) -> list[str]:
    """Words of 5+ letters, longest first (then alphabetical)."""
    return sorted({w.lower() for w in re.findall(r"[A-Za-z]{5,}", text)}, key=lambda w: (-len(w), w))


def negation_answer(task: str, content: str, reply: str | None = None) -> str:
    query = _field(content, "Query")
    if task == "negation_general":
        word = (_words(query) or ["subject"])[0]
        return f"Statement: I want a plain account of {word} for this search."
    if task == "negation_exclusion":
        general, keep = _field(content, "General statement"), _block(content, "Passage to keep")
        if reply == "vague":
            return "Exclusion: Leave out anything that is off the point."
        known = set(_words(keep)) | set(_words(query)) | set(_words(general))
        words = [w for w in _words(_block(content, "Passage")) if w not in known][:2] or ["nothing"]
        ref = f", ref {_hash(keep)}" if keep else ""
        text = f"Passages about {' and '.join(words)} are not relevant{ref}."
        return f"Exclusion: {general} {text}" if reply == "echo" else f"Exclusion: {text}"
    if task == "negation_passage":
        marker = f"{_hash(_field(content, 'Instruction'))}-{_hash(query)}"
        return (
            f"Passage: This passage answers '{query}' from another side, marker {marker}. It covers "
            f"{', '.join(ASPECT_WORDS)} in concrete terms, with other facts and figures."
        )
    if task == "negation_check":
        return "Answer: no" if reply == "wrong" else "Answer: yes"
    return "Hello from the fake server."
