"""How well a splitter finds excluded aspects, judged on a table of instructions (the metric of
``tests/instructions/test_split_table.py`` and ``bench/decomposer.py``).

A phrase becomes its set of content tokens (lower case, possessive 's and a plural s dropped, stop words and the
generic nouns for "things retrieved" removed). A predicted excluded aspect P matches an expected one E when
|P & E| / |E| >= 0.6 and |P & E| / |P| >= 0.4, so a prediction that swallowed the whole instruction does not
count. An expected "X or Y" not matched by one prediction is recalled when the union of the predictions that lie
inside it (each >= 0.4 of its tokens in E) matches it; those predictions count as matched. Precision = matched
predictions / predictions (plain instructions included), recall = recalled aspects / aspects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from infembed.instructions.instruction import Instruction

_STOP = frozenset(
    "a an the of in on at to for from by with without about and or nor any all some that which who whose those "
    "these this it its is are was were be been being as than then there their them they me my we our us you your "
    "i please also too either only merely just purely mainly solely anything something everything ones one "
    "dealing deal deals discuss discusses discussing concerning concerned regarding related relating involving "
    "mention mentions mentioning focusing focused focus document documents doc docs paper papers article articles "
    "passage passages result results page pages post posts item items source sources text texts study studies "
    "report reports content material materials information info listing listings piece pieces entry entries "
    "thing things stuff".split()
)


def content_tokens(text: str) -> frozenset[str]:
    text = re.sub(r"['\u2019]s\b", "", text.lower())
    words = (w for w in re.findall(r"[a-z0-9]+", text) if w not in _STOP)
    return frozenset(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words)


def aspect_matches(predicted: frozenset[str], expected: frozenset[str]) -> bool:
    common = len(predicted & expected)
    return bool(predicted and expected) and common / len(expected) >= 0.6 and common / len(predicted) >= 0.4


def score_case(predicted: list[str], expected: list[str]) -> tuple[list[bool], list[bool]]:
    """Which expected aspects were recalled, and which predictions matched one.

    A list may be one aspect or several on either side: an expected "X or Y" is recalled by the union of the
    predictions that lie inside it, and one prediction "X and Y" recalls the expected items that lie inside it."""
    pred, exp = [content_tokens(p) for p in predicted], [content_tokens(e) for e in expected]
    recalled, matched = [False] * len(exp), [False] * len(pred)
    for j, e in enumerate(exp):
        for i, p in enumerate(pred):
            if aspect_matches(p, e):
                recalled[j] = matched[i] = True
    for j, e in enumerate(exp):  # "X or Y" expected, predicted as two aspects
        inside = [i for i, p in enumerate(pred) if p and len(p & e) / len(p) >= 0.4]
        if len(inside) >= 2 and aspect_matches(frozenset().union(*(pred[i] for i in inside)), e):
            recalled[j] = True
            for i in inside:
                matched[i] = True
    for i, p in enumerate(pred):  # two aspects expected, predicted as one "X and Y"
        inside = [j for j, e in enumerate(exp) if e and len(p & e) / len(e) >= 0.6]
        if len(inside) >= 2 and aspect_matches(p, frozenset().union(*(exp[j] for j in inside))):
            matched[i] = True
            for j in inside:
                recalled[j] = True
    return recalled, matched


def score_table(
    split: Callable[[str], Instruction], excluding: Sequence[tuple[str, Sequence[str]]], plain: Sequence[str]
) -> dict[str, object]:
    """Recall, precision and plain instructions wrongly split for ``split`` on a table: ``excluding`` holds
    ``(instruction, expected aspects)``, ``plain`` instructions that exclude nothing."""
    n_expected = n_recalled = n_predicted = n_matched = false_exclusions = 0
    misses: list[str] = []
    for text, expected in excluding:
        result = split(text)
        recalled, matched = score_case(result.exclude, list(expected))
        n_expected += len(recalled)
        n_recalled += sum(recalled)
        n_predicted += len(matched)
        n_matched += sum(matched)
        if not all(recalled) or not all(matched):
            misses.append(f"{text!r}: predicted {result.exclude}, expected {list(expected)}")
    for text in plain:
        result = split(text)
        n_predicted += len(result.exclude)
        if result.exclude:
            false_exclusions += 1
            misses.append(f"PLAIN {text!r}: predicted {result.exclude}")
    return {
        "recall": n_recalled / n_expected if n_expected else 1.0,
        "precision": n_matched / n_predicted if n_predicted else 1.0,
        "aspects": n_expected,
        "predicted": n_predicted,
        "excluding": len(excluding),
        "plain": len(plain),
        "false_exclusions": false_exclusions,
        "misses": misses,
    }
