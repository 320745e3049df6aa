"""Tests of :class:`infembed.search.Index`.

Invariants: index -> search finds the expected document first on a small corpus, for every kind (flat, hnsw,
ivf, bm25) through the same interface; a build killed mid-way leaves no index.json, and the rerun encodes
only the missing (or torn) shards and gives bit-identical vectors; an index refuses a model whose fingerprint
differs from the one it was built with, naming both.
"""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest
import torch
from conftest import EXPECTED, SHARD_SIZE

from infembed.data.errors import DataError
from infembed.search import Hit, Index, IndexModelMismatch
from infembed.search.store import META_NAME, shard_path


def _top_ids(index: Index, k: int = 3) -> list[list[str]]:
    results = index.search([q for q, _, _ in EXPECTED], [i for _, i, _ in EXPECTED], k=k)
    return [[hit.id for hit in hits] for hits in results]


def test_flat_index_finds_expected_documents(flat_index):
    assert flat_index.kind == "flat" and flat_index.count == 30 and flat_index.dim == 384
    assert [ids[0] for ids in _top_ids(flat_index)] == [expected for _, _, expected in EXPECTED]
    hits = flat_index.search("heat transfer in hypersonic flow", k=5)
    assert len(hits) == 5 and isinstance(hits[0], Hit)
    assert hits[0].title == "Heat transfer in hypersonic flow" and "Mach 8" in hits[0].text
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
    assert 0.5 < hits[0].score <= 1.0 + 1e-5  # cosine


def test_scores_are_the_model_cosines(flat_index, model):
    query, instruction = "how do bees make honey", "Biology documents."
    hits = flat_index.search([query], [instruction], k=30)[0]
    assert len(hits) == 30  # k is clamped to the corpus
    q = model.encode_queries([query], [instruction])[0]
    embeddings = flat_index.embeddings()
    order = [json.loads(line)["_id"] for line in (flat_index.path / "docs.jsonl").read_text().splitlines()]
    expected = {doc_id: float(v) for doc_id, v in zip(order, embeddings @ q)}
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.id], abs=1e-5)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_kinds_same_interface(kind, model, corpus_path, tmp_path, flat_index, monkeypatch):
    # Starting from a copy of the flat index's dir: its shards are reused, nothing is encoded again.
    shutil.copytree(flat_index.path, tmp_path / kind)
    monkeypatch.setattr(
        model, "encode_passages", lambda *a, **k: pytest.fail("shards should have been reused")
    )
    # a finished index of other settings is not replaced by mistake: refused, and left whole
    with pytest.raises(
        DataError, match=f"holds a complete index built from other inputs \\(kind flat, not {kind}"
    ):
        Index.build(model, corpus_path, tmp_path / kind, kind=kind, shard_size=SHARD_SIZE)
    assert Index.load(tmp_path / kind, model).kind == "flat"
    index = Index.build(model, corpus_path, tmp_path / kind, kind=kind, shard_size=SHARD_SIZE, overwrite=True)
    monkeypatch.undo()
    assert index.kind == kind and index.count == 30
    assert _top_ids(index) == _top_ids(flat_index)  # tiny corpus: approximate search is exact here
    reopened = Index.load(tmp_path / kind, model, ef_search=16, nprobe=1)
    assert [ids[0] for ids in _top_ids(reopened)] == [e for _, _, e in EXPECTED]


def test_bm25_through_the_same_interface(bm25_index):
    assert bm25_index.kind == "bm25" and bm25_index.fingerprint is None
    hits = bm25_index.search("hypersonic heat transfer", k=5)
    assert hits[0].id == "hypersonic" and hits[0].title and hits[0].score > 0
    assert bm25_index.search("zzzz qqqq", k=5) == []  # no shared term: no results, not score-0 filler
    reopened = Index.load(bm25_index.path)
    assert [h.id for h in reopened.search("bitcoin blockchain", k=2)][0] == "bitcoin"


def test_search_arguments_checked(flat_index):
    with pytest.raises(ValueError, match="2 queries but 1 instructions"):
        flat_index.search(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="k must be at least 1"):
        flat_index.search("a", k=0)
    assert flat_index.search([], k=3) == []
    # an empty query is refused, not answered with hits chosen by the instruction or by nothing at all
    with pytest.raises(ValueError, match="the query is empty"):
        flat_index.search("   ", "documents on heat transfer", k=3)
    with pytest.raises(ValueError, match="query 2 is empty"):
        flat_index.search(["heat", ""], k=3)
    # a lone surrogate ("\\ud800" in JSON, undecodable bytes in argv) used to be a tokenizer TypeError traceback
    with pytest.raises(
        ValueError, match=r"the query holds a lone UTF-16 surrogate \(\\udced\) at character 6"
    ):
        flat_index.search("heat \udced", k=3)
    with pytest.raises(ValueError, match="instruction 2 holds a lone UTF-16 surrogate"):
        flat_index.search(["heat", "wings"], ["ok", "bad \ud800"], k=3)
    # search-time tuning is checked before any model is loaded (--ef-search 0 used to start a server)
    with pytest.raises(ValueError, match="ef_search must be a whole number >= 1; got 0"):
        Index.load(flat_index.path, ef_search=0)
    with pytest.raises(ValueError, match="nprobe must be a whole number >= 1; got -1"):
        flat_index.set_search_params(nprobe=-1)


