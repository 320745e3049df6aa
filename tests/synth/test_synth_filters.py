"""Rule filters and prompts: cleaning of raw answers (paper B.1: cut at the first newline), row rules, judge
answer parsing, and the task headers the prompts carry."""

from __future__ import annotations

import pytest

from infembed.synth import prompts
from infembed.synth.filters import check_row, clean_answer, parse_choice


@pytest.mark.parametrize(
    ("raw", "kind", "expected"),
    [
        (
            "Instruction: Focus on daily costs for the whole resort.",
            "instruction",
            "Focus on daily costs for the whole resort.",
        ),
        (
            '**New Instruction:** "Focus on daily costs for the whole resort."',
            "instruction",
            "Focus on daily costs for the whole resort.",
        ),
        (
            "Instruction:\nFocus on daily costs for the whole resort.\nWhy: it fits.",
            "instruction",
            "Focus on daily costs for the whole resort.",
        ),
        (
            "Focus on daily costs for the whole resort.\n\nExplanation: ...",
            "instruction",
            "Focus on daily costs for the whole resort.",
        ),
        (
            "Query: \u201chow much does disneyland earn a day\u201d",
            "query",
            "how much does disneyland earn a day",
        ),
        ("Query (Q-): 'cost of disneyland paris'", "query", "cost of disneyland paris"),
        (
            "Passage: The resort spends about a billion dollars a year,\nmostly on labour and upkeep.\n\nNote: made up.",
            "passage",
            "The resort spends about a billion dollars a year, mostly on labour and upkeep.",
        ),
    ],
)
def test_clean_answer_strips_labels_quotes_and_cuts(raw, kind, expected):
    cleaned = clean_answer(raw, kind)
    assert cleaned.ok, cleaned.reason
    assert cleaned.text == expected


@pytest.mark.parametrize(
    ("raw", "kind", "reason"),
    [
        ("", "instruction", "empty answer"),
        ("   \n ", "query", "empty answer"),
        ("Instruction:", "instruction", "empty answer"),
        ("I'm sorry, but I can't help with that.", "instruction", "refused"),
        ("Query: I cannot create that query.", "query", "refused"),
        ("Instruction: be brief", "instruction", "instruction too short"),
        ("### ???", "instruction", "instruction too short"),
        ("Passage: short text.", "passage", "passage too short"),
        ("Query: " + "word " * 80, "query", "query too long"),
    ],
)
def test_clean_answer_rejects_with_reason(raw, kind, reason):
    cleaned = clean_answer(raw, kind)
    assert not cleaned.ok
    assert cleaned.reason.startswith(reason)


NGINX_502 = (
    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>"
    "<hr><center>nginx/1.18.0 (Ubuntu)</center></body></html>"
)


@pytest.mark.parametrize(
    ("raw", "kind", "domain", "reason"),
    [
        ('{"instr', "query", "web", "JSON fragment instead of text"),
        ('Query: {"query": "cost of disneyland', "query", "web", "JSON fragment instead of text"),
        ('Focus on daily costs", "query": "cost of disneyland', "instruction", "web", "JSON fragment"),
        ('{"a": 1, "b": 2}', "query", "web", "JSON instead of text"),
        ('[{"query": "cost of disneyland"}]', "query", "web", "JSON instead of text"),
        (NGINX_502, "query", "web", "markup instead of text"),
        (NGINX_502, "instruction", "web", "markup instead of text"),
        (NGINX_502, "passage", "web", "markup instead of text"),
        (NGINX_502, "passage", "code", "markup instead of text"),
        # multi-line: the cut at the first newline would otherwise keep "<html>" as a query
        (
            "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>bad gateway</body>\n</html>",
            "query",
            "web",
            "markup",
        ),
        (
            "<!DOCTYPE html>\n<html><body><p>Service Unavailable, try again later</p></body></html>",
            "passage",
            "web",
            "markup",
        ),
        (
            "<p>Focus on the daily operating cost of the parks.</p>",
            "instruction",
            "web",
            "markup instead of text",
        ),
    ],
)
def test_json_fragments_and_markup_are_rejected(raw, kind, domain, reason):
    cleaned = clean_answer(raw, kind, domain=domain)
    assert not cleaned.ok
    assert cleaned.reason.startswith(reason)


