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
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import atomic_write, ensure_dir, json_error_reason
from infembed.data.records import Document

INDEX_FORMAT = 1
#: an index holds the whole corpus: its dir and files are readable by their owner only
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600
META_NAME = "index.json"
BUILD_NAME = "build.json"
DOCS_NAME = "docs.jsonl"
OFFSETS_NAME = "docs.offsets.npy"
SHARD_DIR = "shards"
FAISS_NAME = "vectors.faiss"
BM25_DIR = "bm25"


class IndexModelMismatch(SettingsError):
    """The model given to :meth:`Index.load` is not the one the index was built with (a SettingsError, so the
    CLI prints it as one line, exit 2; still a ValueError for library callers)."""


class DocStore:
    """docs.jsonl read through mmap + a line offset table: O(1) random access, nothing held in memory,
    safe to read from several threads."""

    def __init__(self, root: Path, count: int | None = None):
        """Open the documents of ``root``; ``count`` (index.json's) is checked against the offset table, and the
        table against docs.jsonl, so a damaged or cut file is refused here rather than read as wrong text."""
        self.path = root / DOCS_NAME
        self.offsets = _read_offsets(root / OFFSETS_NAME)
        if count is not None and len(self.offsets) != count + 1:
            raise DataError(
                f"holds offsets of {len(self.offsets) - 1} documents, index.json says {count}",
                root / OFFSETS_NAME,
                hint=REBUILD,
            )
        try:
            self._file = open(self.path, "rb")
        except (FileNotFoundError, IsADirectoryError):
            raise DataError("missing: the index has no documents", self.path, hint=REBUILD) from None
        size = os.fstat(self._file.fileno()).st_size
        if int(self.offsets[-1]) != size:
            self._file.close()
            raise DataError(
                f"is {size} bytes, but {OFFSETS_NAME} ends at byte {int(self.offsets[-1])}: the file was cut or "
                "changed after the build",
                self.path,
                hint=REBUILD,
            )
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, i: int) -> dict[str, str]:
        try:
            doc = json.loads(self._map[int(self.offsets[i]) : int(self.offsets[i + 1])])
        except json.JSONDecodeError as error:
            raise DataError(json_error_reason(error), self.path, i + 1, hint=REBUILD) from None
        except UnicodeDecodeError:
            raise DataError("not valid UTF-8", self.path, i + 1, hint=REBUILD) from None
        if not isinstance(doc, dict) or not all(
            isinstance(doc.get(k), str) for k in ("_id", "title", "text")
        ):
            raise DataError("expected a document {_id, title, text}", self.path, i + 1, hint=REBUILD)
        return doc

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
    """index.json / build.json for a build, or None when absent or torn (a torn manifest means "start over")."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


REBUILD = "rebuild the index with `infembed index --overwrite`"


def _read_offsets(path: Path) -> np.ndarray:
    """docs.offsets.npy: ``count + 1`` non-decreasing byte offsets starting at 0, or a DataError."""
    try:
        with open(path, "rb") as handle:
            magic = handle.read(6)
        offsets = np.load(path, allow_pickle=False) if magic == b"\x93NUMPY" else None
    except FileNotFoundError:
        raise DataError("missing: the index has no document offsets", path, hint=REBUILD) from None
    except (ValueError, OSError, EOFError) as error:
        reason = str(error).split(". ")[0].strip() or type(error).__name__  # numpy's first sentence
        raise DataError(f"not a readable offset table ({reason})", path, hint=REBUILD) from None
    if offsets is None:  # numpy would take any other file for a pickle
        raise DataError("not a .npy file", path, hint=REBUILD)
    ok = (
        isinstance(offsets, np.ndarray)
        and offsets.ndim == 1
        and offsets.dtype.kind in "iu"
        and len(offsets) >= 1
        and offsets[0] == 0
        and bool(np.all(np.diff(offsets) >= 0))
    )
    if not ok:
        raise DataError("not an offset table (a rising list of byte offsets from 0)", path, hint=REBUILD)
    return offsets


def open_meta(root: Path) -> dict[str, Any]:
    """index.json of the index dir ``root``, checked: a missing, unfinished, unparsable or incomplete index is a
    DataError naming the file (and line) instead of a KeyError or a faiss error further on."""
    path = root / META_NAME
    if root.exists() and not root.is_dir():
        raise DataError(
            "is a file, not an index directory", root, hint="give the directory `infembed index` wrote"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if (root / BUILD_NAME).exists():
            raise DataError(
                "the index build did not finish",
                root,
                hint="rerun `infembed index` with the same arguments; it resumes from the last complete shard",
            ) from None
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such index directory") from None
        raise DataError(
            "not an infembed index (no index.json)", root, hint="build one with `infembed index`"
        ) from None
    except UnicodeDecodeError:
        raise DataError("not valid UTF-8", path, hint=REBUILD) from None
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(json_error_reason(error), path, error.lineno, hint=REBUILD) from None
    if not isinstance(meta, dict):
        raise DataError(f"expected a JSON object, got {type(meta).__name__}", path, hint=REBUILD)
    if meta.get("format") != INDEX_FORMAT:
        raise DataError(
            f"index format {meta.get('format')!r} is not supported (expected {INDEX_FORMAT})", path
        )
    _check_meta(meta, path)
    return meta


def _check_meta(meta: dict[str, Any], path: Path) -> None:
    from infembed.search.settings import KINDS

    def need(value: Any, field: str, what: str, ok: bool) -> None:
        if not ok:
            shown = "missing" if value is None else f"{type(value).__name__} {value!r}"
            raise DataError(f"expected {what}, got {shown}", path, field=field, hint=REBUILD)

    kind = meta.get("kind")
    if kind not in KINDS:
        raise DataError(
            f"unknown index kind {kind!r} (known: {', '.join(KINDS)})", path, field="kind", hint=REBUILD
        )
    count = meta.get("count")
    need(
        count,
        "count",
        "a document count",
        isinstance(count, int) and not isinstance(count, bool) and count >= 0,
    )
    if kind == "bm25":
        need(meta.get("bm25"), "bm25", "the BM25 settings (an object)", isinstance(meta.get("bm25"), dict))
        template = meta["bm25"].get("template")
        need(template, "bm25.template", "the query template", isinstance(template, str))
        return
    model = meta.get("model")
    need(model, "model", "the model (an object)", isinstance(model, dict))
    for key in ("path", "fingerprint"):
        need(model.get(key), f"model.{key}", "a string", isinstance(model.get(key), str))
    dim = meta.get("dim")
    need(dim, "dim", "the embedding size", isinstance(dim, int) and not isinstance(dim, bool) and dim > 0)
    need(meta.get("shards"), "shards", "a shard count", isinstance(meta.get("shards"), int))
    store = meta.get("store")
    if store is not None:
        need(store, "store", "the vector store (an object)", isinstance(store, dict))
        if store.get("kind") == "milvus":
            for key in ("uri", "collection"):
                need(store.get(key), f"store.{key}", "a string", isinstance(store.get(key), str))
            need(
                meta.get("milvus"),
                "milvus",
                "the Milvus settings (an object)",
                isinstance(meta.get("milvus"), dict),
            )
            return
    faiss = meta.get("faiss")
    need(faiss, "faiss", "the faiss settings (an object)", isinstance(faiss, dict) and "factory" in faiss)


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


def writable_dir(path: Path) -> None:
    """Create the directory ``path`` (and its parents) and make sure files can be written in it, or say in one
    line why not (no permission, a read-only file system), before anything is encoded."""
    try:
        ensure_dir(path)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise DataError(f"cannot write the index here ({reason})", path) from None


def prepare_output(root: Path) -> None:
    """Create the index dir, readable by its owner only (0700): it holds the whole corpus (docs.jsonl)."""
    writable_dir(root)
    with contextlib.suppress(OSError):  # a dir of another owner that we may write in stays as it is
        os.chmod(root, PRIVATE_DIR)


def make_private(root: Path) -> None:
    """The index dir 0700 and everything in it 0700 (dirs) / 0600 (files), once a build has written it: the
    atomic writes give new files the umask's mode (0644), and the corpus is in them. ``chmod -R go+rX DIR``
    shares an index on purpose; the next build of the dir makes it private again."""
    with contextlib.suppress(OSError):
        os.chmod(root, PRIVATE_DIR)
    for folder, dirs, files in os.walk(root):
        for name, mode in [(d, PRIVATE_DIR) for d in dirs] + [(f, PRIVATE_FILE) for f in files]:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.chmod(path, mode)


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
