"""Batch API round trip through the CLI: export the requests a run needs, answer them as the Batch API would
(our server plays OpenAI's batch worker), import the output file, repeat until nothing is left; the rows
equal those of a direct run."""

from __future__ import annotations

import json

import httpx
import pytest
from typer.testing import CliRunner

from infembed.cli.synth import app
from infembed.data.errors import DataError
from infembed.data.jsonl import read_jsonl, write_jsonl
from infembed.synth.batchfile import import_batch_results, write_batch_files
from infembed.synth.inputs import load_seed
from infembed.synth.llm import ChatRequest, LLMClient, OpenAIBackend, ResponseCache
from infembed.synth.pipeline import Pipeline, SynthConfig, run_sync

N_PAIRS = 3
runner = CliRunner()


def _run_batch(server, batch_file, output_file, fail_first=False):
    """What OpenAI's batch worker does: POST each body, write one output line per request."""
    lines = []
    with httpx.Client(base_url=server.base_url.removesuffix("/v1"), timeout=10) as http:
        for i, request in enumerate(read_jsonl(batch_file)):
            assert request["method"] == "POST" and request["url"] == "/v1/chat/completions"
            if fail_first and i == 0:
                lines.append(
                    {
                        "id": f"batch_req_{i}",
                        "custom_id": request["custom_id"],
                        "response": {
                            "status_code": 500,
                            "body": {"error": {"message": "server had an error"}},
                        },
                        "error": None,
                    }
                )
                continue
            answer = http.post(request["url"], json=request["body"])
            lines.append(
                {
                    "id": f"batch_req_{i}",
                    "custom_id": request["custom_id"],
                    "response": {
                        "status_code": answer.status_code,
                        "request_id": f"r{i}",
                        "body": answer.json(),
                    },
                    "error": None,
                }
            )
    write_jsonl(output_file, lines)


def test_export_import_round_trip_gives_the_rows_of_a_direct_run(server, seed_dir, tmp_path):
    out, cache = tmp_path / "run", tmp_path / "run" / "cache.sqlite"
    common = [str(seed_dir), "--output", str(out), "--limit", str(N_PAIRS), "--model", "fake-gen"]
    rounds, per_round = 0, []
    while True:
        batch = tmp_path / f"requests-{rounds}.jsonl"
        result = runner.invoke(app, ["export-batch", *common, "--batch-file", str(batch)])
        assert result.exit_code == 0, result.output
        if not batch.exists():
            assert "no request left: the run is complete (3 rows" in result.output
            break
        lines = read_jsonl(batch)
        per_round.append(len(lines))
        assert len({line["custom_id"] for line in lines}) == len(lines)
        results = tmp_path / f"results-{rounds}.jsonl"
        _run_batch(server, batch, results, fail_first=rounds == 0)
        result = runner.invoke(app, ["import-batch", str(results), "--cache", str(cache)])
        assert result.exit_code == 0, result.output
        if rounds == 0:
            assert "1 requests failed in the batch" in result.output
        rounds += 1
        assert rounds < 10
    # instruction (one failed: asked again with the poison requests of the others), poison, negatives, judge
    assert per_round == [N_PAIRS, 1 + 2 * (N_PAIRS - 1), 2 * 1 + 2 * (N_PAIRS - 1), 3 * (N_PAIRS - 1) + 2, 3]
    reference = tmp_path / "direct"
    seed = load_seed(str(seed_dir), limit=N_PAIRS)
    client = LLMClient(OpenAIBackend(base_url=server.base_url), ResponseCache(reference / "cache.sqlite"))
    run_sync(Pipeline(seed, reference, client, SynthConfig(model="fake-gen")))
    assert (out / "train.jsonl").read_text() == (reference / "train.jsonl").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cost_usd"]["batch_prices"] is True


def test_import_batch_names_the_line_of_output_it_cannot_read(tmp_path):
    answer = {"choices": [{"message": {"content": "Instruction: hi"}, "finish_reason": "stop"}]}
    good = {"custom_id": "a" * 64, "response": {"status_code": 200, "body": answer}}
    results, cache = tmp_path / "output.jsonl", tmp_path / "c.sqlite"
    for bad, where in [
        ({"response": "oops"}, "line 2, field 'response': expected an object"),
        (
            {"response": {"status_code": 200, "body": {"choices": ["x"]}}},
            "line 2, field 'response.body.choices[0]'",
        ),
        (
            {"response": {"status_code": 200, "body": {"choices": [{"message": 1}]}}},
            "line 2, field 'response.body.choices[0].message'",
        ),
    ]:
        write_jsonl(results, [good, {"custom_id": "b" * 64, **bad}])
        result = runner.invoke(app, ["import-batch", str(results), "--cache", str(cache)])
        assert result.exit_code == 2, result.output
        assert f"output.jsonl, {where}" in result.output and "Traceback" not in result.output
    # "choices": [] is a broken answer, not an empty one: reported and not cached, so it is exported again
    write_jsonl(
        results, [good, {"custom_id": "c" * 64, "response": {"status_code": 200, "body": {"choices": []}}}]
    )
    with ResponseCache(tmp_path / "fresh.sqlite") as fresh:
        report = import_batch_results([results], fresh)
        assert (
            report.imported == 1 and "c" * 64 not in fresh and fresh.get("a" * 64).text == "Instruction: hi"
        )
    assert report.errors == [
        {"custom_id": "c" * 64, "status": 200, "message": "malformed response: no choices"}
    ]


def test_batch_files_are_split_and_bad_results_are_named(tmp_path):
    requests = [ChatRequest.build("m", [{"role": "user", "content": str(i)}]) for i in range(5)]
    files = write_batch_files(tmp_path / "req.jsonl", requests, max_per_file=2)
    assert [f.name for f in files] == ["req-001.jsonl", "req-002.jsonl", "req-003.jsonl"]
    assert sum(len(read_jsonl(f)) for f in files) == 5
    assert write_batch_files(tmp_path / "none.jsonl", []) == []
    bad = tmp_path / "bad.jsonl"
    write_jsonl(bad, [{"custom_id": "request-1", "response": {"status_code": 200, "body": {"choices": []}}}])
    with (
        ResponseCache(tmp_path / "c.sqlite") as cache,
        pytest.raises(DataError, match="bad.jsonl, line 1, field 'custom_id'"),
    ):
        import_batch_results([bad], cache)
