"""Synthesis against a real LLM server: llama.cpp's OpenAI-compatible server (llama-cpp-python) serving
SmolLM2-135M-Instruct on 127.0.0.1 (tests/synth/llama_server.py). Slow and marked ``llm``: ``make test-llm``
installs the server and runs them; without ``llama_cpp`` they skip with the reason.

* ``infembed synth run`` on 20 MS MARCO seed pairs, killed with SIGKILL in the middle and started again: every
  pair ends kept or rejected with a reason, no stage record is duplicated or missing, and a rerun sends no
  request (counted in the server's own access log).
* ``infembed synth benchmark`` on 3 Cranfield queries: every stage runs and every query is kept or rejected
  with a reason.

A 135M model writes poor data: these tests check the plumbing against a real server (its protocol, its
token counts, its JSON-constrained decoding), not the quality of what comes out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from llama_server import MODEL_ALIAS, LlamaServer, skip_reason

from infembed.data.jsonl import read_jsonl

pytestmark = [pytest.mark.slow, pytest.mark.llm]
N_PAIRS = 20


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with LlamaServer(tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server


def _lines(path):
    return path.read_text().count("\n") if path.exists() else 0


def _synth(*args):
    return [sys.executable, "-m", "infembed.cli.synth", *map(str, args), "--quiet"]


def test_synth_run_survives_sigkill_and_reruns_for_free(llama, seed_dir, tmp_path):
    out = tmp_path / "run"
    command = _synth(
        "run", seed_dir, "--output", out, "--limit", N_PAIRS, "--base-url", llama.base_url,
        "--model", MODEL_ALIAS, "--concurrency", 2, "--max-tokens", 60, "--distractors", 0,
        "--answer-attempts", 2, "--json-output", "json_object", "--timeout", 600, "--retry-base", 0.5,
    )  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 1200
    # mid-run: a few rows through stage 1 (written or rejected), most still to do
    while time.monotonic() < deadline and process.poll() is None:
        if _lines(out / "instructions.jsonl") + _lines(out / "rejects.jsonl") >= 6:
            break
        time.sleep(0.2)
    assert process.poll() is None, process.communicate()[0].decode()
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "train.jsonl").exists()  # killed mid-run

    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    ids = [r["id"] for r in read_jsonl(out / "instructions.jsonl")]
    rejects = read_jsonl(out / "rejects.jsonl") if (out / "rejects.jsonl").exists() else []
    kept = read_jsonl(out / "train.jsonl")
    assert summary["rows"]["input"] == N_PAIRS and summary["rows"]["unfinished"] == 0
    assert len(kept) + len(rejects) == N_PAIRS
    assert {r["id"] for r in kept}.isdisjoint(r["id"] for r in rejects)
    assert all(r["reason"] and r["stage"] for r in rejects)
    for name in ("instructions.jsonl", "poisoned.jsonl", "negatives.jsonl", "judged.jsonl", "rejects.jsonl"):
        if (out / name).exists():
            counts = Counter(r["id"] for r in read_jsonl(out / name))
            assert max(counts.values()) == 1, name
    assert len(ids) == len(set(ids))
    # the server's own count: a rerun of the finished run sends nothing
    before = llama.chat_requests()
    assert before >= summary["tokens"]["per_stage"]["instruction"]["requests"]
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert llama.chat_requests() == before
    assert json.loads((out / "summary.json").read_text())["this_run"]["total"]["requests"] == 0

    per_stage = summary["tokens"]["per_stage"]
    parseable = {
        s: round(1 - u.get("unusable", 0) / u["requests"], 3) for s, u in per_stage.items() if u["requests"]
    }
    reasons = {s: v["reasons"] for s, v in summary["stages"].items() if v["reasons"]}
    print(
        f"\nllama.cpp SmolLM2-135M, {N_PAIRS} pairs (JSON-constrained): {len(kept)} kept, {len(rejects)} "
        f"rejected {json.dumps(reasons)}; {N_PAIRS / seconds:.3f} rows/s over both runs ({seconds:.0f} s, "
        f"{before} requests); parseable answers per stage {parseable}"
    )


def test_synth_benchmark_runs_every_stage(llama, tmp_path, data_dir):
    cranfield = data_dir / "raw" / "cranfield"
    if not (cranfield / "cranqrel").exists():
        pytest.skip(f"{cranfield} not found")
    out = tmp_path / "bench"
    command = _synth(
        "benchmark", cranfield, "--output", out, "--limit", 3, "--max-relevant", 6, "--max-documents", 4,
        "--max-document-chars", 300, "--base-url", llama.base_url, "--model", MODEL_ALIAS,
        "--concurrency", 2, "--max-tokens", 80, "--answer-attempts", 2, "--json-output", "json_object",
        "--exclusions", "--timeout", 600,
    )  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "synth" / "summary.json").read_text())
    rows = summary["rows"]
    assert rows["input"] == 3 and rows["unfinished"] == 0 and rows["kept"] + rows["rejected"] == 3
    rejects = (
        read_jsonl(out / "synth" / "rejects.jsonl") if (out / "synth" / "rejects.jsonl").exists() else []
    )
    assert all(r["reason"] and r["stage"] for r in rejects)
    assert summary["tokens"]["per_stage"]["og"]["requests"] >= 3
    if rows["kept"]:
        assert (out / "qrels_changed.tsv").exists() and (out / "exclusions" / "queries.jsonl").exists()
    print(f"\nllama.cpp benchmark builder, 3 Cranfield queries: {json.dumps(summary['stages'])}")