@pytest.mark.parametrize(
    ("raw", "kind", "domain", "expected"),
    [
        # a complete JSON object holding the one text is unwrapped
        ('{"query": "cost of disneyland paris per day"}', "query", "web", "cost of disneyland paris per day"),
        (
            'Query: {"query": "cost of disneyland", "why": "other place"}',
            "query",
            "web",
            "cost of disneyland",
        ),
        # texts that only mention markup or braces stay
        ("what is the <br> tag in html", "query", "web", None),
        ("what does <!doctype html> mean", "query", "web", None),
        ("{x | x > 0} as set builder notation", "query", "math", None),
        (
            'DockPanel arranges child elements, e.g. <Button DockPanel.Dock="Top">Header</Button>, in the order'
            " they are declared.",
            "passage",
            "web",
            None,
        ),
        (
            'Add JSON-LD in the page head: <script type="application/ld+json">{"@context":"https://schema.org",'
            '"@type":"LocalBusiness"}</script>. The name and address properties are required.',
            "passage",
            "web",
            None,
        ),
        ('<div class="row">\n  <span>{{ name }}</span>\n</div>', "passage", "code", None),
        (
            '{"name": "demo", "version": "1.0.0", "dependencies": {"left-pad": "^1.3.0"}}',
            "passage",
            "code",
            None,
        ),
    ],
)
def test_answers_that_only_contain_json_or_markup_are_kept(raw, kind, domain, expected):
    cleaned = clean_answer(raw, kind, domain=domain, bounds={kind: (3, 4000, 1)})
    assert cleaned.ok, cleaned.reason
    assert cleaned.text == (raw if expected is None else expected)


def test_code_passages_keep_their_lines_and_lose_fences():
    raw = "Passage:\n```python\ndef add(a, b):\n    # add two numbers and return the sum\n    return a + b\n```\nThis works."
    cleaned = clean_answer(raw, "passage", domain="code")
    assert cleaned.text == "def add(a, b):\n    # add two numbers and return the sum\n    return a + b"


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError):
        clean_answer("x", "title")


ROW = {
    "query_positive": "how much is a cost to run disneyland",
    "instruction_positive": "Focus on the daily operating cost across all parks, in Python please.",
    "document_positive": "Disney's parks cost 571 million dollars to run.",
    "instruction_negative": "Focus on the yearly labour cost of the Anaheim resort, in Python please.",
    "query_negative": "how much does disneyland make a day",
    "hard_negative_document_1": "Disneyland Anaheim spends 1.2 billion a year.",
    "hard_negative_document_2": "Disney parks earn 16 billion a year.",
}


def test_check_row_passes_a_good_row():
    assert check_row(ROW) is None
    assert check_row(ROW, domain="code", language="Python") is None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"instruction_negative": ROW["instruction_positive"].upper()}, "poisoned instruction equals"),
        ({"query_negative": "How much is a cost to run Disneyland?"}, "poisoned query equals"),
        ({"hard_negative_document_1": ROW["document_positive"]}, "negative passage 1 repeats"),
        ({"hard_negative_document_2": ROW["document_positive"]}, "negative passage 2 repeats"),
        (
            {"hard_negative_document_2": ROW["hard_negative_document_1"]},
            "the two negative passages are identical",
        ),
    ],
)
def test_check_row_rules(change, reason):
    assert check_row({**ROW, **change}).startswith(reason)


def test_check_row_keeps_the_programming_language_fixed():
    row = {**ROW, "instruction_negative": "Focus on the yearly labour cost, in Java please."}
    assert "does not name the programming language Python" in check_row(row, domain="code", language="Python")
    # "C" must not match inside "C++" or other words
    row = {
        **ROW,
        "instruction_positive": "Solve it in C++ with a heap.",
        "instruction_negative": "Solve it in C++ with recursion.",
    }
    assert check_row(row, domain="code", language="C++") is None
    assert check_row(row, domain="code", language="C") is not None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Answer: 3", 2),
        ("answer: [5]", 4),
        ("3", 2),
        ("[2]", 1),
        ("Passage 4", 3),
        ("Thinking about it, 2 is close but the best is\nAnswer: 6", 5),
        ("Answer: 8", None),  # out of range
        ("Answer: 0", None),
        ("", None),
        ("I would say 2 or 3", None),
        ("Several of them look fine to me honestly, I cannot decide which one of the passages.", None),
    ],
)
def test_parse_choice(raw, expected):
    assert parse_choice(raw, 7) == expected


def test_prompts_carry_their_task_and_domain_notes():
    cases = {
        "instruction": prompts.instruction_prompt("q", "p"),
        "poison_instruction": prompts.poison_instruction_prompt("q", "i", "p"),
        "poison_query": prompts.poison_query_prompt("q", "i", "p"),
        "negative_passage": prompts.negative_passage_prompt("q", "i", "p"),
        "judge": prompts.judge_prompt("q", "i", ["a", "b", "c"]),
    }
    for task, messages in cases.items():
        assert prompts.task_of(messages) == task
    assert "[3] c" in cases["judge"][1]["content"]
    code = prompts.poison_instruction_prompt("q", "i", "p", domain="code", language="Rust")
    assert "Keep Rust as the programming language" in code[0]["content"]
    maths = prompts.instruction_prompt("q", "p", domain="math")
    assert "mathematical method" in maths[0]["content"]
    with pytest.raises(ValueError, match="unknown domain"):
        prompts.instruction_prompt("q", "p", domain="legal")
    assert prompts.task_of([{"role": "user", "content": "hi"}]) is None
