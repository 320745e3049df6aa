"""The ``infembed synth`` commands: a run against our server, clear one-line errors with exit status 2 (bad
input, a server that keeps failing), and ``stats`` side by side with keep rates and kappa."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from infembed.cli.synth import app
from infembed.data.jsonl import read_jsonl, write_jsonl

runner = CliRunner()


def _run(seed_dir, out, server, *extra):
    return runner.invoke(
        app,
        [
            "run",
            str(seed_dir),
            "--output",
            str(out),
            "--limit",
            "3",
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


def test_run_prints_a_summary_and_writes_rows(server, seed_dir, tmp_path):
    result = _run(seed_dir, tmp_path / "run", server, "--price", "fake-gen=1.0,2.0")
    assert result.exit_code == 0, result.output
    assert "rows: 3 in, 3 kept, 0 rejected, 0 unfinished" in result.output
    assert "this run: 24 requests, 0 cache hits" in result.output
    assert len(read_jsonl(tmp_path / "run" / "train.jsonl")) == 3
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    tokens = summary["tokens"]
    expected = (tokens["prompt_tokens"] * 1.0 + tokens["completion_tokens"] * 2.0) / 1e6
    assert abs(summary["cost_usd"]["all_answers"] - expected) < 1e-5
    assert summary["cost_usd"]["per_1000_pairs"] is not None


def test_expected_failures_exit_2_without_a_traceback(server, seed_dir, tmp_path):
    result = runner.invoke(
        app, ["run", str(tmp_path / "missing"), "--output", str(tmp_path / "o"), "--quiet"]
    )
    assert result.exit_code == 2
    assert "not found" in result.output and "Traceback" not in result.output

    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"query": "q", "passage": "p"}\n{"query": "q2"}\n')
    result = runner.invoke(app, ["run", str(bad), "--output", str(tmp_path / "o2"), "--quiet"])
    assert result.exit_code == 2 and "pairs.jsonl, line 2, field 'passage': missing" in result.output

    result = _run(seed_dir, tmp_path / "o3", server, "--domain", "legal")
    assert result.exit_code == 2 and "--domain must be one of web, code, math" in result.output

    server.configure({"fail_all": 503})
    result = _run(seed_dir, tmp_path / "down", server, "--max-retries", "1")
    assert result.exit_code == 2
    assert "the endpoint kept failing" in result.output and "HTTP 503" in result.output
    assert "Traceback" not in result.output
    assert (tmp_path / "down" / "summary.json").exists() and (tmp_path / "down" / "train.jsonl").exists()

    server.configure({"rules": [{"status": 401, "times": -1}]})
    result = _run(seed_dir, tmp_path / "auth", server)
    assert result.exit_code == 2 and "the endpoint refused the work: 401" in result.output


def test_stats_side_by_side_with_keep_rates_and_kappa(server, seed_dir, tmp_path):
    server.configure(
        {"rules": [{"task": "judge", "contains": "in plain terms, ref ", "reply": "wrong", "times": 1}]}
    )
    assert _run(seed_dir, tmp_path / "run", server).exit_code == 0
    other = tmp_path / "other.jsonl"
    write_jsonl(
        other,
        [
            {
                "query_positive": f"query number {i}",
                "instruction_positive": f"an instruction about thing {i}",
                "document_positive": f"a passage about thing {i}",
                "instruction_negative": f"another instruction {i}",
                "query_negative": f"other query {i}",
                "hard_negative_document_1": f"negative passage one {i}",
                "hard_negative_document_2": f"negative passage two {i}",
            }
            for i in range(5)
        ],
    )
    humans = tmp_path / "humans.jsonl"
    judged = read_jsonl(tmp_path / "run" / "judged.jsonl") + read_jsonl(tmp_path / "run" / "rejects.jsonl")
    items = [f"{r['id']}/{s}" for r in judged for s in ("pos", "inst_neg", "query_neg")]
    intended = {"pos": "P+", "inst_neg": "P1-", "query_neg": "P2-"}
    write_jsonl(humans, [{"item": i, "rater": "alice", "label": intended[i.split("/")[1]]} for i in items])
    result = runner.invoke(
        app,
        [
            "stats",
            str(tmp_path / "run"),
            str(other),
            "--no-aps",
            "--annotations",
            str(humans),
            "--judge-run",
            str(tmp_path / "run"),
            "--human",
            "alice",
            "--json",
            str(tmp_path / "stats.json"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "INGF-2" in result.output and "│ other " in result.output
    report = json.loads((tmp_path / "stats.json").read_text())
    assert report["diversity"]["samples"] == {"instruction": 4, "query": 4, "passage": 6}  # 2 kept rows vs 5
    assert report["keep_rates"]["run"]["judge"] == {"in": 3, "kept": 2, "rejected": 1, "keep_rate": 0.6667}
    # the judge agrees with alice on 8 of 9 items
    assert report["kappa"]["alice"]["judge:run"]["n"] == 9
    assert 0 < report["kappa_vs_humans"]["judge:run"] < 1

    result = runner.invoke(app, ["stats", str(tmp_path / "nothing.jsonl"), "--no-aps"])
    assert result.exit_code == 2 and "file not found" in result.output
