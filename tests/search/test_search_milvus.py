"""Tests of the Milvus vector store (``Index.build(..., store="milvus")``, ``infembed index --store milvus``), run
against Milvus Lite (a local ``.db`` file served in-process through pymilvus's MilvusClient: no server to start).

Invariants: a flat Milvus index gives the faiss flat index's ranking (same ids, scores within 1e-5) for plain
and exclusion-aware search; a build killed mid-way resumes and writes only what is missing, never a row twice;
a collection is refused to a model with another fingerprint, and to a build of other inputs; an index dir
holding only index.json is enough to search (documents come from the collection); the HTTP service over a
Milvus-backed index answers as the Python API over faiss does.
"""

from __future__ import annotations

import copy
import json
import shutil

import httpx
import numpy as np
import pytest
import torch
from background_server import BackgroundServer
from conftest import EXPECTED, SHARD_SIZE

from infembed.data.errors import DataError
from infembed.search import Index, IndexModelMismatch
from infembed.search.milvus import MilvusStore
from infembed.search.store import FAISS_NAME, META_NAME, SHARD_DIR, shard_path

TOLERANCE = 1e-5  # cosine scores lie in [-1, 1]: an absolute tolerance on the whole scale
EXCLUDING = [
    ("heat transfer in hypersonic flow", "Documents about bees are not relevant."),
    ("how do bees make honey", "Documents about hives are not relevant."),
    ("cryptocurrency mining", "Documents about inflation are not relevant."),
]


class _Killed(RuntimeError):
    pass


@pytest.fixture(scope="module")
def milvus_index(model, corpus_path, tmp_path_factory):
    root = tmp_path_factory.mktemp("milvus")
    return Index.build(
        model,
        corpus_path,
        root / "index",
        shard_size=SHARD_SIZE,
        store="milvus",
        uri=str(root / "milvus.db"),
        collection="corpus",
    )


def assert_same_hits(got, expected):
    for row_got, row_expected in zip(got, expected, strict=True):
        assert [h.id for h in row_got] == [h.id for h in row_expected]
        assert (
            np.abs(np.array([h.score for h in row_got]) - [h.score for h in row_expected]).max() <= TOLERANCE
        )
        assert [(h.title, h.text) for h in row_got] == [(h.title, h.text) for h in row_expected]


def assert_same_ranking(got, expected) -> int:
    """Like assert_same_hits, but two documents whose scores differ by less than the tolerance may swap (float
    sums in another order: faiss's BLAS vs the store's own kernel), and a near-tie at the cut may bring in another
    document. Returns the number of positions whose ids differ."""
    moved = 0
    for row_got, row_expected in zip(got, expected, strict=True):
        assert len(row_got) == len(row_expected)
        scores = np.array([h.score for h in row_got]), np.array([h.score for h in row_expected])
        assert np.abs(scores[0] - scores[1]).max() <= TOLERANCE  # rank by rank
        theirs = {h.id: h.score for h in row_expected}
        for hit in row_got:  # a document in both rankings has the same score; one in only one sits at the cut
            assert abs(hit.score - theirs.get(hit.id, scores[1][-1])) <= TOLERANCE, hit.id
        moved += sum(a.id != b.id for a, b in zip(row_got, row_expected))
    return moved


def test_index_dir_records_the_collection(milvus_index):
    meta = json.loads((milvus_index.path / META_NAME).read_text())
    assert meta["store"] == {
        "kind": "milvus",
        "uri": str(milvus_index.path.parent / "milvus.db"),
        "collection": "corpus",
    }
    assert meta["milvus"]["index_type"] == "FLAT" and meta["milvus"]["metric_type"] == "IP"
    assert not (milvus_index.path / FAISS_NAME).exists()
    recorded = milvus_index.vectors.properties()
    assert recorded["fingerprint"] == milvus_index.fingerprint and recorded["complete"] == "1"
    assert json.loads(recorded["meta"]) == meta  # the collection alone describes the index
    assert milvus_index.vectors.count == 30 and milvus_index.store == "milvus"


def test_flat_milvus_equals_faiss_flat(milvus_index, flat_index):
    queries, instructions = [q for q, _, _ in EXPECTED], [i for _, i, _ in EXPECTED]
    for k in (1, 5, 30, 50):  # 50 > count: both give the whole corpus
        assert_same_hits(
            milvus_index.search(queries, instructions, k=k, exclusions="off"),
            flat_index.search(queries, instructions, k=k, exclusions="off"),
        )
    assert [hits[0].id for hits in milvus_index.search(queries, instructions, k=1)] == [
        e for _, _, e in EXPECTED
    ]
    assert (
        np.abs(milvus_index.embeddings() - flat_index.embeddings()).max() == 0
    )  # the stored float32 vectors
    rows = np.array([29, 0, 7, 7])
    assert np.array_equal(milvus_index.vectors.reconstruct(rows), flat_index.vectors.reconstruct(rows))


