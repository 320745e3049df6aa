"""Search a corpus with (query, instruction) pairs: a faiss (or BM25) index on disk, a Python API, an HTTP service.

    >>> from infembed.search import Index
    >>> index = Index.build("default", "corpus.jsonl", "my-index")
    >>> index.search("heat transfer in hypersonic flow", "Only experimental studies.", k=5)

The service (:func:`create_app`, :func:`serve`) needs FastAPI and uvicorn (``pip install infembed[serve]``);
it is imported only when used.
"""

from __future__ import annotations

from typing import Any

from infembed.search.index import Hit, Index, IndexModelMismatch, load_corpus
from infembed.search.settings import KINDS, IndexSettings, ServeSettings

__all__ = [
    "KINDS",
    "Hit",
    "Index",
    "IndexSettings",
    "ServeSettings",
    "IndexModelMismatch",
    "load_corpus",
    "create_app",
    "serve",
]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from infembed.search.service import create_app

        return create_app
    if name == "serve":
        from infembed.search.server import serve

        return serve
    raise AttributeError(f"module 'infembed.search' has no attribute {name!r}")
