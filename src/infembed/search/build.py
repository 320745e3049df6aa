"""Building an index dir: the corpus and model as given, the resumable (and torchrun-shared) encoding into
shards, the faiss index assembled from them, or a BM25 index. :class:`~infembed.search.index.Index` calls these
and then opens the result."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import ensure_dir, write_json
from infembed.data.records import Document
from infembed.search import store, vectors
from infembed.search.bm25 import BM25
from infembed.search.settings import IndexSettings
from infembed.search.store import (
    BM25_DIR,
    BUILD_NAME,
    DOCS_NAME,
    FAISS_NAME,
    INDEX_FORMAT,
    META_NAME,
    OFFSETS_NAME,
    SHARD_DIR,
    DocStore,
    corpus_digest,
    read_manifest,
    shard_path,
)

Progress = Callable[[int, int], None]
"""``progress(documents_done, documents_total)``, called after each shard (skipped shards count as done)."""


def load_corpus(spec: str | Path | Mapping[str, Any]) -> dict[str, Document]:
    """A corpus from ``corpus.jsonl`` ({_id, title, text} per line), a dir holding one (BEIR or an
    instruction benchmark), or an in-memory mapping ``id -> Document | str | {"title", "text"}``."""
    if isinstance(spec, Mapping):
        corpus: dict[str, Document] = {}
        for doc_id, value in spec.items():
            if isinstance(value, Document):
                corpus[str(doc_id)] = value
            elif isinstance(value, str):
                corpus[str(doc_id)] = Document(title="", text=value)
            elif isinstance(value, Mapping):
                corpus[str(doc_id)] = Document(
                    title=str(value.get("title") or ""), text=str(value.get("text") or "")
                )
            else:
                raise SettingsError(
                    f"document {doc_id!r}: expected a Document, a string or a dict, got {type(value).__name__}"
                )
        if not corpus:
            raise SettingsError("the corpus is empty")
        return corpus
    from infembed.data.formats import read_corpus

    path = Path(spec)
    if path.is_dir():
        if not (path / "corpus.jsonl").exists():
            raise DataError("no corpus.jsonl in this directory", path, hint="give corpus.jsonl or a BEIR dir")
        path = path / "corpus.jsonl"
    return read_corpus(path)


def resolve_model(model: Any, device: str | None, backend: str | None = None):
    """An InFEmbed from a name (loaded with ``backend``, default torch) or a model object (switched to
    ``backend`` when one is given)."""
    from infembed.model import InFEmbed

    if model is None or isinstance(model, (str, Path)):
        return InFEmbed.load(None if model is None else str(model), device=device, backend=backend)
    if backend is not None and backend != getattr(model, "backend", "torch"):
        model.use_backend(backend)
    return model


def model_spec(model: Any) -> str:
    """How to load this model again: "default" for the packaged MiniLM, an absolute dir, or a hub name."""
    from infembed.model.retriever import default_model_path

    source = getattr(model, "source", None) or model.config.base_model or ""
    if source and os.path.exists(source):
        if os.path.realpath(source) == os.path.realpath(default_model_path()):
            return "default"
        return str(Path(source).resolve())
    if source in ("", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        return "default"
    return source


def build_dense(
    model: Any,
    docs: Mapping[str, Document],
    ids: list[str],
    root: Path,
    settings: IndexSettings,
    *,
    progress: Progress | None = None,
    milvus: dict[str, str] | None = None,
    overwrite: bool = False,
) -> None:
    """Encode the corpus shard by shard (resumable; shared out over torchrun ranks), then assemble and write
    the faiss index, or fill the Milvus collection ``milvus`` ({"uri", "collection"}), and index.json."""
    kind, shard_size, batch_size = settings.kind, settings.shard_size, settings.batch_size
    fingerprint = model.fingerprint()
    dim = int(model.dim)
    count = len(ids)
    shards = (count + shard_size - 1) // shard_size
    manifest = {
        "format": INDEX_FORMAT,
        "fingerprint": fingerprint,
        "passage_max_length": model.config.passage_max_length,
        "dim": dim,
        "count": count,
        "shard_size": shard_size,
        "corpus_sha256": corpus_digest(ids, docs),
    }
    collection = None
    with distributed() as (rank, world, barrier):
        if milvus is not None and world > 1 and "://" not in milvus["uri"]:
            raise SettingsError(
                "a Milvus Lite file cannot be shared by torchrun ranks: give a Milvus server URI (http://host:19530)"
            )
        if rank == 0:
            placement = (
                {"faiss": vectors.faiss_settings(settings, count)}
                if milvus is None
                else {"store": {"kind": "milvus", **milvus}}
            )
            wanted = {
                "kind": kind,
                "model": {"fingerprint": fingerprint},
                "corpus_sha256": manifest["corpus_sha256"],
            }
            store.check_replacing(root, {**wanted, **placement}, overwrite)
            if milvus is not None:  # refused before any encoding when the collection holds another build
                collection = open_milvus_for_build(milvus, settings, count, dim, manifest)
            ensure_dir(root)
            store.remove(root, META_NAME)  # index.json exists only while the dir is a complete index
            docs_present = (root / DOCS_NAME).exists() and (root / OFFSETS_NAME).exists()
            if read_manifest(root / BUILD_NAME) != manifest or not docs_present:
                shutil.rmtree(root / SHARD_DIR, ignore_errors=True)  # other inputs: old shards are stale
                DocStore.write(root, ids, docs)
                write_json(root / BUILD_NAME, manifest)
            (root / SHARD_DIR).mkdir(exist_ok=True)
        barrier()
        if milvus is not None and collection is None:  # the other ranks insert their own shards
            collection = open_milvus_for_build(milvus, settings, count, dim, manifest)
        done = 0
        mine = [s for s in range(shards) if s % world == rank]
        if progress is not None:  # every check has passed: encoding starts
            progress(0, count)
        for shard in mine:
            lo, hi = shard * shard_size, min(count, (shard + 1) * shard_size)
            path = shard_path(root, shard)
            # a shard wholly in the collection is done, even where its local file is gone (another machine)
            stored = collection is not None and collection.rows_present(lo, hi) == hi - lo
            if not stored and not store.shard_ok(path, hi - lo, dim):
                texts = [docs[d].full_text() for d in ids[lo:hi]]
                encoded = model.encode_passages(texts, batch_size=batch_size)
                store.save_npy(path, np.ascontiguousarray(encoded, dtype=np.float32))
            if not stored and collection is not None:
                collection.upsert(lo, np.load(path), ids[lo:hi], docs)
            done += hi - lo
            if progress is not None:
                progress(done if world == 1 else min(count, done * world), count)
        barrier()
        if rank == 0:
            if collection is None:
                tuning = vectors.faiss_settings(settings, count)
                index = vectors.assemble(root, dim, count, shards, tuning)
                vectors.write(index, root / FAISS_NAME)
                placed: dict[str, Any] = {"faiss": tuning}
            else:
                store.remove(root, FAISS_NAME)  # from an earlier faiss build of this dir
                check_milvus(collection, root, count)
                placed = {"store": {"kind": "milvus", **milvus}, "milvus": collection.settings}
            meta = {
                "format": INDEX_FORMAT,
                "kind": kind,
                "count": count,
                "dim": dim,
                "shards": shards,
                "shard_size": shard_size,
                "model": {
                    "path": model_spec(model),
                    "fingerprint": fingerprint,
                    "template": model.config.template,
                    "interaction": model.config.interaction,
                    "pooling": model.config.pooling,
                    "passage_max_length": model.config.passage_max_length,
                },
                **placed,
                "corpus_sha256": manifest["corpus_sha256"],
                "world_size": world,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "versions": vectors.versions(),
            }
            if collection is not None:
                collection.finish(meta)
            # BM25 over the same documents, for exclusion-aware search that matches the excluded aspects
            # lexically (ExclusionSettings.aspect_scorer="bm25", the fitted dense default); a few % of the build
            BM25().index([docs[d].full_text() for d in ids]).save(root / BM25_DIR)
            write_json(root / META_NAME, meta)  # last: its presence means the index is complete
            store.make_private(root)
        barrier()


def open_milvus_for_build(
    target: dict[str, str], settings: IndexSettings, count: int, dim: int, manifest: dict[str, Any]
) -> Any:
    """The build's Milvus collection: created, or an existing one recording this same build (to resume).
    Shards are upserted by primary key as they are encoded, so a rerun after a kill writes only the shards
    that are not wholly in the collection, and never a row twice."""
    from infembed.search.milvus import MilvusStore, milvus_settings

    collection = MilvusStore(target["uri"], target["collection"], milvus_settings(settings, count))
    build = {
        "format": INDEX_FORMAT,
        "fingerprint": manifest["fingerprint"],
        "dim": dim,
        "count": count,
        "corpus_sha256": manifest["corpus_sha256"],
        "kind": settings.kind,
    }
    collection.prepare(build, dim)
    return collection


def check_milvus(collection: Any, root: Path, count: int) -> None:
    """Every row is in the collection once (each rank upserted its own shards)."""
    present = collection.count
    if present != count:
        raise DataError(
            f"Milvus collection {collection.collection!r} holds {present} rows after the build, "
            f"expected {count}",
            root,
        )


def build_bm25(docs: Mapping[str, Document], ids: list[str], root: Path, *, overwrite: bool = False) -> None:
    """Write a BM25 index dir (kind "bm25": no model, no vectors)."""
    from infembed.templates import DEFAULT_TEMPLATE

    digest = corpus_digest(ids, docs)
    store.check_replacing(root, {"kind": "bm25", "corpus_sha256": digest}, overwrite)
    ensure_dir(root)
    # A dense build's leftovers would no longer match docs.jsonl: drop them (and the resume manifest).
    store.remove(root, META_NAME, BUILD_NAME, FAISS_NAME)
    shutil.rmtree(root / SHARD_DIR, ignore_errors=True)
    DocStore.write(root, ids, docs)
    bm25 = BM25().index([docs[d].full_text() for d in ids])
    bm25.save(root / BM25_DIR)
    meta = {
        "format": INDEX_FORMAT,
        "kind": "bm25",
        "count": len(ids),
        "dim": None,
        "model": None,
        "bm25": {**asdict(bm25.settings), "template": DEFAULT_TEMPLATE},
        "corpus_sha256": digest,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": vectors.versions(),
    }
    write_json(root / META_NAME, meta)
    store.make_private(root)


@contextlib.contextmanager
def distributed() -> Any:
    """(rank, world_size, barrier) under torchrun or an initialised process group; (0, 1, no-op) otherwise."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        dist = None
    if dist is None or not dist.is_available() or (world <= 1 and not dist.is_initialized()):
        yield 0, 1, lambda: None
        return
    created = False
    if not dist.is_initialized():
        from datetime import timedelta

        # gloo only for barriers: ranks exchange nothing but "my shards are on disk".
        dist.init_process_group("gloo", timeout=timedelta(hours=12))
        created = True
    try:
        yield dist.get_rank(), dist.get_world_size(), dist.barrier
    finally:
        if created:
            dist.destroy_process_group()