def test_exclusion_aware_search_equal_on_both_stores(milvus_index, flat_index):
    queries, instructions = [q for q, _ in EXCLUDING], [i for _, i in EXCLUDING]
    assert all(split.exclude for split in flat_index.split(instructions))
    on = milvus_index.search(queries, instructions, k=10)
    assert_same_hits(on, flat_index.search(queries, instructions, k=10))
    off = milvus_index.search(queries, instructions, k=10, exclusions="off")
    assert any(
        [h.id for h in a] != [h.id for h in b] for a, b in zip(on, off)
    )  # the exclusion path really ran


def test_hnsw_on_milvus(model, corpus_path, tmp_path, flat_index):
    """HNSW through the same interface. (IVF_FLAT is left out here: Milvus Lite 3.2 drops the index parameters
    that pymilvus 3 sends, so its nlist/nprobe would not be the ones asked for.)"""
    index = Index.build(
        model, corpus_path, tmp_path / "hnsw", kind="hnsw", store="milvus", uri=str(tmp_path / "m.db")
    )
    assert index.meta["milvus"]["index_type"] == "HNSW"
    queries = [q for q, _, _ in EXPECTED]
    # 30 passages and ef >= k: the graph search is exhaustive, so exact here
    assert_same_hits(index.search(queries, k=10), flat_index.search(queries, k=10))
    index.set_search_params(ef_search=64)
    assert index.vectors.settings["ef_search"] == 64


def test_interrupted_build_resumes_without_duplicates(model, corpus_path, tmp_path, flat_index, monkeypatch):
    root, uri = tmp_path / "index", str(tmp_path / "milvus.db")

    def killing(done: int, total: int) -> None:
        if done == 2 * SHARD_SIZE:
            raise _Killed("simulated kill after two shards")

    with pytest.raises(_Killed):
        Index.build(
            model, corpus_path, root, shard_size=SHARD_SIZE, store="milvus", uri=uri, progress=killing
        )
    collection = MilvusStore(uri, "index")  # the default name: the index dir's
    assert collection.count == 2 * SHARD_SIZE and not (root / META_NAME).exists()
    with pytest.raises(DataError, match="did not finish.*resumes"):
        Index.load(root, model)

    encoded, upserted = [], []
    encode, upsert = model.encode_passages, MilvusStore.upsert

    def counting_encode(texts, **kwargs):
        encoded.append(len(texts))
        return encode(texts, **kwargs)

    def counting_upsert(self, lo, vectors, ids, docs):
        upserted.append((lo, len(ids)))
        return upsert(self, lo, vectors, ids, docs)

    monkeypatch.setattr(model, "encode_passages", counting_encode)
    monkeypatch.setattr(MilvusStore, "upsert", counting_upsert)
    resumed = Index.build(model, corpus_path, root, shard_size=SHARD_SIZE, store="milvus", uri=uri)
    assert encoded == [8, 6] and upserted == [(16, 8), (24, 6)]  # only shards 2 and 3
    assert resumed.vectors.count == 30
    assert_same_hits(
        resumed.search([q for q, _, _ in EXPECTED], k=30),
        flat_index.search([q for q, _, _ in EXPECTED], k=30),
    )

    # killed halfway through writing shard 0 (rows 3-5 missing), on a machine without the local shards:
    # only shard 0 is encoded and written again, by primary key, so no row is there twice
    collection.client.delete("index", filter="id >= 3 and id < 6")
    (root / META_NAME).unlink()
    for shard in range(4):
        shard_path(root, shard).unlink()
    encoded.clear(), upserted.clear()
    again = Index.build(model, corpus_path, root, shard_size=SHARD_SIZE, store="milvus", uri=uri)
    assert encoded == [8] and upserted == [(0, 8)]
    assert collection.count == 30 and collection.rows_present(0, 8) == 8
    assert sorted(
        collection.client.query("index", filter="id >= 0", output_fields=["id"]), key=lambda r: r["id"]
    ) == [{"id": i} for i in range(30)]
    # the shards are gone, so the embeddings come from the collection
    assert not all(shard_path(root, s).exists() for s in range(4)) and (root / SHARD_DIR).exists()
    assert np.array_equal(again.embeddings(), flat_index.embeddings())


def test_mismatched_model_refused(model, milvus_index, tmp_path):
    other = copy.deepcopy(model)
    with torch.no_grad():
        next(other.encoder.backbone.parameters())[0, 0] += 0.01
    with pytest.raises(IndexModelMismatch, match=f"fingerprint {model.fingerprint()}"):
        Index.load(milvus_index.path, other)
    # index.json may say one model while the shared collection was rebuilt with another: the collection decides
    meta = json.loads((milvus_index.path / META_NAME).read_text())
    meta["model"]["fingerprint"] = other.fingerprint()
    (tmp_path / "lying").mkdir()
    (tmp_path / "lying" / META_NAME).write_text(json.dumps(meta))
    with pytest.raises(
        IndexModelMismatch, match=f"Milvus collection 'corpus'.*fingerprint {model.fingerprint()}"
    ):
        Index.load(tmp_path / "lying", other)


