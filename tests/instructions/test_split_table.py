"""The rules splitter against a table of phrasings (tests/instructions/phrasings.py): recall of the excluded
aspects >= 0.95, precision >= 0.9, no exclusion found in a plain instruction, and the positive part kept.

An aspect is found when a predicted one shares >= 60% of its content words and >= 40% of the prediction's
words are in it (so an aspect that swallowed the whole instruction does not count)."""

from __future__ import annotations

import re

import pytest
from phrasings import EXCLUDING, PLAIN

from infembed.instructions import Instruction, split_instruction

_IGNORED = set(
    "a an the of in on at to for from by with about and or nor any all some that which who is are was were be "
    "documents document passages passage papers paper articles article results result anything only merely "
    "those ones dealing deal discuss discussing".split()
)


def _tokens(text: str) -> set[str]:
    return {w for w in re.findall(r"[\w'-]+", text.lower()) if w not in _IGNORED}


def _matches(predicted: str, expected: str) -> bool:
    p, e = _tokens(predicted), _tokens(expected)
    if not p or not e:
        return False
    common = len(p & e)
    return common / len(e) >= 0.6 and common / len(p) >= 0.4


def _score_table():
    found = predicted_ok = predicted_total = expected_total = 0
    failures = []
    for instruction, expected, keep_words in EXCLUDING:
        split = split_instruction(instruction)
        expected_total += len(expected)
        predicted_total += len(split.exclude)
        hit = [any(_matches(p, e) for p in split.exclude) for e in expected]
        found += sum(hit)
        predicted_ok += sum(any(_matches(p, e) for e in expected) for p in split.exclude)
        missing_keep = [w for w in keep_words if w.lower() not in split.keep.lower()]
        if not all(hit) or missing_keep:
            failures.append(f"{instruction!r}: predicted {split.exclude} keep={split.keep!r}; expected {expected}"
                            + (f", keep lost {missing_keep}" if missing_keep else ""))
    false_exclusions = [(text, split_instruction(text).exclude) for text in PLAIN if split_instruction(text).exclude]
    return found / expected_total, predicted_ok / max(predicted_total, 1), failures, false_exclusions, expected_total


def test_table_is_large_enough():
    assert len(EXCLUDING) + len(PLAIN) >= 80 and len(PLAIN) >= 25


def test_rules_splitter_recall_precision_and_no_false_exclusion():
    recall, precision, failures, false_exclusions, n = _score_table()
    print(f"\nrules splitter: recall {recall:.3f}, precision {precision:.3f} over {n} aspects in {len(EXCLUDING)} "
          f"instructions; false exclusions {len(false_exclusions)}/{len(PLAIN)} plain instructions")
    report = "\n".join(failures + [f"FALSE EXCLUSION {t!r}: {e}" for t, e in false_exclusions])
    assert recall >= 0.95, report
    assert precision >= 0.9, report
    assert not false_exclusions, report


@pytest.mark.parametrize("text", ["", "   ", None, "Find reviews of hybrid cars.", "  Only experimental studies are relevant. "])
def test_plain_or_empty_instructions_are_kept_whole(text):
    split = split_instruction(text)
    assert split == Instruction((text or "").strip())
    assert split.exclude == []


def test_off_splitter_and_unknown_splitter():
    text = "Find cars. Electric cars are not relevant."
    assert split_instruction(text, "off") == Instruction(text)
    with pytest.raises(ValueError, match="unknown splitter"):
        split_instruction(text, "bogus")
    with pytest.raises(TypeError):
        split_instruction(42)  # type: ignore[arg-type]


def test_guard_is_the_positive_requirement_of_the_same_sentence():
    split = split_instruction("Relevant documents cover turbines. Only axial turbines are relevant; radial turbines are not relevant.")
    assert split.exclude == ["radial turbines"]
    assert split.guards == ["Only axial turbines are relevant"]
    assert "axial turbines are relevant" in split.keep and "radial" not in split.keep
