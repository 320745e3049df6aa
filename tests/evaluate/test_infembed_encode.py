"""InFEmbed's inference path against sentence-transformers on the default model (all-MiniLM-L6-v2).

Invariant: with the default template, ``encode_queries(queries, instructions)`` equals
``SentenceTransformer(path).encode(f"{query} {instruction}")`` and ``encode_passages(texts)`` equals
``SentenceTransformer(path).encode(texts)`` (atol 1e-5; an instruction makes one query longer than the model's
256-token limit, so truncation must agree too); an empty or missing instruction gives the query alone, with no dangling space.
"""

from __future__ import annotations

import numpy as np
import pytest

QUERIES = ["heat conduction in composite slabs", "what is the flow past a cylinder at high mach number ?"]
INSTRUCTIONS = [
    "Only experimental studies are relevant.",
    "Documents on supersonic or hypersonic flow past the cylinder are not relevant. " * 40,  # > 256 tokens
]


@pytest.fixture(scope="module")
def sentence_transformer(minilm):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(minilm.source, device="cpu")


def test_encode_queries_with_the_default_template_equals_sentence_transformers(minilm, sentence_transformer):
    assert minilm.config.template == "{query} {instruction}"
    ours = minilm.encode_queries(QUERIES, INSTRUCTIONS)
    reference = sentence_transformer.encode([f"{q} {i}" for q, i in zip(QUERIES, INSTRUCTIONS)])
    assert ours.dtype == np.float32 and ours.shape == reference.shape == (2, 384)
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_empty_instruction_gives_the_query_alone(minilm, sentence_transformer):
    reference = sentence_transformer.encode(QUERIES)
    for instructions in (["", ""], [None, None], None):
        np.testing.assert_allclose(minilm.encode_queries(QUERIES, instructions), reference, atol=1e-5)


def test_encode_passages_equals_sentence_transformers(minilm, sentence_transformer):
    texts = [
        *QUERIES,
        INSTRUCTIONS[0],
        "a",
        "An experimental study of heat conduction through layered slabs.",
    ]
    ours = minilm.encode_passages(texts, batch_size=2)  # several batches, sorted by length inside
    np.testing.assert_allclose(ours, sentence_transformer.encode(texts, batch_size=2), atol=1e-5)
    assert minilm.encode_passages([]).shape == (0, 384)


def test_a_template_override_is_per_call_and_leaves_the_shared_model_alone(minilm, sentence_transformer):
    from infembed.evaluate.retrievers import DenseRetriever

    template = "Instruct: {instruction}\nQuery: {query}"
    expected = sentence_transformer.encode([f"Instruct: {i}\nQuery: {q}" for q, i in zip(QUERIES, INSTRUCTIONS)])
    np.testing.assert_allclose(minilm.encode_queries(QUERIES, INSTRUCTIONS, template=template), expected, atol=1e-5)
    retriever = DenseRetriever(minilm, template=template, cache=False, show_progress=False)
    assert retriever.template == template
    assert minilm.config.template == "{query} {instruction}"  # another retriever on the same model is unaffected
    from infembed.data.records import Document

    texts = {"d1": "heat conduction in layered slabs", "d2": "hypersonic flow past a cylinder"}
    retriever.index({k: Document(title="", text=v) for k, v in texts.items()})
    run = retriever.retrieve(["q1", "q2"], QUERIES, INSTRUCTIONS, top_k=2)
    passages = minilm.encode_passages(list(texts.values()))
    scores = expected @ passages.T
    assert run["q1"]["d1"] == pytest.approx(float(scores[0, 0]), abs=1e-5)
    assert run["q2"]["d2"] == pytest.approx(float(scores[1, 1]), abs=1e-5)
