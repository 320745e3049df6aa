"""The whole pipeline on pairs of the shared msmarco-instructir-seed, through the real ``openai`` client and our
local server: valid InF-IR rows, the judge keeping and rejecting the right rows, bad answers retried then
rejected with a reason, cache hits on rerun, resume, and a failing server ending the run cleanly."""

from __future__ import annotations

import json

import pytest

from infembed.data.errors import DataError
from infembed.data.jsonl import read_jsonl
from infembed.data.records import TRIPLET_FIELDS, Triplet
from infembed.synth.inputs import load_seed
from infembed.synth.llm import LLMClient, OpenAIBackend, ResponseCache
from infembed.synth.pipeline import Pipeline, SynthAborted, SynthConfig, run_sync

N_PAIRS = 6


@pytest.fixture(scope="module")
def seed(seed_dir):
    return load_seed(str(seed_dir), limit=N_PAIRS)


def run(server, seed, out, cache=None, config=None, **client_kwargs):
    client_kwargs.setdefault("backoff_base", 0.01)
    client_kwargs.setdefault("max_retries", 2)
    client_kwargs.setdefault("concurrency", 4)
    client = LLMClient(
        OpenAIBackend(base_url=server.base_url, timeout=5),
        ResponseCache(cache or out / "cache.sqlite"),
        **client_kwargs,
    )
    return run_sync(
        Pipeline(seed, out, client, config or SynthConfig(model="fake-gen", judge_model="fake-judge"))
    )


def query_of(seed, i):
    return seed.pairs[i].query


def test_whole_pipeline_gives_valid_rows_and_the_judge_filters(server, seed, tmp_path):
    wrong = query_of(seed, 1)
    # only the (I+, Q+) scenario: I+ is the instruction with a "ref", Q+ the query
    server.configure(
        {
            "rules": [
                {
                    "task": "judge",
                    "contains": ["in plain terms, ref ", f"Query: {wrong}\n"],
                    "reply": "wrong",
                    "times": -1,
                }
            ]
        }
    )
    summary = run(server, seed, tmp_path)
    rows = read_jsonl(tmp_path / "train.jsonl")
    assert [r["id"] for r in rows] == [p.id for i, p in enumerate(seed.pairs) if i != 1]
    for row, pair in zip(rows, [p for i, p in enumerate(seed.pairs) if i != 1], strict=True):
        triplet = Triplet(**row)  # the InF-IR schema, nothing else
        assert set(row) == set(TRIPLET_FIELDS) | {"id", "query_id", "doc_id"}
        assert all(isinstance(row[f], str) and row[f].strip() and "\n" not in row[f] for f in TRIPLET_FIELDS)
        assert (triplet.query_positive, triplet.document_positive) == (pair.query, pair.passage)
        assert triplet.instruction_negative != triplet.instruction_positive
        assert triplet.query_negative != triplet.query_positive
    rejects = read_jsonl(tmp_path / "rejects.jsonl")
    assert [(r["id"], r["stage"]) for r in rejects] == [(seed.pairs[1].id, "judge")]
    assert rejects[0]["reason"].startswith("judge chose D") and "(I+, Q+)" in rejects[0]["reason"]
    judged = read_jsonl(tmp_path / "judged.jsonl")
    assert all(r["judge"] == {"pos": "P+", "inst_neg": "P1-", "query_neg": "P2-"} for r in judged)
    assert summary["rows"] == {"input": 6, "kept": 5, "rejected": 1, "unfinished": 0, "deferred_to_batch": 0}
    assert summary["stages"]["judge"] == {
        "in": 6,
        "kept": 5,
        "rejected": 1,
        "keep_rate": round(5 / 6, 4),
        "reasons": {"judge wrong on (I+, Q+)": 1},
    }
    # 8 requests a row: 1 instruction, 2 poison, 2 negatives, 3 judge
    assert server.stats()["requests"] == 8 * N_PAIRS
    assert summary["tokens"]["per_stage"]["judge"]["requests"] == 3 * N_PAIRS
    assert (
        summary["tokens"]["prompt_tokens"] > 0 and summary["cost_usd"]["all_answers"] is None
    )  # unknown model
    assert json.loads((tmp_path / "summary.json").read_text()) == summary