class _Killed(RuntimeError):
    pass


def test_interrupted_build_resumes_with_identical_vectors(
    model, corpus_path, tmp_path, flat_index, monkeypatch
):
    root = tmp_path / "index"
    original = model.encode_passages
    calls = []

    def dying(texts, **kwargs):
        if len(calls) == 2:
            raise _Killed("simulated kill after two shards")
        calls.append(len(texts))
        return original(texts, **kwargs)

    monkeypatch.setattr(model, "encode_passages", dying)
    with pytest.raises(_Killed):
        Index.build(model, corpus_path, root, shard_size=SHARD_SIZE)
    assert not (root / META_NAME).exists()  # not loadable as a complete index
    assert shard_path(root, 0).exists() and shard_path(root, 1).exists() and not shard_path(root, 2).exists()
    with pytest.raises(DataError, match="did not finish.*resumes"):
        Index.load(root, model)

    counted = []

    def counting(texts, **kwargs):
        counted.append(len(texts))
        return original(texts, **kwargs)

    monkeypatch.setattr(model, "encode_passages", counting)
    resumed = Index.build(model, corpus_path, root, shard_size=SHARD_SIZE)
    assert counted == [8, 6]  # only shards 2 and 3 were encoded
    assert np.array_equal(resumed.embeddings(), flat_index.embeddings())
    assert _top_ids(resumed) == _top_ids(flat_index)

    # a torn shard (killed while the OS was writing it, on a filesystem without atomic rename) is redone
    last = shard_path(root, 3)
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 2])
    counted.clear()
    again = Index.build(model, corpus_path, root, shard_size=SHARD_SIZE)
    assert counted == [6]
    assert np.array_equal(again.embeddings(), flat_index.embeddings())

    # other inputs (here: another shard size) make the old shards stale: everything is encoded again
    counted.clear()
    Index.build(model, corpus_path, root, shard_size=16)
    assert counted == [16, 14]


def test_mismatched_model_refused(model, flat_index, tmp_path):
    other = copy.deepcopy(model)
    with torch.no_grad():
        next(other.encoder.backbone.parameters())[0, 0] += 0.01
    assert other.fingerprint() != model.fingerprint()
    with pytest.raises(
        IndexModelMismatch, match=f"built with model default \\(fingerprint {model.fingerprint()}"
    ):
        Index.load(flat_index.path, other)

    other.save(tmp_path / "perturbed")
    with pytest.raises(IndexModelMismatch, match="rebuild the index") as error:
        Index.load(flat_index.path, str(tmp_path / "perturbed"))
    assert str(tmp_path / "perturbed") in str(error.value)

    pooled = copy.deepcopy(model)
    pooled.config.pooling = "cls"  # same weights, other settings: other passage embeddings
    with pytest.raises(IndexModelMismatch):
        Index.load(flat_index.path, pooled)

    assert Index.load(flat_index.path, model).count == 30  # the right model is accepted
    # The query template shapes query texts only (passage vectors do not depend on it): allowed, and used.
    templated = copy.deepcopy(model)
    templated.config.template = "{instruction} {query}"
    index = Index.load(flat_index.path, templated)
    assert index.search("cryptocurrency mining", "Finance documents.", k=1)[0].id == "bitcoin"


def test_load_without_model_uses_the_recorded_one(flat_index):
    index = Index.load(flat_index.path)
    assert index.model.fingerprint() == flat_index.fingerprint
    assert _top_ids(index, k=1) == _top_ids(flat_index, k=1)


def test_bad_directories(tmp_path, corpus_path, model):
    with pytest.raises(FileNotFoundError, match="no such index"):
        Index.load(tmp_path / "missing")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(DataError, match="not an infembed index"):
        Index.load(tmp_path / "notes")
    with pytest.raises(DataError, match="refusing to write into it"):
        Index.build(model, corpus_path, tmp_path / "notes")
    with pytest.raises(DataError, match="todo.txt: is a file, so no index can be written under it"):
        Index.build(model, corpus_path, tmp_path / "notes" / "todo.txt" / "index")
    assert (tmp_path / "notes" / "todo.txt").read_text() == "mine"
    with pytest.raises(ValueError, match="kind must be one of"):
        Index.build(model, corpus_path, tmp_path / "x", kind="annoy")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "a", "text": "fine"}\n{"_id": "b"}\n')
    with pytest.raises(DataError, match="line 2.*text"):
        Index.build(model, bad, tmp_path / "y")


def test_in_memory_corpus(model, tmp_path):
    corpus = {"a": "the cat sat on the mat", "b": {"title": "Stars", "text": "nuclear fusion powers the sun"}}
    index = Index.build(model, corpus, tmp_path / "mem")
    assert index.search("what powers stars", k=1)[0].id == "b"
    assert index.document(1) == {"_id": "b", "title": "Stars", "text": "nuclear fusion powers the sun"}
