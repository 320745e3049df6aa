"""The ``infembed synth`` commands: a run against our server, clear one-line errors with exit status 2 (bad
input, a server that keeps failing or is not running), text printed as it is (no Rich markup), and ``stats``
side by side with keep rates and kappa."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
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
    assert result.exit_code == 2 and "domain must be one of web, code, math" in result.output

    (tmp_path / "afile").write_text("keep\n")
    result = _run(seed_dir, tmp_path / "afile" / "run", server)
    assert result.exit_code == 2 and "afile: is a file, so nothing can be written there" in result.output
    assert (tmp_path / "afile").read_text() == "keep\n"

    server.configure({"fail_all": 503})
    result = _run(seed_dir, tmp_path / "down", server, "--max-retries", "1")
    assert result.exit_code == 2
    assert "the endpoint kept failing" in result.output and "HTTP 503" in result.output
    assert "Traceback" not in result.output
    assert (tmp_path / "down" / "summary.json").exists() and (tmp_path / "down" / "train.jsonl").exists()

    server.configure({"rules": [{"status": 401, "times": -1}]})
    result = _run(seed_dir, tmp_path / "auth", server)
    assert result.exit_code == 2 and "the endpoint refused the work: 401" in result.output


def test_brackets_in_paths_and_endpoint_errors_are_printed_as_they_are(server, seed_dir, tmp_path):
    # Rich would read "[/bold]" as a closing tag and fail with MarkupError (exit 1)
    odd = tmp_path / "runs [/bold] [red]"
    result = _run(seed_dir, odd / "run", server)
    assert result.exit_code == 0, result.output
    assert "rows: 3 in, 3 kept, 0 rejected, 0 unfinished" in result.output

    result = runner.invoke(app, ["run", str(odd / "missing"), "--output", str(odd / "o"), "--quiet"])
    assert result.exit_code == 2 and "runs [/bold] [red]/missing" in result.output

    server.configure({"rules": [{"status": 401, "message": "bad key [/bold] [link=x]", "times": -1}]})
    result = _run(seed_dir, odd / "auth", server)
    assert result.exit_code == 2, result.output
    assert "the endpoint refused the work: 401: bad key [/bold] [link=x]" in result.output
    assert "Traceback" not in result.output


def test_a_server_that_is_not_running_fails_fast_with_one_line_naming_it(seed_dir, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    started = time.monotonic()
    result = runner.invoke(
        app,
        ["run", str(seed_dir), "--output", str(tmp_path / "o"), "--limit", "3", "--base-url", url]
        + ["--retry-base", "0.2", "--quiet"],
    )
    elapsed = time.monotonic() - started
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot connect to {url} "), result.output
    assert "Traceback" not in result.output
    assert elapsed < 3.0  # 6 retries with backoff would take 6-13 s here (~46 s with the default 1 s)


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


def _unprivileged(command: list[str]) -> list[str]:
    """``command`` run without the right to write where the mode bits forbid it (root has it: dropped)."""
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot make a directory unwritable")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]


def test_an_unwritable_output_is_one_line_naming_it(server, seed_dir, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "old-run").mkdir()
    locked.chmod(0o555)
    (locked / "old-run").chmod(0o555)
    try:
        for out in (locked / "run", locked / "old-run"):
            command = [sys.executable, "-m", "infembed.cli.synth", "run", str(seed_dir), "--output", str(out)]
            command += ["--limit", "2", "--base-url", server.base_url, "--quiet"]
            result = subprocess.run(_unprivileged(command), capture_output=True, text=True, timeout=120)
            assert result.returncode == 2, result.stderr
            lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
            assert len(lines) == 1 and str(out) in lines[0], lines
            assert "ermission denied" in lines[0]
    finally:
        locked.chmod(0o755)
        (locked / "old-run").chmod(0o755)