def test_rerun_with_the_cache_sends_no_request_and_gives_the_same_rows(server, seed, tmp_path):
    run(server, seed, tmp_path / "a", cache=tmp_path / "cache.sqlite")
    first = (tmp_path / "a" / "train.jsonl").read_text()
    server.reset()
    summary = run(server, seed, tmp_path / "b", cache=tmp_path / "cache.sqlite")
    assert server.stats()["requests"] == 0
    assert summary["this_run"]["total"]["cache_hits"] == 8 * N_PAIRS
    assert summary["this_run"]["total"]["requests"] == 0
    assert (tmp_path / "b" / "train.jsonl").read_text() == first
    # resuming a finished run directory does nothing at all
    server.reset()
    again = run(server, seed, tmp_path / "a", cache=tmp_path / "cache.sqlite")
    assert server.stats()["requests"] == 0 and again["this_run"]["total"]["cache_hits"] == 0
    assert (tmp_path / "a" / "train.jsonl").read_text() == first


def test_bad_answers_are_retried_then_rejected_with_a_reason(server, seed, tmp_path):
    q = [query_of(seed, i) for i in range(N_PAIRS)]
    server.configure(
        {
            "rules": [
                # row 0: a refusal once, then a good answer: kept
                {"task": "instruction", "contains": f"Query: {q[0]}\n", "reply": "refusal", "times": 1},
                # row 1: multi-line answers are cut at the first newline: kept
                {"task": "poison_query", "contains": f"Query: {q[1]}\n", "reply": "multiline", "times": -1},
                # row 2: always empty: rejected at stage 1
                {"task": "instruction", "contains": f"Query: {q[2]}\n", "reply": "empty", "times": -1},
                # row 3: the poisoned query repeats the positive one: rejected by the rules
                {"task": "poison_query", "contains": f"Query: {q[3]}\n", "reply": "echo", "times": -1},
                # row 4: the judge rambles once, then answers: kept; a passage cut off by the token limit
                {"task": "judge", "contains": f"Query: {q[4]}\n", "reply": "garbage", "times": 1},
                {"task": "negative_passage", "contains": f"Query: {q[4]}\n", "reply": "cut", "times": 1},
                # row 5: the judge never gives a number: rejected at the judge
                {"task": "judge", "contains": f"Query: {q[5]}\n", "reply": "garbage", "times": -1},
            ]
        }
    )
    summary = run(server, seed, tmp_path)
    kept = {r["id"] for r in read_jsonl(tmp_path / "train.jsonl")}
    ids = [p.id for p in seed.pairs]
    assert kept == {ids[0], ids[1], ids[4]}
    rejects = {r["id"]: r for r in read_jsonl(tmp_path / "rejects.jsonl")}
    assert rejects[ids[2]]["stage"] == "instruction"
    assert rejects[ids[2]]["reason"] == "instruction: empty answer (3 tries)"
    assert rejects[ids[2]]["usage"]["requests"] == 3
    assert rejects[ids[3]]["stage"] == "rules"
    assert rejects[ids[3]]["reason"] == "poisoned query equals the positive query"
    assert rejects[ids[5]]["stage"] == "judge" and "no passage number" in rejects[ids[5]]["reason"]
    row1 = next(r for r in read_jsonl(tmp_path / "train.jsonl") if r["id"] == ids[1])
    assert row1["query_negative"] == f"{q[1]} versus the alternatives"
    assert summary["stages"]["instruction"]["reasons"] == {"instruction: empty answer": 1}
    assert summary["stages"]["rules"]["rejected"] == 1


