"""Seed inputs (BEIR dir, JSONL of pairs, MS MARCO from the hub with a stand-in ``datasets``), prices, and the
optional local transformers backend."""

from __future__ import annotations

import os
import sys
import types

import pytest

from infembed.data.errors import DataError
from infembed.data.jsonl import write_jsonl
from infembed.synth.costs import Price, parse_price, price_for
from infembed.synth.inputs import load_seed, read_beir_dir, read_pairs_jsonl


def test_shared_seed_dir(seed_dir):
    seed = read_beir_dir(seed_dir, limit=4)
    assert [p.id for p in seed.pairs] == ["320792", "1101276", "372586", seed.pairs[3].id]
    assert seed.pairs[0].query == "how much is a cost to run disneyland"
    assert seed.pairs[0].passage.startswith("Disney's Theme Parks had an operating cost")
    assert (seed.pairs[0].query_id, seed.pairs[0].doc_id) == ("320792", "7067677")
    assert len(seed.distractors) == 1743


def _beir(tmp_path, qrels):
    write_jsonl(
        tmp_path / "corpus.jsonl", [{"_id": "d1", "title": "T", "text": "one"}, {"_id": "d2", "text": "two"}]
    )
    write_jsonl(tmp_path / "queries.jsonl", [{"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}])
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text(qrels)
    return tmp_path


def test_beir_dir_with_several_positives_and_zero_scores(tmp_path):
    root = _beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t2\nq2\td2\t0\n")
    seed = read_beir_dir(root)
    assert [(p.id, p.passage) for p in seed.pairs] == [("q1-d1", "T one"), ("q1-d2", "two")]


def test_beir_dir_gives_synthesis_the_passages_evaluation_scores(tmp_path):
    """One rule for title + text: synthesis reads a BEIR dir's passages exactly as evaluation embeds them."""
    from infembed.data.benchmarks.local import load_beir

    root = _beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    seed = read_beir_dir(root)
    corpus = load_beir(root).corpus
    assert [p.passage for p in seed.pairs] == [corpus[p.doc_id].full_text() for p in seed.pairs]
    assert seed.pairs[0].passage == "T one"  # not "T. one"
    assert seed.distractors == [doc.full_text() for doc in corpus.values()]


def test_beir_dir_errors_name_the_line(tmp_path):
    root = _beir(tmp_path, "q1\td9\t1\n")
    with pytest.raises(DataError, match=r"test.tsv, line 1: document 'd9' is not in corpus.jsonl"):
        read_beir_dir(root)
    with pytest.raises(DataError, match="qrels/dev.tsv: file not found"):
        read_beir_dir(root, split="dev")


def test_pairs_jsonl_aliases_and_errors(tmp_path):
    path = tmp_path / "pairs.jsonl"
    write_jsonl(
        path,
        [
            {"id": "a", "query": "q1", "passage": "p1", "language": "Python"},
            {"query_positive": "q2", "document": "p2", "query_id": 7},
            {"query": "q3", "pos": ["p3", "other"]},
        ],
    )
    seed = read_pairs_jsonl(path)
    assert [(p.id, p.query, p.passage) for p in seed.pairs] == [
        ("a", "q1", "p1"),
        ("7", "q2", "p2"),
        ("3", "q3", "p3"),
    ]
    assert seed.pairs[0].language == "Python" and seed.distractors == ["p1", "p2", "p3"]
    assert len(load_seed(str(path), limit=2).pairs) == 2
    write_jsonl(path, [{"id": "a", "query": "q", "passage": "p"}, {"id": "a", "query": "q", "passage": "p"}])
    with pytest.raises(DataError, match="duplicate pair id 'a'"):
        read_pairs_jsonl(path)
    write_jsonl(path, [{"query": "q", "passage": [1]}])
    with pytest.raises(DataError, match="line 1, field 'passage'"):
        read_pairs_jsonl(path)


def test_msmarco_from_the_hub_through_datasets(monkeypatch):
    rows = [
        {"query": "q1", "query_id": 1, "passages": {"passage_text": ["a", "b"], "is_selected": [0, 1]}},
        {"query": "q2", "query_id": 2, "passages": {"passage_text": ["c", "d"], "is_selected": [0, 0]}},
        {"query": "q3", "query_id": 3, "passages": {"passage_text": ["e", "f"], "is_selected": [1, 0]}},
        {"query": "q4", "query_id": 4, "passages": {"passage_text": ["g"], "is_selected": [1]}},
    ]
    calls = []

    def load_dataset(name, config, split, streaming):
        calls.append((name, config, split, streaming))
        return iter(rows)

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    seed = load_seed("msmarco", limit=2)
    assert calls == [("microsoft/ms_marco", "v2.1", "train", True)]
    assert [(p.id, p.query, p.passage) for p in seed.pairs] == [("1", "q1", "b"), ("3", "q3", "e")]
    assert seed.distractors == ["a", "c", "d", "f"]
    with pytest.raises(DataError, match="needs --limit"):
        load_seed("msmarco")


def test_prices():
    assert price_for("gpt-4o-mini") == Price(0.15, 0.60)
    assert price_for("gpt-4o-mini-2024-07-18") == Price(0.15, 0.60)
    assert price_for("gpt-4o-2024-08-06") == Price(2.50, 10.00)
    assert price_for("o3-mini") == Price(1.10, 4.40)
    assert price_for("my-local-model") is None
    name, price = parse_price("my-local-model=0.5,1")
    assert price_for(name, {name: price}).cost(1_000_000, 500_000) == pytest.approx(1.0)
    assert price.cost(1_000_000, 500_000, batch=True) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="MODEL=INPUT,OUTPUT"):
        parse_price("gpt-4o-mini")


@pytest.mark.skipif(
    os.environ.get("INFEMBED_TEST_LOCAL_LLM") != "1",
    reason="loads SmolLM2 from its GGUF (about a minute on 2 cores); set INFEMBED_TEST_LOCAL_LLM=1",
)
def test_local_smollm2_backend_answers(tmp_path):
    import asyncio

    from infembed.synth.llm import ChatRequest, LLMClient, ResponseCache, Sampling
    from infembed.synth.local import TransformersBackend
    from infembed.synth.prompts import instruction_prompt

    backend = TransformersBackend.from_name("smollm2")
    client = LLMClient(backend, ResponseCache(tmp_path / "c.sqlite"), concurrency=1)
    request = ChatRequest.build(
        "local:smollm2",
        instruction_prompt("cost of disneyland", "It costs $355,000 a day."),
        Sampling(max_tokens=24),
    )
    answer = asyncio.run(client.complete(request))
    assert answer.text and answer.prompt_tokens > 20 and 0 < answer.completion_tokens <= 24