def test_collection_of_another_build_refused(model, milvus_index, tmp_path):
    uri = milvus_index.meta["store"]["uri"]
    corpus = {"a": "One small document.", "b": "Another one."}
    with pytest.raises(DataError, match="'corpus' at .* holds another build.*choose another --collection"):
        Index.build(model, corpus, tmp_path / "other", store="milvus", uri=uri, collection="corpus")
    assert milvus_index.vectors.count == 30  # left as it was
    with pytest.raises(ValueError, match="collection name 'bad-name'"):
        Index.build(model, corpus, tmp_path / "other", store="milvus", uri=uri, collection="bad-name")
    with pytest.raises(ValueError, match="needs a URI"):
        Index.build(model, corpus, tmp_path / "other", store="milvus")
    with pytest.raises(ValueError, match="no vectors to put in Milvus"):
        Index.build(None, corpus, tmp_path / "other", kind="bm25", store="milvus", uri=uri)


def test_index_json_alone_is_enough(milvus_index, flat_index, tmp_path):
    """A replica needs only index.json (or the collection's copy of it): the documents come from the collection."""
    replica = tmp_path / "replica"
    replica.mkdir()
    (replica / META_NAME).write_text(milvus_index.vectors.properties()["meta"])
    # a collection is released when its Milvus Lite process ends (or by an operator): opening loads it again
    milvus_index.vectors.client.release_collection("corpus")
    index = Index.load(replica, milvus_index.model)
    queries = [q for q, _, _ in EXPECTED]
    assert_same_hits(index.search(queries, k=5), flat_index.search(queries, k=5))


def test_serve_over_milvus(milvus_index, flat_index):
    from infembed.search.service import create_app

    with (
        BackgroundServer(create_app(milvus_index, max_wait_ms=5)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        assert c.get("/health").status_code == 200
        for query, instruction in [(q, i) for q, i, _ in EXPECTED] + EXCLUDING:
            body = c.post("/search", json={"query": query, "instruction": instruction, "k": 5}).json()
            expected = flat_index.search(query, instruction, k=5)
            assert [h["id"] for h in body["hits"]] == [h.id for h in expected]
            assert max(abs(h["score"] - e.score) for h, e in zip(body["hits"], expected)) <= TOLERANCE


def test_cli_index_and_search_with_milvus(corpus_path, tmp_path, flat_index):
    import typer
    from typer.testing import CliRunner

    from infembed.cli.search import register

    app = typer.Typer()
    register(app)
    runner = CliRunner()
    out, uri = tmp_path / "idx", str(tmp_path / "m.db")
    args = ["index", "--corpus", str(corpus_path), "--output", str(out), "--shard-size", str(SHARD_SIZE)]
    result = runner.invoke(
        app, [*args, "--device", "cpu", "--store", "milvus", "--uri", uri, "--collection", "cli"]
    )
    assert result.exit_code == 0, result.output
    assert "collection cli at" in " ".join(result.stderr.split())
    query, instruction, first = EXPECTED[0]
    result = runner.invoke(
        app, ["search", "--index", str(out), "-q", query, "-I", instruction, "-k", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)["hits"]
    assert [h["id"] for h in hits] == [h.id for h in flat_index.search(query, instruction, k=3)]
    result = runner.invoke(app, [*args, "--uri", uri])
    assert result.exit_code == 2 and "--store milvus only" in result.output


@pytest.mark.slow
def test_cranfield_flat_milvus_equals_faiss_flat(model, data_dir, tmp_path):
    """The whole Cranfield collection (1,400 documents), every query with its changed instruction: the top 100
    of a flat Milvus index equals faiss flat's (ids, scores within 1e-5), with exclusions on and off."""
    from infembed.data.benchmarks import load_benchmark

    bench = load_benchmark(data_dir / "followir-cranfield")
    faiss_index = Index.build(model, bench.corpus, tmp_path / "faiss", batch_size=64)
    # the same shards (encoding is resumable), so the two builds differ only in the store
    shutil.copytree(
        faiss_index.path, tmp_path / "milvus", ignore=shutil.ignore_patterns(FAISS_NAME, META_NAME)
    )
    milvus_index = Index.build(
        model, bench.corpus, tmp_path / "milvus", store="milvus", uri=str(tmp_path / "m.db")
    )
    queries = [q.text for q in bench.queries.values()]
    instructions = [q.instruction_changed for q in bench.queries.values()]
    positions = moved = 0
    for exclusions in ("off", "rules"):
        got = milvus_index.search(queries, instructions, k=100, exclusions=exclusions)
        expected = faiss_index.search(queries, instructions, k=100, exclusions=exclusions)
        moved += assert_same_ranking(got, expected)
        positions += sum(len(row) for row in expected)
    assert positions == 2 * 40 * 100 and moved <= positions // 1000  # measured: 3 of 8,000 (near-ties)
