"""The faiss side of a dense index: which faiss index a kind is, how it is assembled from the shards, and
writing it atomically.

Every kind is a ``faiss.index_factory`` string with inner product (embeddings are L2-normalised, so inner
product is cosine): ``flat`` is ``"Flat"`` (exact), ``hnsw`` is ``"HNSW<M>,Flat"``, ``ivf`` is
``"IVF<nlist>,Flat"`` (trained on a uniform sample of the shards). The factory string is recorded in
index.json, so an index says what it is in faiss's own words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import atomic_path
from infembed.search.settings import DENSE_KINDS, IndexSettings
from infembed.search.store import REBUILD, iter_shards, training_sample


def faiss_settings(settings: IndexSettings, count: int) -> dict[str, Any]:
    """The faiss side of ``settings`` for a corpus of ``count`` documents, with its index_factory string."""
    if settings.kind == "flat":
        return {"factory": "Flat"}
    if settings.kind == "hnsw":
        return {
            "factory": f"HNSW{settings.hnsw_m},Flat",
            "M": settings.hnsw_m,
            "ef_construction": settings.ef_construction,
            "ef_search": settings.ef_search,
        }
    if settings.kind != "ivf":
        raise SettingsError(f"kind must be one of {', '.join(DENSE_KINDS)}, got {settings.kind!r}")
    nlist = settings.ivf_lists(count)
    return {"factory": f"IVF{nlist},Flat", "nlist": nlist, "nprobe": settings.ivf_probes(count)}


def assemble(root: Path, dim: int, count: int, shards: int, settings: dict[str, Any]) -> Any:
    """Build the faiss index of ``settings`` from the embedding shards of an index dir."""
    import faiss

    index = faiss.index_factory(dim, settings["factory"], faiss.METRIC_INNER_PRODUCT)
    if "ef_construction" in settings:
        index.hnsw.efConstruction = settings["ef_construction"]
    if not index.is_trained:
        index.train(training_sample(root, shards, count, settings["nlist"] * 256))
    for vectors in iter_shards(root, shards):
        index.add(vectors)
    return index


def set_search_params(
    index: Any, settings: dict[str, Any], *, ef_search: int | None, nprobe: int | None
) -> None:
    """HNSW ``ef_search`` and IVF ``nprobe``; each is ignored where it does not apply."""
    import faiss

    if ef_search is not None and "ef_construction" in settings:
        faiss.downcast_index(index).hnsw.efSearch = int(ef_search)
    if nprobe is not None and "nlist" in settings:
        faiss.extract_index_ivf(index).nprobe = int(nprobe)


def write(index: Any, path: Path) -> None:
    """faiss.write_index, atomically (faiss writes by file name, not by handle)."""
    import faiss

    with atomic_path(path) as tmp:
        faiss.write_index(index, str(tmp))


def reconstruct(index: Any, rows: np.ndarray) -> np.ndarray:
    """The stored vectors of these rows (an IVF index gets its direct map on first use)."""
    import faiss

    try:
        return index.reconstruct_batch(np.asarray(rows, dtype=np.int64))
    except RuntimeError:
        faiss.extract_index_ivf(index).make_direct_map()
        return index.reconstruct_batch(np.asarray(rows, dtype=np.int64))


def versions() -> dict[str, str]:
    import faiss

    from infembed import __version__

    return {"infembed": __version__, "faiss": faiss.__version__}


class FaissStore:
    """A faiss index as the vector store of an :class:`~infembed.search.index.Index` (the interface that
    :class:`~infembed.search.milvus.MilvusStore` shares): ``search``, ``reconstruct``, ``count``."""

    def __init__(self, index: Any, settings: dict[str, Any]):
        self.index = index
        self.settings = settings

    @classmethod
    def read(cls, path: Path, settings: dict[str, Any]) -> FaissStore:
        """Open vectors.faiss; a missing or damaged file is a DataError (faiss's own is a RuntimeError)."""
        import faiss

        path = Path(path)
        if not path.is_file():
            raise DataError("missing: the index has no vectors", path, hint=REBUILD)
        try:
            return cls(faiss.read_index(str(path)), settings)
        except RuntimeError as error:
            # faiss's text is "Error in <C++ signature> at <file>:<line>: Error: '<check>' failed: <reason>"
            reason = str(error).strip().rsplit("failed: ", 1)[-1].strip() or type(error).__name__
            raise DataError(f"not a readable faiss index ({reason})", path, hint=REBUILD) from None

    @property
    def count(self) -> int:
        return int(self.index.ntotal)

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.index.search(vectors, k)

    def reconstruct(self, rows: np.ndarray) -> np.ndarray:
        return reconstruct(self.index, rows)

    def set_search_params(self, *, ef_search: int | None = None, nprobe: int | None = None) -> None:
        set_search_params(self.index, self.settings, ef_search=ef_search, nprobe=nprobe)
