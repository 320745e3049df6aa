"""The Milvus side of a dense index: the vectors, the documents and the model fingerprint in one Milvus
collection, through ``pymilvus.MilvusClient`` (so the same code talks to Milvus Lite, Standalone or
Distributed). ``pip install infembed[milvus]``.

The collection (one row per document, primary key = the document's position in index order)::

    id       INT64 primary key     row of the index (the order of docs.jsonl and of the faiss index)
    vector   FLOAT_VECTOR(dim)     the L2-normalised passage embedding, metric IP (= cosine)
    doc_id   VARCHAR               the document's _id
    title    VARCHAR
    text     VARCHAR               cut to 65,535 UTF-8 bytes (Milvus's VARCHAR limit); vectors are encoded
                                   from the full text

Collection properties ``infembed.*`` record the build (format, model fingerprint, corpus digest, count, dim) and,
once complete, the whole index.json (``infembed.meta``): the collection alone describes the index, so replicas of
``infembed serve`` need only its URI and name (and index.json, which records them). A build resumes into a
collection that records the same build: whole shards already present are skipped and the others are upserted
by primary key, so a rerun after a kill writes only what is missing and never duplicates a row.

Kinds map onto Milvus index types: ``flat`` -> FLAT (exact, equal to faiss ``Flat``), ``hnsw`` -> HNSW (M,
efConstruction; ``ef`` at search), ``ivf`` -> IVF_FLAT (nlist; ``nprobe`` at search).

``INFEMBED_MILVUS_URI`` overrides the URI recorded in index.json (a replica reaching the server under another
name); ``INFEMBED_MILVUS_TOKEN`` is the token (``user:password`` or an API key), never written to disk.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError, SettingsError
from infembed.search.build import model_spec
from infembed.search.settings import IndexSettings
from infembed.search.store import META_NAME, IndexModelMismatch

PREFIX = "infembed."
MAX_VARCHAR = 65_535
ID_MAX = 1024
MAX_TOP_K = 16_384  # Milvus's limit on topk
_BATCH_BYTES = 8 << 20  # a few MB per upsert: far below Milvus's per-request limit (64 MB by default)
_QUERY_BATCH = 256  # queries per search request
_GET_BATCH = 1000  # primary keys per get request
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


def milvus_settings(settings: IndexSettings, count: int) -> dict[str, Any]:
    """The Milvus index type and parameters of ``settings`` (the faiss kinds' defaults, from the same fields)."""
    if settings.kind == "flat":
        return {"index_type": "FLAT", "metric_type": "IP", "params": {}}
    if settings.kind == "hnsw":
        return {
            "index_type": "HNSW",
            "metric_type": "IP",
            "params": {"M": settings.hnsw_m, "efConstruction": settings.ef_construction},
            "ef_search": settings.ef_search,
        }
    if settings.kind == "ivf":
        return {
            "index_type": "IVF_FLAT",
            "metric_type": "IP",
            "params": {"nlist": settings.ivf_lists(count)},
            "nprobe": settings.ivf_probes(count),
        }
    raise SettingsError(f"kind must be one of flat, hnsw, ivf for a Milvus store, got {settings.kind!r}")


def resolve_uri(uri: str) -> str:
    """A server URI as given; a Milvus Lite file (``*.db``) as an absolute path, so index.json works from anywhere."""
    if "://" in uri:
        return uri
    return str(Path(uri).expanduser().resolve())


def check_collection_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise SettingsError(
            f"collection name {name!r}: Milvus allows letters, digits and underscores, starting with a letter or "
            "underscore (at most 255 characters)"
        )
    return name


def default_collection(output_dir: Path) -> str:
    """A collection name from the index dir's name (characters Milvus refuses become underscores)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(output_dir).resolve().name) or "index"
    return ("infembed_" + name if not re.match(r"[A-Za-z_]", name) else name)[:255]


def _client(uri: str) -> Any:
    try:
        from pymilvus import MilvusClient
    except ImportError:  # pragma: no cover - depends on the install
        raise SettingsError(
            "the Milvus store needs pymilvus (and milvus-lite for a local .db file): pip install 'infembed[milvus]'"
        ) from None
    uri = os.environ.get("INFEMBED_MILVUS_URI") or uri
    return MilvusClient(uri=uri, token=os.environ.get("INFEMBED_MILVUS_TOKEN", ""))


def _cut(text: str, limit: int = MAX_VARCHAR) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


class MilvusStore:
    """One collection as the vector store of an :class:`~infembed.search.index.Index`: ``search``,
    ``reconstruct``, ``count``, and the documents (``get``, ``get_many``)."""

    def __init__(self, uri: str, collection: str, settings: dict[str, Any] | None = None):
        self.uri = uri
        self.collection = check_collection_name(collection)
        self.settings = dict(settings or {})
        self.client = _client(uri)

    # ---------------------------------------------------------------------------------------- describing

    def exists(self) -> bool:
        return bool(self.client.has_collection(self.collection))

    def load(self) -> None:
        """Make the collection searchable: a collection is released after a Milvus Lite process ends (and when an
        operator releases it); loading a loaded collection is a no-op."""
        self.client.load_collection(self.collection)

    def properties(self) -> dict[str, str]:
        described = self.client.describe_collection(self.collection)
        return {
            k[len(PREFIX) :]: v
            for k, v in (described.get("properties") or {}).items()
            if k.startswith(PREFIX)
        }

    @property
    def count(self) -> int:
        return self._count("")

    def _count(self, where: str) -> int:
        rows = self.client.query(self.collection, filter=where, output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    # ---------------------------------------------------------------------------------------- building

    def prepare(self, build: Mapping[str, Any], dim: int) -> None:
        """Create the collection for this build, or check that an existing one records the same build."""
        wanted = {key: str(value) for key, value in build.items()}
        if self.exists():
            recorded = self.properties()
            if any(recorded.get(key) != value for key, value in wanted.items()):
                theirs = ", ".join(
                    f"{k} {recorded.get(k)}" for k in ("fingerprint", "corpus_sha256", "count")
                )
                raise DataError(
                    f"Milvus collection {self.collection!r} at {self.uri} holds another build ({theirs})",
                    hint="choose another --collection, or drop that collection first",
                )
            self.load()
            return
        from pymilvus import DataType

        schema = self.client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        schema.add_field("doc_id", DataType.VARCHAR, max_length=ID_MAX)
        schema.add_field("title", DataType.VARCHAR, max_length=MAX_VARCHAR)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_VARCHAR)
        index = self.client.prepare_index_params()
        index.add_index(
            field_name="vector",
            index_type=self.settings["index_type"],
            metric_type=self.settings["metric_type"],
            params=self.settings["params"],
        )
        properties = {PREFIX + key: value for key, value in wanted.items()}
        # Strong consistency: a count or search right after an upsert sees it (resume checks rely on this).
        self.client.create_collection(
            self.collection,
            schema=schema,
            index_params=index,
            consistency_level="Strong",
            properties=properties,
        )

    def rows_present(self, lo: int, hi: int) -> int:
        return self._count(f"id >= {lo} and id < {hi}")

    def upsert(self, lo: int, vectors: np.ndarray, ids: Sequence[str], docs: Mapping[str, Any]) -> None:
        """Write rows ``lo ..`` (by primary key: a row already there is replaced, never duplicated)."""
        batch: list[dict[str, Any]] = []
        size = 0
        for offset, (vector, doc_id) in enumerate(zip(vectors, ids)):
            if len(doc_id.encode()) > ID_MAX:
                raise DataError(
                    f"document id longer than {ID_MAX} bytes cannot be stored in Milvus",
                    field="_id",
                    hint=doc_id[:80] + "...",
                )
            doc = docs[doc_id]
            row = {
                "id": lo + offset,
                "vector": vector.tolist(),
                "doc_id": doc_id,
                "title": _cut(doc.title),
                "text": _cut(doc.text),
            }
            batch.append(row)
            size += 4 * len(vector) + len(row["title"]) + len(row["text"]) + 64
            if size >= _BATCH_BYTES:
                self.client.upsert(self.collection, batch)
                batch, size = [], 0
        if batch:
            self.client.upsert(self.collection, batch)

    def finish(self, meta: Mapping[str, Any]) -> None:
        """Record the complete index.json in the collection (flushed, so a server persists it)."""
        self.client.flush(self.collection)
        self.client.alter_collection_properties(
            self.collection, properties={PREFIX + "meta": json.dumps(meta), PREFIX + "complete": "1"}
        )

    # ---------------------------------------------------------------------------------------- searching

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, rows), both (n, k), best first; -1 and -inf pad where fewer than ``k`` rows exist."""
        if k > MAX_TOP_K:
            raise SettingsError(f"Milvus returns at most {MAX_TOP_K:,} results per query, asked for {k:,}")
        n = len(vectors)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        rows = np.full((n, k), -1, dtype=np.int64)
        params: dict[str, Any] = {"metric_type": self.settings.get("metric_type", "IP"), "params": {}}
        if "ef_search" in self.settings:
            params["params"]["ef"] = max(int(self.settings["ef_search"]), k)
        if "nprobe" in self.settings:
            params["params"]["nprobe"] = int(self.settings["nprobe"])
        for start in range(0, n, _QUERY_BATCH):
            chunk = vectors[start : start + _QUERY_BATCH]
            answers = self.client.search(
                self.collection,
                data=[v.tolist() for v in chunk],
                limit=k,
                anns_field="vector",
                search_params=params,
                output_fields=["id"],
            )
            for r, answer in enumerate(answers, start=start):
                for j, hit in enumerate(answer[:k]):
                    scores[r, j] = hit["distance"]
                    rows[r, j] = hit["id"]
        return scores, rows

    def set_search_params(self, *, ef_search: int | None = None, nprobe: int | None = None) -> None:
        if ef_search is not None and self.settings.get("index_type") == "HNSW":
            self.settings["ef_search"] = int(ef_search)
        if nprobe is not None and self.settings.get("index_type") == "IVF_FLAT":
            self.settings["nprobe"] = int(nprobe)

    def _get(self, rows: Sequence[int], fields: list[str]) -> dict[int, dict[str, Any]]:
        found: dict[int, dict[str, Any]] = {}
        unique = sorted({int(r) for r in rows})
        for start in range(0, len(unique), _GET_BATCH):
            for entity in self.client.get(
                self.collection, ids=unique[start : start + _GET_BATCH], output_fields=fields
            ):
                found[int(entity["id"])] = entity
        missing = [r for r in unique if r not in found]
        if missing:
            raise DataError(
                f"Milvus collection {self.collection!r} at {self.uri} lacks rows {missing[:5]}",
                hint="rebuild the index (`infembed index --store milvus ...`)",
            )
        return found

    def reconstruct(self, rows: np.ndarray) -> np.ndarray:
        """The stored vectors of these rows."""
        found = self._get(list(rows), ["vector"])
        return np.asarray([found[int(r)]["vector"] for r in rows], dtype=np.float32).reshape(len(rows), -1)

    # ---------------------------------------------------------------------------------------- documents

    def get_many(self, rows: Sequence[int]) -> list[dict[str, str]]:
        found = self._get(rows, ["doc_id", "title", "text"])
        return [
            {"_id": found[int(r)]["doc_id"], "title": found[int(r)]["title"], "text": found[int(r)]["text"]}
            for r in rows
        ]

    def get(self, i: int) -> dict[str, str]:
        return self.get_many([i])[0]

    def close(self) -> None:
        self.client.close()


def open_for_index(root: Path, meta: dict[str, Any], model: Any) -> dict[str, Any]:
    """The collection named in index.json, checked against the model and the count (it is shared, so another
    build may have replaced it since)."""
    target = meta["store"]
    collection = MilvusStore(target["uri"], target["collection"], meta["milvus"])
    where = f"Milvus collection {target['collection']!r} at {target['uri']}"
    if not collection.exists():
        raise DataError(
            f"{where} does not exist",
            root / META_NAME,
            hint="rebuild it with `infembed index --store milvus` or set INFEMBED_MILVUS_URI",
        )
    collection.load()
    recorded = collection.properties()
    if recorded.get("fingerprint") != model.fingerprint():
        raise IndexModelMismatch(
            f"{where} holds vectors of a model with fingerprint {recorded.get('fingerprint')}, but the given model "
            f"{model_spec(model)} has fingerprint {model.fingerprint()}: its query embeddings would not match. Search "
            "with the original model, or rebuild the index with this one (`infembed index --model ...`)"
        )
    if recorded.get("complete") != "1" or collection.count != meta["count"]:
        raise DataError(
            f"{where} holds {collection.count} rows (complete: {recorded.get('complete') == '1'}), "
            f"index.json says {meta['count']}",
            root / META_NAME,
            hint="rerun `infembed index` with the same arguments; it resumes",
        )
    return {"vectors": collection, "docs": collection}
