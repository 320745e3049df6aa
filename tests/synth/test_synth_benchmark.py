"""``infembed synth benchmark``: an instruction benchmark built from the raw Cranfield collection (SMART files)
against our test server, read back by ``infembed eval``; every rejected query listed with its reason; a rerun
sends no request; JSON-constrained answers read like free-text ones.

Invariants: qrels_og.tsv holds the collection's judgments of the kept queries; qrels_changed.tsv differs
from it exactly in the documents the judge answered "no" to (set to 0); each kept query keeps at least one
document and loses at least one; the changed instruction starts with the original one, word for word."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from infembed.cli import app as root_app
from infembed.cli import evaluate as _evaluate  # noqa: F401  (registers "infembed eval")
from infembed.cli.synth import app
from infembed.data.benchmarks import load_benchmark
from infembed.data.errors import DataError
from infembed.data.jsonl import read_jsonl
from infembed.data.smart import load_smart
from infembed.synth import structured
from infembed.synth.benchmark import load_judged, parse_yes_no

runner = CliRunner()
N_QUERIES = 6


@pytest.fixture(scope="module")
def cranfield(data_dir):
    path = data_dir / "raw" / "cranfield"
    if not (path / "cranqrel").exists():
        pytest.skip(f"{path} not found")
    return path


def _build(cranfield, out, server, *extra):
    return runner.invoke(
        app,
        [
            "benchmark",
            str(cranfield),
            "--output",
            str(out),
            "--limit",
            str(N_QUERIES),
            "--base-url",
            server.base_url,
            "--model",
            "fake-gen",
            "--retry-base",
            "0.01",
            "--quiet",
            *extra,
        ],
    )


def test_builds_a_benchmark_from_cranfield_that_eval_reads(cranfield, server, tmp_path):
    out = tmp_path / "bench"
    result = _build(cranfield, out, server, "--exclusions")
    assert result.exit_code == 0, result.output
    assert "6 kept" in result.output and "per 1,000 queries" in result.output

    source = load_smart(cranfield)
    bench = load_benchmark(out)
    assert bench.has_changed and len(bench.queries) == N_QUERIES and len(bench.corpus) == 1400
    judged = {r["id"]: r["relevant"] for r in read_jsonl(out / "synth" / "judged.jsonl")}
    for qid, query in bench.queries.items():
        assert query.instruction_changed.startswith(query.instruction_og + " ")
        assert bench.qrels_og[qid] == source.qrels_og[qid]
        lost = {
            d for d, score in bench.qrels_og[qid].items() if score > 0 and bench.qrels_changed[qid][d] == 0
        }
        assert lost == {d for d, relevant in judged[qid].items() if not relevant}
        assert 0 < len(lost) < len(bench.qrels_og[qid])
    excl = load_benchmark(out / "exclusions")
    assert excl.qrels_changed == bench.qrels_changed
    for qid, query in excl.queries.items():
        assert query.instruction_og == bench.queries[qid].instruction_og
        assert "are not relevant" in query.instruction_changed
    readme = (out / "README.md").read_text()
    assert "## Method" in readme and f"kept: {N_QUERIES}" in readme

    summary = json.loads((out / "synth" / "summary.json").read_text())
    assert summary["rows"]["kept"] == N_QUERIES and summary["parseable_share"]["judge"] == 1.0
    n_docs = summary["documents"]["relevant_og"]
    assert summary["tokens"]["per_stage"]["judge"]["requests"] == n_docs  # one request per document
    assert server.stats()["by_task"] == {
        "benchmark_og": N_QUERIES,
        "benchmark_changed": N_QUERIES,
        "benchmark_judge": n_docs,
        "benchmark_exclusion": N_QUERIES,
    }
    assert summary["cost_usd"]["per_1000_queries"] is None  # "fake-gen" has no price
    assert summary["tokens"]["per_finished_query"]["prompt_tokens"] > 0

    results = tmp_path / "results"
    evaluated = runner.invoke(root_app, ["eval", "-b", str(out), "-r", "bm25", "-o", str(results)])
    assert evaluated.exit_code == 0, evaluated.output
    scores = json.loads(next(results.glob("*bm25.json")).read_text())
    assert scores["n_queries"] == N_QUERIES and scores["p-MRR"] is not None

    # a rerun sends nothing and writes the same benchmark
    before = {p.name: p.read_text() for p in out.iterdir() if p.is_file()}
    server.reset()
    again = _build(cranfield, out, server, "--exclusions")
    assert again.exit_code == 0, again.output
    assert server.stats()["requests"] == 0
    assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == before


def test_every_rejected_query_is_listed_with_its_reason(cranfield, server, tmp_path):
    collection = load_judged(cranfield, limit=N_QUERIES)
    first, second = collection.pairs[0], collection.pairs[1]
    server.configure(
        {
            "rules": [
                # the writer never gives a usable restriction for the first query
                {
                    "task": "benchmark_changed",
                    "contains": f"Query: {first.query}",
                    "reply": "empty",
                    "times": -1,
                },
                # the judge never says yes or no for the second query
                {
                    "task": "benchmark_judge",
                    "contains": f"Query: {second.query}",
                    "reply": "garbage",
                    "times": -1,
                },
            ]
        }
    )
    out = tmp_path / "bench"
    # max share 0.5: a query that keeps more than half of its documents is rejected by the selection
    result = _build(cranfield, out, server, "--max-kept-share", "0.5")
    assert result.exit_code == 0, result.output
    rejects = {r["id"]: r for r in read_jsonl(out / "synth" / "rejects.jsonl")}
    assert rejects[first.id]["stage"] == "changed" and "empty" in rejects[first.id]["reason"]
    assert rejects[second.id]["stage"] == "judge" and "no yes/no answer" in rejects[second.id]["reason"]
    summary = json.loads((out / "synth" / "summary.json").read_text())
    selected = [r for r in rejects.values() if r["stage"] == "select"]
    for reject in selected:
        assert reject["reason"].startswith("too many documents stay relevant")
    assert summary["rows"]["rejected"] == len(rejects) >= 2
    assert summary["rows"]["kept"] + summary["rows"]["rejected"] == N_QUERIES
    assert summary["stages"]["select"]["rejected"] == len(selected)
    assert summary["parseable_share"]["judge"] < 1.0
    kept = load_benchmark(out).queries if summary["rows"]["kept"] else {}
    assert set(kept).isdisjoint(rejects)
    readme = (out / "README.md").read_text() if kept else ""
    assert not kept or "judge: no yes/no answer" in readme


def test_json_constrained_answers_give_the_same_benchmark(cranfield, server, tmp_path):
    plain, constrained = tmp_path / "plain", tmp_path / "json"
    assert _build(cranfield, plain, server).exit_code == 0
    result = _build(cranfield, constrained, server, "--json-output", "json_object")
    assert result.exit_code == 0, result.output
    # the server answered JSON (it does only when response_format is sent) and the same texts came out
    assert (plain / "queries.jsonl").read_text() == (constrained / "queries.jsonl").read_text()
    assert (plain / "qrels_changed.tsv").read_text() == (constrained / "qrels_changed.tsv").read_text()
    bad = _build(cranfield, tmp_path / "bad", server, "--json-output", "yaml")
    assert bad.exit_code == 2 and "unknown JSON output mode 'yaml'" in bad.output


def test_structured_prompts_and_answers():
    from infembed.synth import prompts

    messages = prompts.benchmark_judge_prompt("q", "Only X.", "a document")
    rewritten = structured.json_messages(messages, "Answer", ("yes", "no"))
    assert rewritten[-1]["content"].endswith('{"answer": "<yes or no>"}')
    assert rewritten[0] == messages[0]
    fmt = structured.response_format("json_object", "Answer", ("yes", "no"))
    assert fmt["schema"]["properties"]["answer"] == {"type": "string", "enum": ["yes", "no"]}
    assert structured.response_format("json_schema", "Instruction")["json_schema"]["strict"] is True
    assert structured.response_format("off", "Instruction") is None
    judge = prompts.judge_prompt("q", "i", ["a", "b"])
    assert structured.json_messages(judge, "Answer")[-1]["content"].endswith('{"answer": <number>}')
    assert (
        structured.unwrap('```json\n{"instruction": "Prefer X."}\n```', "Instruction")
        == "Instruction: Prefer X."
    )
    assert structured.unwrap('{"answer": 3}', "Answer") == "Answer: 3"
    assert structured.unwrap('{"other": "x"}', "Answer") == '{"other": "x"}'
    assert structured.unwrap("not json", "Answer") == "not json"
    assert structured.unwrap('{"restriction": "<the added sentence>"}', "Restriction") == "Restriction: "
    assert structured.strip_label("**Restriction:** Only X.", "Restriction") == "Only X."
    with pytest.raises(ValueError, match="reply line"):
        structured.json_messages(judge, "Instruction")


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("Answer: yes", True),
        ("No.", False),
        ("**Answer:** No, it is about nozzles.", False),
        ("yes - it matches", True),
        ("The document is relevant, yes.", True),
        ("Maybe yes, maybe no.", None),
        ("It depends.", None),
        ("The document is not relevant. The instruction only covers spiders,", False),
        ("This document is relevant to the query.", True),
        ("Irrelevant.", False),
        ("Part is relevant, part is not relevant.", None),
    ],
)
def test_parse_yes_no(text, verdict):
    assert parse_yes_no(text) == verdict


def test_smart_reader_names_file_and_line(tmp_path):
    (tmp_path / "x.all.3").write_text(".I 1\n.T\nA title\n.W\nSome text\non two lines\n.I 2\n.W\nOther\n")
    (tmp_path / "x.qry").write_text(".I 001\n.W\nwhat is it\n.I 004\n.W\nand this\n")
    (tmp_path / "xrel").write_text("1 1 2\n1 2 4\n2 2 -1\n2 1\n")
    bench = load_smart(tmp_path)
    assert bench.corpus["1"].title == "A title" and bench.corpus["1"].text == "Some text on two lines"
    assert list(bench.queries) == ["1", "2"]  # by position: the .I numbers are not 1..n
    assert bench.qrels_og == {"1": {"1": 1}, "2": {"1": 1}}  # code 4 and -1 are not relevant
    (tmp_path / "xrel").write_text("1 1 2\n1 x\n")
    with pytest.raises(DataError, match=r"xrel.*line 2"):
        load_smart(tmp_path)
