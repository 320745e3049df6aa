"""``--backend`` on every verb that encodes: ``eval``, ``index``, ``search`` (typer's CliRunner) and ``serve`` (the
installed entry point on a real port), on a tiny real model. An index built with one backend is searched with
the other; a backend that cannot run is one line and exit status 2 before anything loads."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

pytest.importorskip(
    "openvino", reason="the openvino extra is not installed (pip install 'infembed[openvino]')"
)

sys.path.insert(0, str(Path(__file__).parents[1] / "evaluate"))
from tiny_benchmark import write_benchmark  # noqa: E402

from infembed.cli.evaluate import eval_command  # noqa: E402
from infembed.cli.search import register  # noqa: E402

CORPUS = Path(__file__).parents[1] / "search" / "fixtures" / "corpus.jsonl"
INFEMBED = Path(sys.executable).with_name("infembed")
QUERY, INSTRUCTION = "heat transfer in hypersonic flow", "Only wind-tunnel experiments are relevant."


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("eval")(eval_command)
    register(app)
    return app


def run(cli, *args) -> object:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_eval_with_openvino_scores_like_torch(cli, tiny_model, tmp_path):
    bench = write_benchmark(tmp_path / "bench")
    out = tmp_path / "results"
    run(cli, "eval", "-b", bench, "-m", tiny_model, "-o", out, "--no-cache")
    run(cli, "eval", "-b", bench, "-m", tiny_model, "-o", out, "--no-cache", "--backend", "openvino")
    files = sorted(out.glob("*.json"))
    assert [f.name.endswith("__openvino.json") for f in files].count(True) == 1, files  # its own file
    torch_run, ov_run = sorted(
        (json.loads(f.read_text()) for f in files), key=lambda r: r["backend"] != "torch"
    )
    assert (torch_run["backend"], ov_run["backend"]) == ("torch", "openvino")
    assert ov_run["p-MRR"] == pytest.approx(torch_run["p-MRR"], abs=1e-6)
    assert ov_run["og"]["map_at_1000"] == pytest.approx(torch_run["og"]["map_at_1000"], abs=1e-6)


def hits(cli, index, backend) -> list[tuple[str, float]]:
    args = ["search", "--index", index, "-q", QUERY, "-I", INSTRUCTION, "-k", "5", "--json"]
    result = run(cli, *args, *(["--backend", backend] if backend else []))
    return [(hit["id"], hit["score"]) for hit in json.loads(result.stdout)["hits"]]


def same_hits(a, b) -> bool:
    return [i for i, _ in a] == [i for i, _ in b] and all(abs(x - y) < 1e-5 for (_, x), (_, y) in zip(a, b))


@pytest.fixture(scope="module")
def indexes(cli, tiny_model, tmp_path_factory) -> dict[str, Path]:
    """The fixture corpus indexed with each backend."""
    root = tmp_path_factory.mktemp("indexes")
    for backend in ("torch", "openvino"):
        run(cli, "index", "-m", tiny_model, "-c", CORPUS, "-o", root / backend, "--backend", backend)
    return {backend: root / backend for backend in ("torch", "openvino")}


def test_index_and_search_with_either_backend_find_the_same(cli, indexes):
    reference = hits(cli, indexes["torch"], None)
    assert len(reference) == 5
    for index in indexes.values():  # built with either backend, searched with either
        for backend in ("torch", "openvino"):
            assert same_hits(hits(cli, index, backend), reference), (index, backend)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_with_openvino(cli, indexes, tmp_path):
    httpx = pytest.importorskip("httpx")
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    port = free_port()
    args = ["serve", "--index", indexes["torch"], "--port", port, "--backend", "openvino"]
    log = open(tmp_path / "serve.log", "w+")
    server = subprocess.Popen([str(INFEMBED), *map(str, args)], stdout=log, stderr=subprocess.STDOUT)
    try:
        url, deadline, health = f"http://127.0.0.1:{port}", time.monotonic() + 180, None
        while health is None:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "serve did not start"
            try:
                health = httpx.get(f"{url}/health", timeout=5).json()
            except httpx.TransportError:
                time.sleep(0.5)
        assert health["backend"] == "openvino"
        found = httpx.post(
            f"{url}/search", json={"query": QUERY, "instruction": INSTRUCTION, "k": 5}, timeout=60
        ).json()
        served = [(hit["id"], hit["score"]) for hit in found["hits"]]
        assert same_hits(served, hits(cli, indexes["torch"], "torch")), served
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.mark.parametrize(
    "verb",
    [
        ["eval", "-b", "absent-benchmark"],
        ["index", "-c", "absent.jsonl", "-o", "absent-index"],
        ["search", "--index", "absent-index", "-q", "x"],
        ["serve", "--index", "absent-index"],
    ],
)
def test_an_unknown_backend_is_one_line_before_anything_loads(cli, tmp_path, verb):
    result = CliRunner().invoke(cli, [*verb, "--backend", "onnx"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "backend must be one of torch, openvino, got 'onnx'" in lines[0], lines
    assert not (tmp_path / "absent-index").exists()
