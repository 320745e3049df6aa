"""The rules splitter judged by a table of phrasings (tests/instructions/phrasings.py).

Metric (pure Python, below): a phrase becomes its set of content tokens (lower case, possessive 's and a plural
s dropped, stop words and the generic nouns for "things retrieved" removed). A predicted excluded aspect P matches
an expected one E when |P & E| / |E| >= 0.6 and |P & E| / |P| >= 0.4, so a prediction that swallowed the whole
instruction does not count. An expected "X or Y" not matched by one prediction is recalled when the union of the
predictions that lie inside it (each >= 0.4 of its tokens in E) matches it; those predictions count as matched.
Precision = matched predictions / predictions (plain instructions included), recall = recalled aspects / aspects.
Targets: recall >= 0.95, precision >= 0.9, no exclusion found in a plain instruction (whose keep stays whole), and
for every instruction that excludes, its positive words kept and its excluded words gone from keep."""

from __future__ import annotations

import re

import pytest
from phrasings import EXCLUDING, NEGATIVE, PLAIN, POSITIVE, Case
from phrasings_blind import (
    BLIND_1_PLAIN,
    BLIND_1_POSITIVE,
    BLIND_2_PLAIN,
    BLIND_2_POSITIVE,
    BLIND_3_PLAIN,
    BLIND_3_POSITIVE,
    BLIND_4_PLAIN,
    BLIND_4_POSITIVE,
    BLIND_5_PLAIN,
    BLIND_5_POSITIVE,
)

instructions = pytest.importorskip("infembed.instructions")
Instruction = instructions.Instruction


def split_instruction(text, splitter="rules"):
    """These tables judge the rules splitter (the learned one is judged in bench/decomposer.py)."""
    return instructions.split_instruction(text, splitter)

score_case = pytest.importorskip("infembed.instructions.scoring").score_case  # the metric, shared with bench/

def _has_word(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word.lower())}(?!\w)", text.lower()) is not None


def judge(positive: list[Case], negative: list[str]) -> dict[str, object]:
    n_expected = n_recalled = n_predicted = n_matched = 0
    failures: list[str] = []
    for case in positive:
        split = split_instruction(case.instruction)
        recalled, matched = score_case(split.exclude, list(case.exclude))
        n_expected += len(recalled)
        n_recalled += sum(recalled)
        n_predicted += len(matched)
        n_matched += sum(matched)
        lost = [w for w in case.keep_contains if w.lower() not in split.keep.lower()]
        leaked = [w for w in case.keep_must_not_contain if _has_word(split.keep, w)]
        problems = [f"missed {[e for e, r in zip(case.exclude, recalled) if not r]}"] if not all(recalled) else []
        problems += [f"spurious {[p for p, m in zip(split.exclude, matched) if not m]}"] if not all(matched) else []
        problems += [f"keep lost {lost}"] if lost else []
        problems += [f"keep still has {leaked}"] if leaked else []
        if problems:
            failures.append(f"{case.instruction!r}\n    predicted exclude={split.exclude} keep={split.keep!r}\n"
                            f"    expected  exclude={list(case.exclude)}; " + "; ".join(problems))
    false_exclusions = 0
    for text in negative:
        split = split_instruction(text)
        n_predicted += len(split.exclude)
        false_exclusions += bool(split.exclude)
        if split.exclude or split.keep != text.strip():
            failures.append(f"PLAIN {text!r}\n    predicted exclude={split.exclude} keep={split.keep!r}")
    return {
        "recall": n_recalled / n_expected, "precision": n_matched / n_predicted if n_predicted else 1.0,
        "expected": n_expected, "predicted": n_predicted, "false_exclusions": false_exclusions, "failures": failures,
    }


def _check(name: str, positive: list[Case], negative: list[str]) -> None:
    r = judge(positive, negative)
    print(f"\n{name}: recall {r['recall']:.3f}, precision {r['precision']:.3f} ({r['expected']} aspects in "
          f"{len(positive)} instructions, {r['predicted']} predicted); false exclusions "
          f"{r['false_exclusions']}/{len(negative)} plain instructions")
    report = f"{len(r['failures'])} failing cases:\n" + "\n".join(r["failures"])
    assert r["recall"] >= 0.95, report
    assert r["precision"] >= 0.9, report
    assert r["false_exclusions"] == 0, report
    assert not r["failures"], report


