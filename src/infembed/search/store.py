"""What an index dir holds on disk, besides the vectors: the documents, the embedding shards, the manifests.

Layout of an index dir (every file is written atomically: a killed build never leaves a torn file)::

    index.json          kind, count, dim, the model (path, fingerprint, template) and search settings;
                        present only once the build has finished, so its presence means "complete"
    build.json          what the shards were encoded from (model fingerprint, corpus digest, shard size):
                        a rerun with the same inputs resumes, a rerun with other inputs starts over
    docs.jsonl          {"_id", "title", "text"} per document, in index order
    docs.offsets.npy    byte offset of each line of docs.jsonl (documents are read on demand, not held in memory)
    shards/shard-NNNNN.npy   float32 passage embeddings, ``shard_size`` documents each (dense kinds)
    vectors.faiss       the faiss index (dense kinds; :mod:`infembed.search.vectors`)
    bm25/               the bm25s index (kind "bm25"; beside the vectors of a dense index, for exclusion-aware
                        search that matches excluded aspects lexically; :mod:`infembed.search.bm25`)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError
from infembed.data.jsonl import atomic_write
from infembed.data.records import Document

INDEX_FORMAT = 1
META_NAME = "index.json"
BUILD_NAME = "build.json"
DOCS_NAME = "docs.jsonl"
OFFSETS_NAME = "docs.offsets.npy"
SHARD_DIR = "shards"
FAISS_NAME = "vectors.faiss"
BM25_DIR = "bm25"


class IndexModelMismatch(ValueError):
    """The model given to :meth:`Index.load` is not the one the index was built with."""


class DocStore:
    """docs.jsonl read through mmap + a line offset table: O(1) random access, nothing held in memory,
    safe to read from several threads."""

    def __init__(self, root: Path):
        self.path = root / DOCS_NAME
        self.offsets = np.load(root / OFFSETS_NAME)
        self._file = open(self.path, "rb")
        size = os.fstat(self._file.fileno()).st_size
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, i: int) -> dict[str, str]:
        return json.loads(self._map[int(self.offsets[i]) : int(self.offsets[i + 1])])

    def close(self) -> None:
        if isinstance(self._map, mmap.mmap):
            self._map.close()
        self._file.close()

    @staticmethod
    def write(root: Path, ids: Sequence[str], corpus: Mapping[str, Document]) -> None:
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        position = 0
        with atomic_write(root / DOCS_NAME, "wb") as handle:
            for n, doc_id in enumerate(ids):
                doc = corpus[doc_id]
                line = (
                    json.dumps({"_id": doc_id, "title": doc.title, "text": doc.text}, ensure_ascii=False)
                    + "\n"
                ).encode()
                handle.write(line)
                position += len(line)
                offsets[n + 1] = position
        save_npy(root / OFFSETS_NAME, offsets)


def save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_write(path, "wb") as handle:
        np.save(handle, array)


def read_manifest(path: Path) -> dict[str, Any] | None:
    """index.json / build.json, or None when absent or torn (a torn manifest means "start over")."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def corpus_digest(ids: Sequence[str], corpus: Mapping[str, Document]) -> str:
    digest = hashlib.sha256()
    for doc_id in ids:
        doc = corpus[doc_id]
        for part in (doc_id, doc.title, doc.text):
            digest.update(part.encode())
            digest.update(b"\0")
    return digest.hexdigest()[:32]


def check_output_dir(root: Path) -> None:
    """Refuse to write into a dir that holds anything but an (old or partial) infembed index."""
    for parent in root.parents:
        if parent.exists() and not parent.is_dir():
            raise DataError("is a file, so no index can be written under it", parent, hint=f"writing {root}")
    if root.exists() and not root.is_dir():
        raise DataError("exists and is not a directory", root)
    if root.is_dir():
        entries = {p.name for p in root.iterdir() if not p.name.startswith(".")}
        if entries and not ({META_NAME, BUILD_NAME} & entries):
            raise DataError(
                "exists and is not an infembed index; refusing to write into it",
                root,
                hint="give a new or empty directory",
            )


def check_replacing(root: Path, wanted: Mapping[str, Any], overwrite: bool) -> None:
    """A dir holding a complete index (index.json) is rebuilt only from the same inputs (``wanted``: what index.json
    records, as ``{"kind": ..., "model": {"fingerprint": ...}, "corpus_sha256": ..., "faiss": ...}``), so a
    finished index is never replaced by mistake; ``overwrite`` replaces it. A partial build is always resumed or
    restarted (build.json decides)."""
    meta = read_manifest(root / META_NAME)
    if meta is None or overwrite:
        return
    labels = {"corpus_sha256": "corpus sha256", "model fingerprint": "model"}
    differences = []
    for key, value in wanted.items():
        have = meta.get(key)
        if isinstance(value, Mapping) and isinstance(have, Mapping):
            pairs = [(f"{key} {sub}", have.get(sub), v) for sub, v in value.items()]
        else:
            pairs = [(key, have, value)]
        differences += [
            f"{labels.get(name, name)} {old if old is not None else 'none'}, not {new}"
            for name, old, new in pairs
            if old != new
        ]
    if differences:
        raise DataError(
            "holds a complete index built from other inputs (" + "; ".join(differences[:3]) + ")",
            root,
            hint="give --overwrite to replace it, or another --output",
        )


def remove(root: Path, *names: str) -> None:
    """Delete these files of an index dir if present (a stale manifest must never outlive what it describes)."""
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(root / name)


# --------------------------------------------------------------------------------------------- shards


def shard_path(root: Path, shard: int) -> Path:
    return root / SHARD_DIR / f"shard-{shard:05d}.npy"


def shard_ok(path: Path, rows: int, dim: int) -> bool:
    """A shard counts as done only if it loads with the expected shape (a truncated file is redone)."""
    try:
        array = np.load(path, mmap_mode="r")
    except (FileNotFoundError, ValueError, OSError, EOFError):
        return False
    return array.shape == (rows, dim) and array.dtype == np.float32


def iter_shards(root: Path, shards: int) -> Iterable[np.ndarray]:
    for shard in range(shards):
        yield np.load(shard_path(root, shard))


def training_sample(root: Path, shards: int, count: int, size: int, seed: int = 0) -> np.ndarray:
    """A uniform sample of rows across all shards (the corpus may be sorted, so not just the first rows)."""
    if count <= size:
        return np.concatenate(list(iter_shards(root, shards)))
    rows = np.sort(np.random.default_rng(seed).choice(count, size=size, replace=False))
    parts, start = [], 0
    for shard in range(shards):
        array = np.load(shard_path(root, shard), mmap_mode="r")
        stop = start + len(array)
        local = rows[(rows >= start) & (rows < stop)] - start
        parts.append(np.asarray(array[local]))
        start = stop
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
