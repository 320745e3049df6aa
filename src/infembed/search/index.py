"""A corpus index: build it once from a model and a corpus, then search it with (query, instruction) pairs.

    >>> from infembed.search import Index
    >>> index = Index.build("default", "corpus.jsonl", "my-index")           # faiss exact inner product
    >>> hits = index.search(["heat transfer in hypersonic flow"], ["Only wind-tunnel experiments."], k=5)[0]
    >>> hits[0].id, hits[0].score, hits[0].title
    >>> hits = Index.load("my-index").search("another query", k=3)             # one query string: its hits

The files of an index dir are described in :mod:`infembed.search.store`; the faiss side in
:mod:`infembed.search.vectors`, BM25 in :mod:`infembed.search.bm25`.

Kinds: ``flat`` (exact inner product, the default and right up to a few million passages on CPU), ``hnsw``
(graph search; sub-linear, approximate, tune ``ef_search`` for recall), ``ivf`` (inverted lists; needs
training, tune ``nprobe``), and ``bm25`` (lexical, no model; for comparison through the same interface).

Encoding is resumable: each shard of ``shard_size`` documents is saved on its own as soon as it is encoded,
and a rerun skips the shards already on disk. Under ``torchrun`` (``WORLD_SIZE`` > 1) every rank encodes its
share of the shards (shard ``i`` goes to rank ``i % world_size``) and rank 0 assembles the faiss index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import lone_surrogate
from infembed.instructions.split import DEFAULT_SPLITTER
from infembed.model.backends import check_backend
from infembed.search import vectors
from infembed.search.bm25 import BM25, BM25Settings
from infembed.search.build import Progress, build_bm25, build_dense, load_corpus, model_spec, resolve_model
from infembed.search.exclusion_search import ExclusionSearch
from infembed.search.milvus import open_for_index
from infembed.search.settings import DENSE_KINDS, IndexSettings
from infembed.search.store import (
    BM25_DIR,
    FAISS_NAME,
    REBUILD,
    DocStore,
    IndexModelMismatch,
    check_output_dir,
    open_meta,
    prepare_output,
    shard_path,
    writable_dir,
)
from infembed.settings import check_number

STORES = ("faiss", "milvus")


@dataclass(frozen=True)
class Hit:
    """One search result: the document id, its score (cosine for dense kinds, BM25 otherwise), title, text."""

    id: str
    score: float
    title: str
    text: str

    def to_dict(self, rank: int | None = None) -> dict[str, Any]:
        out = asdict(self)
        if rank is not None:
            out = {"rank": rank, **out}
        return out


# --------------------------------------------------------------------------------------------- the index


class Index(ExclusionSearch):
    """A searchable corpus: faiss vectors (or a BM25 index), the documents and the model that encodes queries.

    Build with :meth:`build`, reopen with :meth:`load`, query with :meth:`search`.
    """

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        model: Any = None,
        vectors: Any = None,
        bm25: Any = None,
        docs: Any = None,
    ):
        self.path = Path(path)
        self.meta = meta
        self.model = model
        self.vectors = vectors  # the vector store: vectors.FaissStore or milvus.MilvusStore (dense kinds)
        self.bm25 = bm25
        self.docs = docs if docs is not None else DocStore(self.path, int(meta["count"]))

    # ------------------------------------------------------------------------------------ properties

    @property
    def kind(self) -> str:
        return self.meta["kind"]

    @property
    def count(self) -> int:
        return int(self.meta["count"])

    def __len__(self) -> int:
        return self.count

    @property
    def store(self) -> str:
        """Where the vectors live: "faiss" (vectors.faiss in the dir), "milvus" (a collection) or "bm25"."""
        return "bm25" if self.kind == "bm25" else self.meta.get("store", {}).get("kind", "faiss")

    @property
    def dim(self) -> int | None:
        return self.meta.get("dim")

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of the model the index was built with (None for BM25)."""
        model = self.meta.get("model")
        return model["fingerprint"] if model else None

    @property
    def template(self) -> str:
        """How instruction and query are joined at search time (the model's own template)."""
        if self.model is not None:
            return self.model.config.template
        return self.meta["bm25"]["template"]

    def document(self, i: int) -> dict[str, str]:
        """The ``i``-th document as {"_id", "title", "text"}."""
        return self.docs.get(i)

    def embeddings(self) -> np.ndarray:
        """All passage embeddings in index order (read from the shards; dense kinds only)."""
        if self.kind not in DENSE_KINDS:
            raise SettingsError("a BM25 index has no embeddings")
        paths = [shard_path(self.path, s) for s in range(self.meta["shards"])]
        if not all(p.exists() for p in paths) and self.kind != "ivf":  # shards deleted after the build
            return self.vectors.reconstruct(np.arange(self.count))
        shards = [np.load(p) for p in paths]
        return np.concatenate(shards) if shards else np.zeros((0, self.dim), dtype=np.float32)

    def close(self) -> None:
        self.docs.close()

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, kind={self.kind!r}, count={self.count}, model={self.meta.get('model')})"

    # ------------------------------------------------------------------------------------ build

    @classmethod
    def build(
        cls,
        model: Any,
        corpus: str | Path | Mapping[str, Any],
        output_dir: str | Path,
        settings: IndexSettings | None = None,
        *,
        device: str | None = None,
        progress: Progress | None = None,
        store: str = "faiss",
        uri: str | None = None,
        collection: str | None = None,
        overwrite: bool = False,
        **overrides: Any,
    ) -> Index:
        """Encode ``corpus`` with ``model`` and write an index to ``output_dir``; returns it loaded.

        ``model``: an :class:`~infembed.model.InFEmbed`, a model dir or hub name, or ``"default"``/None (the
        packaged all-MiniLM-L6-v2); ignored for ``kind="bm25"``. ``corpus``: a corpus.jsonl, a BEIR dir, or a mapping
        ``id -> Document | text``. Rerunning after an interruption resumes from the last complete shard; a dir
        holding a complete index of other inputs (model, corpus, settings) is refused unless ``overwrite``.

        ``settings``: an :class:`~infembed.search.settings.IndexSettings`; its fields may also be given as keyword
        arguments (``kind="hnsw", hnsw_m=16``), which win: ``kind``, ``batch_size``, ``shard_size``, and
        ``hnsw_m``/``ef_construction``/``ef_search`` (HNSW), ``nlist``/``nprobe`` (IVF; defaults from the corpus
        size).

        ``store``: ``"faiss"`` (vectors.faiss in ``output_dir``, the default) or ``"milvus"``: the vectors, the
        documents and the model fingerprint go into the Milvus collection ``collection`` (default: from the dir's
        name) at ``uri`` (a server, or a Milvus Lite file such as ``milvus.db``); :mod:`infembed.search.milvus`.
        """
        settings = IndexSettings.of(settings, **overrides)
        check_backend(settings.backend, device)
        kind = settings.kind
        if store not in STORES:
            raise SettingsError(f"store must be one of {', '.join(STORES)}, got {store!r}")
        if store == "milvus" and kind == "bm25":
            raise SettingsError(
                "a bm25 index has no vectors to put in Milvus: use --store faiss with --kind bm25"
            )
        if store == "milvus" and not uri:
            raise SettingsError(
                "the Milvus store needs a URI (--uri): a server (http://host:19530) or a .db file"
            )
        root = Path(output_dir)
        check_output_dir(root)
        docs = load_corpus(corpus)
        ids = list(docs)
        settings.check_count(len(ids))
        target = None
        if store == "milvus":
            from infembed.search.milvus import check_collection_name, default_collection, resolve_uri

            target = {
                "uri": resolve_uri(uri),
                "collection": check_collection_name(collection or default_collection(root)),
            }
        prepare_output(root)  # everything above is checked before the dir is made and the model loads
        if target is not None and "://" not in target["uri"]:
            writable_dir(Path(target["uri"]).parent)  # Milvus Lite opens its file only in an existing dir
        if kind == "bm25":
            build_bm25(docs, ids, root, overwrite=overwrite)
            return cls.load(root)
        model = resolve_model(model, device, settings.backend)
        build_dense(model, docs, ids, root, settings, progress=progress, milvus=target, overwrite=overwrite)
        return cls.load(root, model)

    # ------------------------------------------------------------------------------------ load

    @classmethod
    def load(
        cls,
        path: str | Path,
        model: Any = None,
        *,
        device: str | None = None,
        ef_search: int | None = None,
        nprobe: int | None = None,
        backend: str | None = None,
    ) -> Index:
        """Open an index dir. ``model`` (an InFEmbed, a model dir or name) must be the model the index was built
        with; None loads that model from the path recorded in index.json. A different model is refused.
        ``backend`` runs the model's queries (``"torch"``/``"openvino"``; either, whichever built the index)."""
        check_number("ef_search", ef_search, minimum=1, integer=True, optional=True)  # before any model loads
        check_backend(backend, device)
        check_number("nprobe", nprobe, minimum=1, integer=True, optional=True)
        root = Path(path)
        meta = open_meta(root)
        if meta["kind"] == "bm25":
            recorded = {k: meta["bm25"][k] for k in ("stopwords", "k1", "b") if k in meta["bm25"]}
            docs = DocStore(
                root, meta["count"]
            )  # before the BM25 index: a damaged dir fails on its documents first
            return cls(root, meta, bm25=BM25.load(root / BM25_DIR, BM25Settings(**recorded)), docs=docs)
        milvus = meta.get("store", {}).get("kind") == "milvus"
        docs = vector_store = None
        if not milvus:  # the files in the dir are checked before the model loads
            docs = DocStore(root, meta["count"])
            vector_store = vectors.FaissStore.read(root / FAISS_NAME, meta["faiss"])
            if vector_store.count != meta["count"]:
                raise DataError(
                    f"holds {vector_store.count} vectors, index.json says {meta['count']}",
                    root / FAISS_NAME,
                    hint=REBUILD,
                )
        recorded = meta["model"]
        if model is None:
            try:
                model = resolve_model(recorded["path"], device, backend)
            except (FileNotFoundError, OSError) as error:
                raise FileNotFoundError(
                    f"{root}: cannot load the model the index was built with ({recorded['path']}): {error}; "
                    "pass the model explicitly (--model)"
                ) from None
        else:
            model = resolve_model(model, device, backend)
        actual = model.fingerprint()
        if actual != recorded["fingerprint"]:
            raise IndexModelMismatch(
                f"{root} was built with model {recorded['path']} (fingerprint {recorded['fingerprint']}), but the "
                f"given model {model_spec(model)} has fingerprint {actual}: other weights or settings, so its query "
                "embeddings would not match the index. Search with "
                "the original model, or rebuild the index with this one (`infembed index --model ...`)"
            )
        if milvus:
            index = cls(root, meta, model=model, **open_for_index(root, meta, model))
            index.set_search_params(ef_search=ef_search, nprobe=nprobe)
            return index
        index = cls(root, meta, model=model, vectors=vector_store, docs=docs)
        index.set_search_params(
            ef_search=ef_search if ef_search is not None else meta["faiss"].get("ef_search"),
            nprobe=nprobe if nprobe is not None else meta["faiss"].get("nprobe"),
        )
        return index

    def set_search_params(self, *, ef_search: int | None = None, nprobe: int | None = None) -> None:
        """HNSW ``ef_search`` (candidates explored; higher = better recall, slower) and IVF ``nprobe`` (lists
        visited). Ignored for kinds they do not apply to."""
        check_number("ef_search", ef_search, minimum=1, integer=True, optional=True)
        check_number("nprobe", nprobe, minimum=1, integer=True, optional=True)
        if self.vectors is not None:
            self.vectors.set_search_params(ef_search=ef_search, nprobe=nprobe)

    # ------------------------------------------------------------------------------------ search

    def search(
        self,
        queries: str | Sequence[str],
        instructions: str | None | Sequence[str | None] = None,
        k: int = 10,
        *,
        batch_size: int = 32,
        exclusions: Any = DEFAULT_SPLITTER,
        exclusion_splitter: Callable[[str], Any] | None = None,
    ) -> list[Hit] | list[list[Hit]]:
        """The top ``k`` documents for each (query, instruction) pair, best first.

        ``queries`` is one string or a list; ``instructions`` is None, one string for all queries, or a list
        aligned with ``queries``. One query string gives its list of :class:`Hit` (``hits =
        index.search("q", "i")``); a list of queries gives one list of hits per query (``index.search(["q"])[0]``).
        A query gets fewer than ``k`` hits when the corpus is smaller, or, for BM25, when fewer documents share
        a term with it.

        ``exclusions`` (``"rules"`` by default, ``"off"``, ``"llm"`` with ``exclusion_splitter``, or
        :class:`~infembed.exclusions.ExclusionSettings`): an instruction that excludes something ("documents on X
        are not relevant") is searched with what it keeps, and documents matching an excluded aspect are pushed
        down (docs/instructions.md); the candidates are the top ``max(pool, 5k)`` by the kept part. Queries whose
        instruction excludes nothing get exactly the plain search. :meth:`split` shows the split used.
        """
        single = isinstance(queries, str)
        queries, instructions = _align(queries, instructions)
        if k < 1:
            raise SettingsError(f"k must be at least 1, got {k}")
        if not queries:
            return []
        for number, query in enumerate(queries, start=1):
            # an empty query would still be answered (by the instruction, or by nothing at all) with confident
            # looking hits: refuse it, as the service does
            if not isinstance(query, str) or not query.strip():
                where = f"query {number}" if len(queries) > 1 else "the query"
                raise SettingsError(
                    f"{where} is empty" if isinstance(query, str) else f"{where} is not a string"
                )
        for label, texts in (("query", queries), ("instruction", instructions)):
            for number, text in enumerate(texts, start=1):
                problem = lone_surrogate(text) if isinstance(text, str) else None
                if problem:
                    where = f"{label} {number}" if len(texts) > 1 else f"the {label}"
                    raise SettingsError(f"{where} holds {problem}")
        settings = self.exclusion_settings(exclusions)
        splits = self.split(instructions, settings, exclusion_splitter)
        plain_rows = [r for r, split in enumerate(splits) if not split.exclude]
        results: list[list[Hit]] = [[] for _ in queries]
        if plain_rows:
            plain_q = [queries[r] for r in plain_rows]
            plain_i = [instructions[r] for r in plain_rows]
            if self.kind == "bm25":
                scores, indices = self._bm25_search(plain_q, plain_i, k)
            else:
                vectors = self.model.encode_queries(plain_q, plain_i, batch_size=batch_size)
                scores, indices = self.search_vectors(vectors, k)
            for r, hits in zip(plain_rows, self.hits(scores, indices)):
                results[r] = hits
        excluding = [r for r, split in enumerate(splits) if split.exclude]
        if excluding:
            ranked = self._exclusion_search(
                [queries[r] for r in excluding], [splits[r] for r in excluding], k, settings, batch_size
            )
            for r, hits in zip(excluding, ranked):
                results[r] = hits
        return results[0] if single else results

    def _vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """The stored embeddings of these rows."""
        return self.vectors.reconstruct(np.asarray(rows, dtype=np.int64))

    def _bm25_texts(self, queries: Sequence[str], instructions: Sequence[str | None]) -> list[str]:
        from infembed.templates import join

        return [join(self.meta["bm25"]["template"], q, i) for q, i in zip(queries, instructions)]

    def _bm25_scores(self, queries: list[str], instructions: list[str | None]) -> np.ndarray:
        """BM25 scores of every joined (query, instruction) text against every document."""
        return self.bm25.scores(self._bm25_texts(queries, instructions))

    def encode_queries(
        self,
        queries: Sequence[str],
        instructions: Sequence[str | None] | None = None,
        *,
        batch_size: int = 32,
    ) -> np.ndarray:
        if self.model is None:
            raise SettingsError("a BM25 index has no embedding model")
        return self.model.encode_queries(queries, instructions, batch_size=batch_size)

    def search_vectors(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Vector-store search of query embeddings: (scores, row indices), both (n, min(k, count)); -1 marks no
        result."""
        if self.vectors is None:
            raise SettingsError("a BM25 index has no vectors")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        return self.vectors.search(vectors, min(k, self.count))

    def hits(self, scores: np.ndarray, indices: np.ndarray, k: int | None = None) -> list[list[Hit]]:
        """Turn (scores, indices) rows into Hits, dropping -1 (no result) and keeping at most ``k``."""
        wanted = sorted(
            {int(i) for row in indices for i in (row[row >= 0] if k is None else row[row >= 0][:k])}
        )
        fetched = dict(zip(wanted, self._documents(wanted)))
        out = []
        for row_scores, row_indices in zip(scores, indices):
            row = []
            for score, i in zip(row_scores, row_indices):
                if i < 0:
                    continue
                doc = fetched[int(i)]
                row.append(Hit(id=doc["_id"], score=float(score), title=doc["title"], text=doc["text"]))
                if k is not None and len(row) >= k:
                    break
            out.append(row)
        return out

    def _documents(self, rows: list[int]) -> list[dict[str, str]]:
        """Documents of these rows: one request for a Milvus store, local reads for docs.jsonl."""
        if hasattr(self.docs, "get_many"):
            return self.docs.get_many(rows) if rows else []
        return [self.docs.get(i) for i in rows]

    def _bm25_search(
        self, queries: list[str], instructions: list[str | None], k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.bm25.top_k(self._bm25_texts(queries, instructions), k)


# --------------------------------------------------------------------------------------------- helpers


def _align(
    queries: str | Sequence[str], instructions: str | None | Sequence[str | None]
) -> tuple[list[str], list[str | None]]:
    if isinstance(queries, str):
        queries = [queries]
    queries = list(queries)
    if instructions is None or isinstance(instructions, str):
        instructions = [instructions] * len(queries)
    instructions = list(instructions)
    if len(instructions) != len(queries):
        raise SettingsError(f"{len(queries)} queries but {len(instructions)} instructions")
    return queries, instructions
