"""Exclusion-aware search on an index (Index.search, infembed search): the same ranking as exclusion-aware
evaluation, for BM25 and for dense indexes; plain instructions unchanged; the split is visible.

Invariants: on a BM25 index of the Cranfield collection, the top 10 of Index.search with exclusions equals the
top 10 of the evaluation's exclusion-aware run for every query of the adversarial benchmark; on flat, HNSW and IVF
dense indexes an excluded document moves down while a plain instruction gives exactly the plain hits.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infembed.data.benchmarks import load_benchmark
from infembed.evaluate.retrievers import BM25Retriever
from infembed.search import Index

CORPUS = {
    "electric": "Battery electric cars and their charging networks in cities.",
    "hybrid": "Hybrid cars combine a petrol engine with an electric motor for fuel economy.",
    "diesel": "Diesel cars and their fuel economy on long trips.",
    "bikes": "Commuting by bicycle in cities.",
    "batteries": "How long electric car batteries last and what they cost to replace.",
    "trains": "High speed trains between European cities.",
}


def _ids(hits):
    return [h.id for h in hits]


def test_bm25_index_equals_exclusion_aware_evaluation(data_dir, tmp_path):
    bench = load_benchmark(data_dir / "followir-cranfield-excl")
    index = Index.build(None, bench.corpus, tmp_path / "idx", kind="bm25")
    qids = [q for q in bench.queries if q in bench.qrels_og]
    queries = [bench.queries[q].text for q in qids]
    instructions = [bench.queries[q].instruction_changed for q in qids]
    retriever = BM25Retriever(exclusions="rules")
    retriever.index(bench.corpus)
    run = retriever.retrieve(qids, queries, instructions, top_k=10)
    hits = index.search(queries, instructions, k=10, exclusions="rules")  # the splitter the evaluation used
    for qid, row in zip(qids, hits):
        expected = sorted(run[qid], key=lambda d: (-run[qid][d], d))
        assert _ids(row) == expected or sorted(_ids(row)) == sorted(expected), qid
    plain = index.search(queries, instructions, k=10, exclusions="off")
    assert sum(_ids(a) != _ids(b) for a, b in zip(hits, plain)) >= 20  # exclusions really change rankings


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_dense_indexes_push_excluded_documents_down(kind, model, tmp_path):
    index = Index.build(
        model,
        CORPUS,
        tmp_path / kind,
        kind=kind,
        nlist=2 if kind == "ivf" else None,
        nprobe=2 if kind == "ivf" else None,
    )
    query = "cars and fuel economy"
    excluding = "Documents about electric cars are not relevant."
    on = _ids(index.search(query, excluding, k=6))
    off = _ids(index.search(query, excluding, k=6, exclusions="off"))
    assert on.index("electric") > off.index("electric") or on.index("electric") >= 4
    assert on.index("batteries") >= off.index("batteries")
    plain = "Any kind of car is relevant."
    with_rules = index.search(query, plain, k=6)
    without = index.search(query, plain, k=6, exclusions="off")
    assert [(h.id, h.score) for h in with_rules] == [(h.id, h.score) for h in without]
    assert index.split([excluding])[0].exclude == ["electric cars"]


def test_dense_index_matches_excluded_aspects_with_its_bm25_and_rebuilds_it_when_missing(model, tmp_path):
    """The dense default matches excluded aspects lexically (aspect_scorer="bm25"): the build writes bm25/ beside
    the vectors; an index without it (built before it existed) builds the same BM25 in memory."""
    import shutil

    index = Index.build(model, CORPUS, tmp_path / "flat")
    assert index.exclusion_settings("rules").aspect_scorer == "bm25" and (tmp_path / "flat" / "bm25").is_dir()
    query, excluding = "cars and fuel economy", "Documents about electric cars are not relevant."
    with_dir = [(h.id, h.score) for h in index.search(query, excluding, k=6)]
    shutil.rmtree(tmp_path / "flat" / "bm25")
    reopened = Index.load(tmp_path / "flat", model)
    rebuilt = [(h.id, h.score) for h in reopened.search(query, excluding, k=6)]
    assert [i for i, _ in rebuilt] == [i for i, _ in with_dir]
    assert max(abs(a - b) for (_, a), (_, b) in zip(rebuilt, with_dir)) <= 1e-5


def test_search_cli_shows_the_split_and_accepts_off(model, tmp_path):
    index_dir = tmp_path / "idx"
    Index.build(None, CORPUS, index_dir, kind="bm25")
    cli = Path(sys.executable).with_name("infembed")
    if not cli.exists():
        pytest.skip("infembed entry point not installed")
    args = [
        str(cli),
        "search",
        "-i",
        str(index_dir),
        "-q",
        "cars fuel economy",
        "-I",
        "Documents about electric cars are not relevant.",
        "--json",
    ]
    for flags, splitter in (
        ([], "auto"),
        (["--exclusions", "rules"], "rules"),
    ):  # the default, then the rules
        run = subprocess.run([*args, *flags], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        payload = json.loads(run.stdout)
        assert payload["split"]["exclude"] == ["electric cars"] and payload["exclusions"] == splitter
    bad = subprocess.run(
        [str(cli), "search", "-i", str(index_dir), "-q", "cars", "--exclusions", "regex"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        bad.returncode == 2 and "--exclusions must be one of" in bad.stderr and "Traceback" not in bad.stderr
    )


def test_service_applies_exclusions_per_request_and_shows_the_split(model, tmp_path):
    import concurrent.futures

    import httpx
    from background_server import BackgroundServer

    from infembed.search.service import create_app

    index = Index.build(model, CORPUS, tmp_path / "svc")
    app = create_app(index, max_wait_ms=20)
    query, excluding = "cars and fuel economy", "Documents about electric cars are not relevant."
    with BackgroundServer(app) as base, httpx.Client(base_url=base, timeout=60) as client:
        on = client.post("/search", json={"query": query, "instruction": excluding, "k": 6}).json()
        ruled = client.post(
            "/search", json={"query": query, "instruction": excluding, "k": 6, "exclusions": "rules"}
        ).json()
        off = client.post(
            "/search", json={"query": query, "instruction": excluding, "k": 6, "exclusions": "off"}
        ).json()
        assert on["exclusions"] == "auto" and on["split"]["exclude"] == ["electric cars"]  # the default
        assert ruled["exclusions"] == "rules" and ruled["split"]["exclude"] == ["electric cars"]
        assert off["exclusions"] == "off" and off.get("split") is None
        assert [h["id"] for h in on["hits"]] == _ids(index.search(query, excluding, k=6))
        assert [h["id"] for h in ruled["hits"]] == _ids(
            index.search(query, excluding, k=6, exclusions="rules")
        )
        assert [h["id"] for h in off["hits"]] == _ids(index.search(query, excluding, k=6, exclusions="off"))
        assert client.get("/health").json()["exclusions"]["splitter"] == "auto"
        bad = client.post("/search", json={"query": query, "exclusions": "regex"})
        assert bad.status_code == 422
        # concurrent requests with all modes batched together: each gets its own mode's ranking
        bodies = [
            {"query": query, "instruction": excluding, "k": 6, "exclusions": m}
            for m in ("auto", "rules", "off") * 6
        ]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda b: client.post("/search", json=b).json(), bodies))
        expected = {"auto": on, "rules": ruled, "off": off}
        for body, reply in zip(bodies, replies):
            assert reply["exclusions"] == body["exclusions"]
            assert [h["id"] for h in reply["hits"]] == [h["id"] for h in expected[body["exclusions"]]["hits"]]
