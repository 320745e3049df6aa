"""Fixtures for the search tests: the packaged MiniLM loaded once per session, the 30-document corpus, and a flat
index built from it once (shard size 8, so it has 4 shards)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FIXTURES = Path(__file__).parent / "fixtures"
SHARD_SIZE = 8

# (query, instruction, the document that must come first)
EXPECTED = [
    ("heat transfer in hypersonic flow", "Only wind-tunnel experiments are relevant.", "hypersonic"),
    ("how do bees make honey", None, "bees"),
    ("which programming language is easy to read", "Documents about software.", "python"),
    ("why does the sea level go up and down every day", None, "tides"),
    ("cryptocurrency mining", None, "bitcoin"),
    ("central bank policy against rising prices", None, "inflation"),
]


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    return FIXTURES / "corpus.jsonl"


@pytest.fixture(scope="session")
def model():
    from infembed.model import InFEmbed

    return InFEmbed.load(None, device="cpu")


@pytest.fixture(scope="session")
def flat_index(model, corpus_path, tmp_path_factory):
    from infembed.search import Index

    return Index.build(model, corpus_path, tmp_path_factory.mktemp("flat") / "index", shard_size=SHARD_SIZE)


@pytest.fixture(scope="session")
def bm25_index(corpus_path, tmp_path_factory):
    from infembed.search import Index

    return Index.build(None, corpus_path, tmp_path_factory.mktemp("bm25") / "index", kind="bm25")