def test_json_fragments_markup_and_empty_choices_never_become_rows(server, seed, tmp_path):
    q = [query_of(seed, i) for i in range(N_PAIRS)]
    server.configure(
        {
            "rules": [
                # row 0: a JSON fragment once, then a good answer: kept
                {
                    "task": "poison_query",
                    "contains": f"Query: {q[0]}\n",
                    "reply": "json_fragment",
                    "times": 1,
                },
                # row 1: always a JSON fragment: rejected at the poison stage
                {
                    "task": "poison_query",
                    "contains": f"Query: {q[1]}\n",
                    "reply": "json_fragment",
                    "times": -1,
                },
                # row 2: always a proxy's 502 page: rejected
                {"task": "poison_query", "contains": f"Query: {q[2]}\n", "reply": "html", "times": -1},
                # row 3: twice a body with "choices": []: retried as a broken response, the first attempt answers
                {"task": "instruction", "contains": f"Query: {q[3]}\n", "reply": "no_choices", "times": 2},
                # row 4: a 502 page as a negative passage once: asked again, kept
                {"task": "negative_passage", "contains": f"Query: {q[4]}\n", "reply": "html", "times": 1},
            ]
        }
    )
    summary = run(server, seed, tmp_path)
    ids = [p.id for p in seed.pairs]
    rows = {r["id"]: r for r in read_jsonl(tmp_path / "train.jsonl")}
    assert set(rows) == {ids[0], ids[3], ids[4], ids[5]}
    assert rows[ids[0]]["query_negative"] == f"{q[0]} versus the alternatives"
    generated = set(TRIPLET_FIELDS) - {"query_positive", "document_positive"}
    assert all("<" not in r[f] and "{" not in r[f] for r in rows.values() for f in generated)
    rejects = {r["id"]: r for r in read_jsonl(tmp_path / "rejects.jsonl")}
    assert set(rejects) == {ids[1], ids[2]}
    assert rejects[ids[1]]["stage"] == "poison"
    assert rejects[ids[1]]["reason"] == "poisoned query: JSON fragment instead of text (3 tries)"
    assert rejects[ids[2]]["reason"] == "poisoned query: markup instead of text (3 tries)"
    # the empty choices cost retries, not answer attempts: one answer behind row 3's instruction
    instruction = {r["id"]: r for r in read_jsonl(tmp_path / "instructions.jsonl")}[ids[3]]
    assert instruction["usage"]["requests"] == 1
    assert summary["this_run"]["stages"]["instruction"]["retries"] == 2
    assert summary["stages"]["poison"]["reasons"] == {
        "poisoned query: JSON fragment instead of text": 1,
        "poisoned query: markup instead of text": 1,
    }


def test_resume_skips_done_rows_and_stages(server, seed, tmp_path):
    small = type(seed)(seed.pairs[:3], seed.distractors, seed.source)
    run(server, small, tmp_path)
    server.reset()
    summary = run(server, seed, tmp_path)  # three more pairs: only they are asked for
    assert server.stats()["requests"] == 8 * 3
    assert summary["rows"]["kept"] == N_PAIRS
    for name in ("instructions.jsonl", "poisoned.jsonl", "negatives.jsonl", "judged.jsonl"):
        ids = [r["id"] for r in read_jsonl(tmp_path / name)]
        assert sorted(ids) == sorted(p.id for p in seed.pairs)


def test_resume_with_other_settings_is_refused(server, seed, tmp_path):
    small = type(seed)(seed.pairs[:1], seed.distractors, seed.source)
    run(server, small, tmp_path, config=SynthConfig(model="fake-gen"))
    with pytest.raises(DataError, match="made with other settings: model='fake-gen'"):
        run(server, small, tmp_path, config=SynthConfig(model="other"))


def test_a_failing_server_ends_the_run_with_the_work_saved(server, seed, tmp_path):
    # the first rows go through, then the server fails for good
    small = type(seed)(seed.pairs[:2], seed.distractors, seed.source)
    run(server, small, tmp_path)
    server.configure({"fail_all": 500})
    with pytest.raises(SynthAborted) as info:
        run(server, seed, tmp_path, max_retries=1)
    message = str(info.value)
    assert "the endpoint kept failing" in message and "HTTP 500" in message
    assert "2 rows kept and 4 unfinished" in message and "run the same command again" in message
    assert [r["id"] for r in read_jsonl(tmp_path / "train.jsonl")] == [p.id for p in seed.pairs[:2]]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["rows"]["unfinished"] == 4
    assert not (tmp_path / "rejects.jsonl").exists()  # a failing server is not the rows' fault
    # the server recovers: the rerun finishes the job
    server.configure({})
    summary = run(server, seed, tmp_path)
    assert summary["rows"]["kept"] == N_PAIRS and summary["rows"]["unfinished"] == 0


def test_no_judge_and_code_domain(server, tmp_path):
    from infembed.synth.inputs import SeedData, SeedPair

    pairs = [
        SeedPair(
            f"c{i}",
            f"reverse a linked list number {i}",
            f"def reverse(head):\n    prev = None\n    while head:\n        head.next, prev, head = prev, head, head.next\n    return prev  # variant {i}",
            language="Python",
        )
        for i in range(2)
    ]
    config = SynthConfig(model="fake-gen", domain="code", judge=False)
    summary = run(server, SeedData(pairs, [p.passage for p in pairs], "code"), tmp_path, config=config)
    # the fake server's instructions never name Python: the rule for code drops them
    assert summary["rows"]["kept"] == 0
    rejects = read_jsonl(tmp_path / "rejects.jsonl")
    assert {r["reason"] for r in rejects} == {
        "instruction_positive does not name the programming language Python"
    }
    assert "judge" not in summary["stages"]
    assert server.stats()["by_task"].get("judge") is None
