"""Tests of ``infembed index``, ``infembed search`` and ``infembed serve --help`` through typer's CliRunner.

Invariants: ``index`` then ``search --json`` finds the expected document first and gives the Python API's
scores; the table output names the document; bad input is one clear line and exit status 2, no traceback.
"""

from __future__ import annotations

import json

import pytest
import typer
from conftest import SHARD_SIZE
from typer.testing import CliRunner

from infembed.cli.search import register


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_index_then_search_json(cli, corpus_path, tmp_path, flat_index):
    runner = CliRunner()
    out = tmp_path / "idx"
    result = runner.invoke(
        cli,
        [
            "index",
            "--model",
            "default",
            "--corpus",
            str(corpus_path),
            "--output",
            str(out),
            "--shard-size",
            str(SHARD_SIZE),
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "indexed 30 documents" in result.stderr
    query, instruction = "heat transfer in hypersonic flow", "Only wind-tunnel experiments are relevant."
    result = runner.invoke(
        cli,
        [
            "search",
            "--index",
            str(out),
            "--query",
            query,
            "--instruction",
            instruction,
            "-k",
            "3",
            "--json",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["query"] == query and body["instruction"] == instruction
    assert [h["rank"] for h in body["hits"]] == [1, 2, 3]
    want = flat_index.search(query, instruction, k=3)
    assert [h["id"] for h in body["hits"]] == [h.id for h in want] and want[0].id == "hypersonic"
    assert body["hits"][0]["score"] == pytest.approx(want[0].score, abs=1e-5)

    result = runner.invoke(
        cli,
        [
            "search",
            "--index",
            str(out),
            "-q",
            "how do bees make honey",
            "-q",
            "bitcoin",
            "-k",
            "2",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "│ bees " in result.stdout
        and "│ bitcoin " in result.stdout
        and "how do bees make honey" in result.stdout
    )


def test_bm25_index_and_search(cli, corpus_path, tmp_path):
    runner = CliRunner()
    out = tmp_path / "bm25"
    assert (
        runner.invoke(
            cli, ["index", "--kind", "bm25", "--corpus", str(corpus_path), "--output", str(out)]
        ).exit_code
        == 0
    )
    result = runner.invoke(cli, ["search", "--index", str(out), "-q", "sourdough bread", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["hits"][0]["id"] == "bread"


def test_friendly_errors(cli, tmp_path, corpus_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["search", "--index", str(tmp_path / "nope"), "-q", "x"])
    assert result.exit_code == 2 and "no such index" in result.stderr and "Traceback" not in result.output
    result = runner.invoke(
        cli, ["index", "--corpus", str(corpus_path), "--output", str(tmp_path / "o"), "--kind", "annoy"]
    )
    assert result.exit_code == 2 and "kind must be one of" in result.stderr
    result = runner.invoke(
        cli, ["search", "--index", str(tmp_path), "-q", "a", "-q", "b", "-I", "x", "-I", "y", "-I", "z"]
    )
    assert result.exit_code == 2 and "2 --query but 3 --instruction" in result.stderr
    result = runner.invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0 and "--api-key" in result.stdout and "127.0.0.1" in result.stdout


@pytest.mark.parametrize("how", ["flag", "env"])
def test_serve_refuses_an_empty_api_key(cli, flat_index, how):
    """An empty key (``--api-key ""`` or ``INFEMBED_API_KEY=``) used to turn authentication off silently."""
    runner = CliRunner()
    args = ["serve", "--index", str(flat_index.path), "--port", "1"]
    if how == "flag":
        result = runner.invoke(cli, [*args, "--api-key", ""])
    else:
        result = runner.invoke(cli, args, env={"INFEMBED_API_KEY": ""})
    assert result.exit_code == 2, result.output
    assert "API key is empty" in result.output


def test_search_writes_a_trec_run_and_never_replaces_one_silently(cli, corpus_path, tmp_path):
    from infembed.data.formats import read_trec_run

    runner = CliRunner()
    out = tmp_path / "bm25-idx"
    assert (
        runner.invoke(
            cli, ["index", "--kind", "bm25", "--corpus", str(corpus_path), "--output", str(out)]
        ).exit_code
        == 0
    )
    trec = tmp_path / "run.trec"
    args = [
        "search",
        "--index",
        str(out),
        "-q",
        "sourdough bread",
        "-q",
        "bread",
        "-k",
        "3",
        "--json",
        "--trec",
        str(trec),
    ]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    hits = [[(h["id"], h["score"]) for h in r["hits"]] for r in json.loads(result.stdout)["results"]]
    run = read_trec_run(trec)
    assert list(run) == ["1", "2"]
    for qid, query_hits in zip(("1", "2"), hits):
        assert run[qid] == dict(query_hits)  # the scores read back exactly
    assert {line.split()[5] for line in trec.read_text().splitlines()} == {"bm25-idx"}
    before = trec.read_bytes()
    refused = runner.invoke(cli, [*args[:-2], "--trec", str(trec)])
    assert refused.exit_code == 2 and "--overwrite" in refused.stderr and "Traceback" not in refused.output
    assert trec.read_bytes() == before
    assert runner.invoke(cli, [*args, "--overwrite"]).exit_code == 0