def test_table_is_large_enough():
    assert len(POSITIVE) + len(NEGATIVE) >= 100 and len(NEGATIVE) >= 30


def test_metric_itself():
    # one prediction, or two whose union covers "X or Y"; a swallowed instruction does not count
    assert score_case(["peanuts or tree nuts"], ["peanuts or tree nuts"]) == ([True], [True])
    assert score_case(["peanuts", "tree nuts"], ["peanuts or tree nuts"]) == ([True], [True, True])
    assert score_case(["peanuts"], ["peanuts or tree nuts"]) == ([False], [False])
    swallowed = "Find recipes for cakes and pies with fresh fruit that are not made with peanuts"
    assert score_case([swallowed], ["peanuts"]) == ([False], [False])
    assert score_case(["documents dealing only with electric cars"], ["electric cars"]) == ([True], [True])
    assert score_case(["electric cars", "diesel vans"], ["electric cars"]) == ([True], [True, False])
    assert score_case(["blogs and forums"], ["blogs", "forums"]) == ([True, True], [True])
    assert score_case(["blogs and forums"], ["blogs", "tabloids"]) == ([True, False], [True])


def test_rules_splitter_on_the_independent_table():
    _check("rules splitter, independent table", POSITIVE, NEGATIVE)


def test_rules_splitter_on_the_implementers_table():
    positive = [Case(text, tuple(keep), tuple(expected)) for text, expected, keep in EXCLUDING]
    _check("rules splitter, implementer's table", positive, PLAIN)


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


# "learning without labels", "children raised without access to broadband", "countries without nuclear weapons"
# name topics, yet read like "recipes without nuts"; the rules cannot tell them apart, so they stay known false
# exclusions (blind 5 holds five) rather than rules written for single sentences.
KNOWN_BLIND_FALSE_EXCLUSIONS = {"blind-1": 0, "blind-2": 1, "blind-3": 1, "blind-4": 0, "blind-5": 5}
BLIND_FLOORS = {"blind-5": (0.93, 0.9)}  # recall, precision; the others hold 0.97 / 0.97


@pytest.mark.parametrize(
    ("positive", "plain"),
    [
        (BLIND_1_POSITIVE, BLIND_1_PLAIN),
        (BLIND_2_POSITIVE, BLIND_2_PLAIN),
        (BLIND_3_POSITIVE, BLIND_3_PLAIN),
        (BLIND_4_POSITIVE, BLIND_4_PLAIN),
        (BLIND_5_POSITIVE, BLIND_5_PLAIN),
    ],
    ids=["blind-1", "blind-2", "blind-3", "blind-4", "blind-5"],
)
def test_rules_splitter_on_the_blind_tables(positive, plain, request):
    table = request.node.callspec.id
    r = judge([Case(text, (), tuple(aspects)) for text, aspects in positive], plain)
    print(f"\nblind table: recall {r['recall']:.3f}, precision {r['precision']:.3f}, false exclusions "
          f"{r['false_exclusions']}/{len(plain)}")
    report = "\n".join(r["failures"])
    recall, precision = BLIND_FLOORS.get(table, (0.97, 0.97))
    assert r["recall"] >= recall and r["precision"] >= precision, report
    assert r["false_exclusions"] <= KNOWN_BLIND_FALSE_EXCLUSIONS[table], report


