"""Answers belong to the endpoint that gave them: the response cache and the run's identity hold the endpoint
(its normalised URL) and what it reports it serves (``GET /v1/models``), so two servers, or two models served
under one name (llama.cpp's ``--model local``), never share answers, and a run is not resumed against another
endpoint unless asked (``--allow-endpoint-change``). Every setting that changes rows is checked on resume;
settings that do not (concurrency, failures tolerated) are free. Two of our fake servers on 127.0.0.1 answer
the same prompts differently (each writes its tag into the instructions)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fake_openai_server import FakeOpenAIServer
from typer.testing import CliRunner

from infembed.cli.synth import app
from infembed.data.jsonl import read_jsonl
from infembed.synth.benchmark import BenchmarkBuilder, BenchmarkConfig
from infembed.synth.pipeline import Pipeline, SynthConfig

runner = CliRunner()


def _run(seed_dir, out, base_url, *extra, limit=3):
    return runner.invoke(
        app,
        ["run", str(seed_dir), "--output", str(out), "--limit", str(limit), "--base-url", base_url]
        + ["--model", "fake-gen", "--retry-base", "0.01", "--quiet", *extra],
    )


def _one_line(result):
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


@pytest.fixture()
def two_servers():
    with FakeOpenAIServer({"tag": "server-a"}) as a, FakeOpenAIServer({"tag": "server-b"}) as b:
        yield a, b


def _stop_before_the_judge(server):
    """The judge keeps failing: the run stops with rows half done (stages 1-3 recorded, no judge)."""
    server.configure({"tag": "server-a", "rules": [{"task": "judge", "status": 503, "times": -1}]})


def test_a_run_stopped_on_one_endpoint_is_not_resumed_on_another(two_servers, seed_dir, tmp_path):
    a, b = two_servers
    out = tmp_path / "run"
    _stop_before_the_judge(a)
    stopped = _run(seed_dir, out, a.base_url, "--max-retries", "0", "--max-consecutive-failures", "1")
    assert stopped.exit_code == 2 and "kept failing" in stopped.output, stopped.output
    assert read_jsonl(out / "instructions.jsonl")  # half-done rows on disk, from server A
    b.reset()

    refused = _run(seed_dir, out, b.base_url)
    assert refused.exit_code == 2
    line = _one_line(refused)
    assert "another endpoint" in line and a.base_url in line and b.base_url in line
    assert "--allow-endpoint-change" in line
    assert b.stats()["requests"] == 0 and not (out / "train.jsonl").read_text()

    allowed = _run(seed_dir, out, b.base_url, "--allow-endpoint-change")
    assert allowed.exit_code == 0, allowed.output
    rows = read_jsonl(out / "train.jsonl")
    assert len(rows) == 3
    # no row mixes answers of A with answers of B: the unfinished rows were made again, wholly on B
    for row in rows:
        assert "(from server-b)" in row["instruction_positive"], row
    run = json.loads((out / "run.json").read_text())
    assert run["endpoint"]["url"] == b.base_url
    assert [e["url"] for e in run["previous_endpoints"]] == [a.base_url]

    again = _run(seed_dir, out, b.base_url)  # the run now belongs to B: resumed without the flag
    assert again.exit_code == 0, again.output


def test_the_cache_is_keyed_by_endpoint(two_servers, seed_dir, tmp_path):
    a, b = two_servers
    cache = tmp_path / "shared.sqlite"
    assert _run(seed_dir, tmp_path / "on-a", a.base_url, "--cache", str(cache)).exit_code == 0
    requests_a = a.stats()["requests"]
    result = _run(seed_dir, tmp_path / "on-b", b.base_url, "--cache", str(cache))
    assert result.exit_code == 0, result.output
    assert b.stats()["requests"] == requests_a  # nothing answered from A's entries
    assert all(
        "(from server-b)" in r["instruction_positive"] for r in read_jsonl(tmp_path / "on-b" / "train.jsonl")
    )
    # the same endpoint again: everything from the cache, and /v1/models asked once per run
    a.reset()
    result = _run(seed_dir, tmp_path / "on-a-again", a.base_url, "--cache", str(cache))
    assert result.exit_code == 0 and a.stats()["requests"] == 0
    assert a.stats()["models"] == 1


def test_two_models_served_under_one_name_do_not_share_answers(seed_dir, tmp_path):
    """llama.cpp serves whatever file it was started with, under any model name (the docs say --model local)."""
    with FakeOpenAIServer(
        {"tag": "a-gguf", "models": [{"id": "/models/a.gguf", "owned_by": "llamacpp"}]}
    ) as server:
        out = tmp_path / "run"
        assert (
            _run(seed_dir, out, server.base_url, "--cache", str(tmp_path / "c.sqlite"), limit=2).exit_code
            == 0
        )
        server.configure({"tag": "b-gguf", "models": [{"id": "/models/b.gguf", "owned_by": "llamacpp"}]})
        server.reset()
        refused = _run(seed_dir, out, server.base_url, "--cache", str(tmp_path / "c.sqlite"), limit=3)
        assert refused.exit_code == 2 and "/models/b.gguf" in _one_line(refused)
        fresh = _run(seed_dir, tmp_path / "fresh", server.base_url, "--cache", str(tmp_path / "c.sqlite"))
        assert fresh.exit_code == 0 and server.stats()["requests"] > 0
        rows = read_jsonl(tmp_path / "fresh" / "train.jsonl")
        assert rows and all("(from b-gguf)" in r["instruction_positive"] for r in rows)


def test_every_setting_that_changes_rows_is_checked_on_resume(server, seed_dir, tmp_path):
    out = tmp_path / "run"
    assert _run(seed_dir, out, server.base_url, limit=2).exit_code == 0
    refused = _run(seed_dir, out, server.base_url, "--answer-attempts", "1")
    assert refused.exit_code == 2 and "answer_attempts=3 (now 1)" in _one_line(refused)
    assert json.loads((out / "run.json").read_text())["config"]["answer_attempts"] == 3
    # settings that do not change rows are free
    free = _run(seed_dir, out, server.base_url, "--concurrency", "3", "--rows-in-flight", "2")
    assert free.exit_code == 0, free.output
    free = _run(seed_dir, out, server.base_url, "--max-consecutive-failures", "9", "--timeout", "30")
    assert free.exit_code == 0, free.output


def test_each_setting_is_classified_for_resume():
    from infembed.synth.pipeline import FREE_ON_RESUME

    for cls, pipeline in ((SynthConfig, Pipeline), (BenchmarkConfig, BenchmarkBuilder)):
        names = {f.name for f in dataclasses.fields(cls)}
        assert set(pipeline.fingerprint) | set(FREE_ON_RESUME) == names, cls
        assert not set(pipeline.fingerprint) & set(FREE_ON_RESUME)
    assert set(FREE_ON_RESUME) == {"max_consecutive_failures", "rows_in_flight"}


def test_a_malformed_base_url_is_one_line_naming_the_flag(seed_dir, tmp_path):
    for url in ("http://[::1", "localhost:8000/v1", "ftp://host/v1", "http:///v1"):
        result = _run(seed_dir, tmp_path / "o", url)
        assert result.exit_code == 2, (url, result.output)
        line = _one_line(result)
        assert "--base-url" in line and url in line, line
