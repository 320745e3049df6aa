"""Resume after SIGKILL: the CLI runs in a subprocess against our server, is killed with ``kill -9`` in the
middle of the run, and is started again; the result has no duplicate and no missing row and equals an
uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

from infembed.data.jsonl import read_jsonl
from infembed.synth.inputs import load_seed
from infembed.synth.llm import LLMClient, OpenAIBackend, ResponseCache
from infembed.synth.pipeline import Pipeline, SynthConfig, run_sync

N_PAIRS = 8


def _lines(path):
    return path.read_text().count("\n") if path.exists() else 0


def _command(seed_dir, out, base_url):
    return [
        sys.executable,
        "-m",
        "infembed.cli.synth",
        "run",
        str(seed_dir),
        "--output",
        str(out),
        "--limit",
        str(N_PAIRS),
        "--base-url",
        base_url,
        "--model",
        "fake-gen",
        "--concurrency",
        "2",
        "--retry-base",
        "0.01",
        "--quiet",
    ]


def test_sigkill_in_the_middle_then_rerun(server, seed_dir, tmp_path):
    server.configure({"latency": 0.03})
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        _command(seed_dir, out, server.base_url), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        if _lines(out / "judged.jsonl") >= 2:
            break
        time.sleep(0.02)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before = _lines(out / "judged.jsonl")
    assert 2 <= done_before < N_PAIRS
    assert not (out / "train.jsonl").exists()  # killed before the end: never half-written
    requests_before = server.stats()["answered"]

    server.configure({})
    result = subprocess.run(
        _command(seed_dir, out, server.base_url), env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    rows = read_jsonl(out / "train.jsonl")
    seed = load_seed(str(seed_dir), limit=N_PAIRS)
    assert [r["id"] for r in rows] == [p.id for p in seed.pairs]
    for name in ("instructions.jsonl", "poisoned.jsonl", "negatives.jsonl", "judged.jsonl"):
        counts = Counter(r["id"] for r in read_jsonl(out / name))
        assert set(counts) == {p.id for p in seed.pairs} and max(counts.values()) == 1, name
    # answers received before the kill came from the cache: far fewer than 8 requests a row were re-sent
    assert server.stats()["answered"] - requests_before < 8 * N_PAIRS  # the rerun re-used what was answered
    assert (
        server.stats()["answered"] <= 8 * N_PAIRS + 3 * 4
    )  # at most the judge requests of rows in flight twice

    # the same rows as a run that was never interrupted
    reference = tmp_path / "reference"
    client = LLMClient(
        OpenAIBackend(base_url=server.base_url), ResponseCache(reference / "cache.sqlite"), concurrency=4
    )
    run_sync(Pipeline(seed, reference, client, SynthConfig(model="fake-gen")))
    assert (out / "train.jsonl").read_text() == (reference / "train.jsonl").read_text()


def test_a_torn_last_line_is_cut_and_its_row_redone(server, seed_dir, tmp_path):
    seed = load_seed(str(seed_dir), limit=3)

    def go():
        client = LLMClient(OpenAIBackend(base_url=server.base_url), ResponseCache(tmp_path / "cache.sqlite"))
        return run_sync(Pipeline(seed, tmp_path, client, SynthConfig(model="fake-gen")))

    go()
    expected = (tmp_path / "train.jsonl").read_text()
    judged = tmp_path / "judged.jsonl"
    lines = judged.read_text().splitlines(keepends=True)
    judged.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # as a kill mid-write leaves it
    server.reset()
    summary = go()
    assert server.stats()["requests"] == 0  # the torn row's judge answers were cached
    assert summary["rows"]["kept"] == 3
    assert (tmp_path / "train.jsonl").read_text() == expected
    assert len(read_jsonl(judged)) == 3