# The shipped learned decomposer (auto) on the tables of bench/decomposer-blind it was not trained on (rounds 9-30):
# its figures as measured when it was shipped (session 25: C27, two members, seeds 3 and 4, averaged; judged by rules
# written before it was trained and before round 29 was asked; rounds 27-29 written blind after its data was fixed;
# round 30 (tables 90-92) written blind in session 26 and scored with it then; docs/instructions.md), so that a change of weights or decoding that loses
# ground on phrasings nobody tuned for shows here. Floors are the measured figures less 0.02 (a borderline token may
# be tagged otherwise by another CPU's kernels); plain instructions split, measured + 1.
AUTO_BLIND = {
    "table-27": (0.935, 0.914, 3),
    "table-28": (0.908, 0.904, 6),
    "table-29": (0.971, 0.947, 6),
    "table-30": (0.986, 0.961, 3),
    "table-31": (0.963, 0.953, 1),
    "table-32": (0.924, 0.906, 3),
    "table-33": (0.987, 0.949, 2),
    "table-34": (0.960, 0.977, 0),
    "table-35": (0.955, 0.909, 4),
    "table-36": (0.954, 0.897, 1),
    "table-37": (0.977, 0.972, 1),
    "table-38": (0.929, 0.945, 1),
    "table-39": (0.859, 0.944, 0),
    "table-40": (0.950, 0.954, 1),
    "table-41": (0.925, 0.971, 3),
    "table-42": (0.893, 0.899, 1),
    "table-43": (0.937, 0.883, 3),
    "table-44": (0.933, 0.938, 0),
    "table-45": (0.865, 0.887, 2),
    "table-46": (0.925, 0.881, 9),
    "table-47": (0.946, 0.947, 2),
    "table-48": (0.829, 0.824, 9),
    "table-49": (0.931, 0.915, 5),
    "table-50": (0.928, 0.907, 5),
    "table-51": (0.922, 0.920, 3),
    "table-52": (0.925, 0.935, 0),
    "table-53": (0.901, 0.902, 1),
    "table-54": (0.913, 0.900, 4),
    "table-55": (0.930, 0.864, 7),
    "table-56": (0.869, 0.893, 2),
    "table-57": (0.909, 0.941, 3),
    "table-58": (0.957, 0.958, 0),
    "table-59": (0.861, 0.947, 2),
    "table-60": (0.883, 0.913, 0),
    "table-61": (0.942, 0.925, 2),
    "table-62": (0.923, 0.940, 4),
    "table-63": (0.900, 0.926, 2),
    "table-64": (0.925, 0.925, 1),
    "table-65": (0.876, 0.928, 0),
    "table-66": (0.916, 0.976, 1),
    "table-67": (0.824, 0.848, 3),
    "table-68": (0.881, 0.900, 3),
    "table-69": (0.975, 0.984, 1),
    "table-70": (0.874, 0.889, 5),
    "table-71": (0.920, 0.895, 1),
    "table-72": (0.942, 0.957, 2),
    "table-73": (0.890, 0.908, 2),
    "table-74": (0.922, 0.929, 3),
    "table-75": (0.912, 0.866, 8),
    "table-76": (0.927, 0.889, 3),
    "table-77": (0.886, 0.900, 4),
    "table-78": (0.942, 0.860, 7),
    "table-79": (0.970, 0.941, 7),
    "table-80": (0.878, 0.885, 5),
    "table-81": (0.932, 0.947, 2),
    "table-82": (0.944, 0.910, 3),
    "table-83": (0.953, 0.941, 4),
    "table-84": (0.935, 0.947, 2),
    "table-85": (0.909, 0.889, 2),
    "table-86": (0.881, 0.885, 1),
    "table-87": (0.965, 0.953, 4),
    "table-88": (0.985, 0.972, 2),
    "table-89": (0.937, 0.930, 3),
    "table-90": (0.905, 0.901, 5),
    "table-91": (0.894, 0.914, 3),
    "table-92": (0.928, 0.920, 4),
}


@pytest.mark.slow  # 3-7 min: 13,000 instructions through two members (`make test` runs it after the fast suite)
def test_auto_keeps_its_blind_figures():
    import json
    from pathlib import Path

    from infembed.instructions import split_instructions
    from infembed.instructions.scoring import score_table

    root = Path(__file__).resolve().parents[2] / "bench" / "decomposer-blind"
    tables = {}
    for name in AUTO_BLIND:
        rows = [json.loads(line) for line in (root / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        tables[name] = ([(r["text"], r["aspects"]) for r in rows if r["aspects"]], [r["text"] for r in rows if not r["aspects"]])
    texts = [t for excluding, plain in tables.values() for t in [x for x, _ in excluding] + plain]
    splits = dict(zip(texts, split_instructions(texts, "auto")))
    for name, (recall, precision, false_exclusions) in AUTO_BLIND.items():
        r = score_table(splits.__getitem__, *tables[name])
        got = f"{name}: {r['recall']:.3f} / {r['precision']:.3f} / {r['false_exclusions']}"
        assert r["recall"] >= recall - 0.02 and r["precision"] >= precision - 0.02, got
        assert r["false_exclusions"] <= false_exclusions + 1, got
