"""A corpus index: build it once from a model and a corpus, then search it with (query, instruction) pairs.

    >>> from infembed.search import Index
    >>> index = Index.build("default", "corpus.jsonl", "my-index")           # faiss exact inner product
    >>> hits = index.search(["heat transfer in hypersonic flow"], ["Only wind-tunnel experiments."], k=5)[0]
    >>> hits[0].id, hits[0].score, hits[0].title
    >>> Index.load("my-index").search("another query", k=3)                    # reloads the same model

Layout of an index dir (every file is written atomically: a killed build never leaves a torn file)::

    index.json          kind, count, dim, the model (path, fingerprint, template) and search settings;
                        present only once the build has finished, so its presence means "complete"
    build.json          what the shards were encoded from (model fingerprint, corpus digest, shard size):
                        a rerun with the same inputs resumes, a rerun with other inputs starts over
    docs.jsonl          {"_id", "title", "text"} per document, in index order
    docs.offsets.npy    byte offset of each line of docs.jsonl (documents are read on demand, not held in memory)
    shards/shard-NNNNN.npy   float32 passage embeddings, ``shard_size`` documents each (dense kinds)
    vectors.faiss       the faiss index (dense kinds)
    bm25/               the bm25s index (kind "bm25")

Kinds: ``flat`` (exact inner product, the default and right up to a few million passages on CPU), ``hnsw``
(graph search; sub-linear, approximate, tune ``ef_search`` for recall), ``ivf`` (inverted lists; needs
training, tune ``nprobe``), and ``bm25`` (lexical, no model; for comparison through the same interface).

Encoding is resumable: each shard of ``shard_size`` documents is saved on its own as soon as it is encoded,
and a rerun skips the shards already on disk. Under ``torchrun`` (``WORLD_SIZE`` > 1) every rank encodes its
share of the shards (shard ``i`` goes to rank ``i % world_size``) and rank 0 assembles the faiss index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError
from infembed.data.jsonl import atomic_write, write_json
from infembed.data.records import Document

INDEX_FORMAT = 1
KINDS = ("flat", "hnsw", "ivf", "bm25")
DENSE_KINDS = ("flat", "hnsw", "ivf")
META_NAME = "index.json"
BUILD_NAME = "build.json"
DOCS_NAME = "docs.jsonl"
OFFSETS_NAME = "docs.offsets.npy"
SHARD_DIR = "shards"
FAISS_NAME = "vectors.faiss"
BM25_DIR = "bm25"
_OWN_FILES = {META_NAME, BUILD_NAME, DOCS_NAME, OFFSETS_NAME, SHARD_DIR, FAISS_NAME, BM25_DIR}

Progress = Callable[[int, int], None]
"""``progress(documents_done, documents_total)``, called after each shard (skipped shards count as done)."""


class IndexModelMismatch(ValueError):
    """The model given to :meth:`Index.load` is not the one the index was built with."""


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


# --------------------------------------------------------------------------------------------- inputs


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
                raise ValueError(
                    f"document {doc_id!r}: expected a Document, a string or a dict, got {type(value).__name__}"
                )
        if not corpus:
            raise ValueError("the corpus is empty")
        return corpus
    from infembed.data.formats import read_corpus

    path = Path(spec)
    if path.is_dir():
        if not (path / "corpus.jsonl").exists():
            raise DataError("no corpus.jsonl in this directory", path, hint="give corpus.jsonl or a BEIR dir")
        path = path / "corpus.jsonl"
    return read_corpus(path)


def _resolve_model(model: Any, device: str | None):
    from infembed.model import InFEmbed

    if model is None or isinstance(model, (str, Path)):
        return InFEmbed.load(None if model is None else str(model), device=device)
    return model


def _model_spec(model: Any) -> str:
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


def _corpus_digest(ids: Sequence[str], corpus: Mapping[str, Document]) -> str:
    digest = hashlib.sha256()
    for doc_id in ids:
        doc = corpus[doc_id]
        for part in (doc_id, doc.title, doc.text):
            digest.update(part.encode())
            digest.update(b"\0")
    return digest.hexdigest()[:32]


def document_text(doc: Document) -> str:
    """What gets embedded (and BM25-tokenised): title and text, as sentence-transformers/BEIR join them."""
    return doc.full_text(" ")


# --------------------------------------------------------------------------------------------- storage


class _DocStore:
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
        _save_npy(root / OFFSETS_NAME, offsets)


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_write(path, "wb") as handle:
        np.save(handle, array)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _shard_path(root: Path, shard: int) -> Path:
    return root / SHARD_DIR / f"shard-{shard:05d}.npy"


def _shard_ok(path: Path, rows: int, dim: int) -> bool:
    """A shard counts as done only if it loads with the expected shape (a truncated file is redone)."""
    try:
        array = np.load(path, mmap_mode="r")
    except (FileNotFoundError, ValueError, OSError, EOFError):
        return False
    return array.shape == (rows, dim) and array.dtype == np.float32


@contextlib.contextmanager
def _distributed() -> Any:
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


# --------------------------------------------------------------------------------------------- the index


class Index:
    """A searchable corpus: faiss vectors (or a BM25 index), the documents and the model that encodes queries.

    Build with :meth:`build`, reopen with :meth:`load`, query with :meth:`search`.
    """

    def __init__(
        self, path: Path, meta: dict[str, Any], model: Any = None, vectors: Any = None, bm25: Any = None
    ):
        self.path = Path(path)
        self.meta = meta
        self.model = model
        self.vectors = vectors
        self.bm25 = bm25
        self.docs = _DocStore(self.path)

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
            raise ValueError("a BM25 index has no embeddings")
        paths = [_shard_path(self.path, s) for s in range(self.meta["shards"])]
        if not all(p.exists() for p in paths) and self.kind != "ivf":  # shards deleted after the build
            return self.vectors.reconstruct_n(0, self.count)
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
        *,
        kind: str = "flat",
        shard_size: int = 4096,
        batch_size: int = 32,
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        nlist: int | None = None,
        nprobe: int | None = None,
        device: str | None = None,
        progress: Progress | None = None,
    ) -> Index:
        """Encode ``corpus`` with ``model`` and write an index to ``output_dir``; returns it loaded.

        ``model``: an :class:`~infembed.model.InFEmbed`, a model dir or hub name, or ``"default"``/None (the
        packaged all-MiniLM-L6-v2); ignored for ``kind="bm25"``. ``corpus``: a corpus.jsonl, a BEIR dir, or a mapping
        ``id -> Document | text``. Rerunning after an interruption resumes from the last complete shard.
        ``hnsw_m``/``ef_construction``/``ef_search`` tune HNSW, ``nlist``/``nprobe`` tune IVF (defaults from
        the corpus size).
        """
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if shard_size < 1 or batch_size < 1:
            raise ValueError("shard_size and batch_size must be at least 1")
        root = Path(output_dir)
        _check_output_dir(root)
        docs = load_corpus(corpus)
        ids = list(docs)
        if kind == "bm25":
            return cls._build_bm25(docs, ids, root)
        model = _resolve_model(model, device)
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
            "corpus_sha256": _corpus_digest(ids, docs),
        }
        with _distributed() as (rank, world, barrier):
            if rank == 0:
                root.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(root / META_NAME)  # index.json exists only while the dir is a complete index
                docs_present = (root / DOCS_NAME).exists() and (root / OFFSETS_NAME).exists()
                if _read_json(root / BUILD_NAME) != manifest or not docs_present:
                    shutil.rmtree(root / SHARD_DIR, ignore_errors=True)  # other inputs: old shards are stale
                    _DocStore.write(root, ids, docs)
                    write_json(root / BUILD_NAME, manifest)
                (root / SHARD_DIR).mkdir(exist_ok=True)
            barrier()
            done = 0
            mine = [s for s in range(shards) if s % world == rank]
            for shard in mine:
                lo, hi = shard * shard_size, min(count, (shard + 1) * shard_size)
                path = _shard_path(root, shard)
                if not _shard_ok(path, hi - lo, dim):
                    texts = [document_text(docs[d]) for d in ids[lo:hi]]
                    vectors = model.encode_passages(texts, batch_size=batch_size)
                    _save_npy(path, np.ascontiguousarray(vectors, dtype=np.float32))
                done += hi - lo
                if progress is not None:
                    progress(done if world == 1 else min(count, done * world), count)
            barrier()
            if rank == 0:
                settings = _faiss_settings(kind, count, hnsw_m, ef_construction, ef_search, nlist, nprobe)
                index = _assemble_faiss(root, kind, dim, count, shards, settings)
                _write_faiss(index, root / FAISS_NAME)
                meta = {
                    "format": INDEX_FORMAT,
                    "kind": kind,
                    "count": count,
                    "dim": dim,
                    "shards": shards,
                    "shard_size": shard_size,
                    "model": {
                        "path": _model_spec(model),
                        "fingerprint": fingerprint,
                        "template": model.config.template,
                        "interaction": model.config.interaction,
                        "pooling": model.config.pooling,
                        "passage_max_length": model.config.passage_max_length,
                    },
                    "faiss": settings,
                    "corpus_sha256": manifest["corpus_sha256"],
                    "world_size": world,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "versions": _versions(),
                }
                write_json(root / META_NAME, meta)
                shutil.rmtree(root / BM25_DIR, ignore_errors=True)  # from an earlier bm25 build of this dir
            barrier()
        return cls.load(root, model)

    @classmethod
    def _build_bm25(
        cls, docs: Mapping[str, Document], ids: list[str], root: Path, stopwords: str = "en"
    ) -> Index:
        import bm25s

        from infembed.model.interaction import DEFAULT_TEMPLATE

        root.mkdir(parents=True, exist_ok=True)
        # A dense build's leftovers would no longer match docs.jsonl: drop them (and the resume manifest).
        for name in (META_NAME, BUILD_NAME, FAISS_NAME):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(root / name)
        shutil.rmtree(root / SHARD_DIR, ignore_errors=True)
        _DocStore.write(root, ids, docs)
        tokens = bm25s.tokenize(
            [document_text(docs[d]) for d in ids], stopwords=stopwords, show_progress=False
        )
        bm25 = bm25s.BM25()
        bm25.index(tokens, show_progress=False)
        tmp = Path(tempfile.mkdtemp(prefix=".bm25.", dir=root))
        bm25.save(str(tmp), show_progress=False)
        shutil.rmtree(root / BM25_DIR, ignore_errors=True)
        os.replace(tmp, root / BM25_DIR)
        meta = {
            "format": INDEX_FORMAT,
            "kind": "bm25",
            "count": len(ids),
            "dim": None,
            "model": None,
            "bm25": {"stopwords": stopwords, "k1": bm25.k1, "b": bm25.b, "template": DEFAULT_TEMPLATE},
            "corpus_sha256": _corpus_digest(ids, docs),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": _versions(),
        }
        write_json(root / META_NAME, meta)
        return cls.load(root)

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
    ) -> Index:
        """Open an index dir. ``model`` (an InFEmbed, a model dir or name) must be the model the index was built
        with; None loads that model from the path recorded in index.json. A different model is refused."""
        root = Path(path)
        meta = _read_json(root / META_NAME)
        if meta is None:
            if (root / BUILD_NAME).exists():
                raise DataError(
                    "the index build did not finish",
                    root,
                    hint="rerun `infembed index` with the same arguments; it resumes from the last complete shard",
                )
            if not root.exists():
                raise FileNotFoundError(f"{root}: no such index directory")
            raise DataError(
                "not an infembed index (no index.json)", root, hint="build one with `infembed index`"
            )
        if meta.get("format") != INDEX_FORMAT:
            raise DataError(
                f"index format {meta.get('format')!r} is not supported (expected {INDEX_FORMAT})",
                root / META_NAME,
            )
        if meta["kind"] == "bm25":
            import bm25s

            bm25 = bm25s.BM25.load(str(root / BM25_DIR), show_progress=False)
            return cls(root, meta, bm25=bm25)
        import faiss

        recorded = meta["model"]
        if model is None:
            try:
                model = _resolve_model(recorded["path"], device)
            except (FileNotFoundError, OSError) as error:
                raise FileNotFoundError(
                    f"{root}: cannot load the model the index was built with ({recorded['path']}): {error}; "
                    "pass the model explicitly (--model)"
                ) from None
        else:
            model = _resolve_model(model, device)
        actual = model.fingerprint()
        if actual != recorded["fingerprint"]:
            raise IndexModelMismatch(
                f"{root} was built with model {recorded['path']} (fingerprint {recorded['fingerprint']}), but the "
                f"given model {_model_spec(model)} has fingerprint {actual}: other weights or settings, so its query "
                "embeddings would not match the index. Search with "
                "the original model, or rebuild the index with this one (`infembed index --model ...`)"
            )
        vectors = faiss.read_index(str(root / FAISS_NAME))
        if vectors.ntotal != meta["count"]:
            raise DataError(
                f"{FAISS_NAME} holds {vectors.ntotal} vectors, index.json says {meta['count']}", root
            )
        index = cls(root, meta, model=model, vectors=vectors)
        index.set_search_params(
            ef_search=ef_search if ef_search is not None else meta["faiss"].get("ef_search"),
            nprobe=nprobe if nprobe is not None else meta["faiss"].get("nprobe"),
        )
        return index

    def set_search_params(self, *, ef_search: int | None = None, nprobe: int | None = None) -> None:
        """HNSW ``ef_search`` (candidates explored; higher = better recall, slower) and IVF ``nprobe`` (lists
        visited). Ignored for kinds they do not apply to."""
        if self.kind == "hnsw" and ef_search is not None:
            self.vectors.hnsw.efSearch = int(ef_search)
        if self.kind == "ivf" and nprobe is not None:
            self.vectors.nprobe = int(nprobe)

    # ------------------------------------------------------------------------------------ search

    def search(
        self,
        queries: str | Sequence[str],
        instructions: str | None | Sequence[str | None] = None,
        k: int = 10,
        *,
        batch_size: int = 32,
        exclusions: Any = "rules",
        exclusion_splitter: Callable[[str], Any] | None = None,
    ) -> list[list[Hit]]:
        """The top ``k`` documents for each (query, instruction) pair, best first.

        ``queries`` is a list (or one string); ``instructions`` is None, one string for all queries, or a list
        aligned with ``queries``. Returns one list of :class:`Hit` per query (fewer than ``k`` when the corpus
        is smaller, or, for BM25, when fewer documents share a term with the query).

        ``exclusions`` (``"rules"`` by default, ``"off"``, ``"llm"`` with ``exclusion_splitter``, or
        :class:`~infembed.exclusions.ExclusionSettings`): an instruction that excludes something ("documents on X
        are not relevant") is searched with what it keeps, and documents matching an excluded aspect are pushed
        down (docs/instructions.md); the candidates are the top ``max(pool, 5k)`` by the kept part. Queries whose
        instruction excludes nothing get exactly the plain search. :meth:`split` shows the split used.
        """
        queries, instructions = _align(queries, instructions)
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if not queries:
            return []
        for number, query in enumerate(queries, start=1):
            # an empty query would still be answered (by the instruction, or by nothing at all) with confident
            # looking hits: refuse it, as the service does
            if not isinstance(query, str) or not query.strip():
                where = f"query {number}" if len(queries) > 1 else "the query"
                raise ValueError(f"{where} is empty" if isinstance(query, str) else f"{where} is not a string")
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
            ranked = self._exclusion_search([queries[r] for r in excluding], [splits[r] for r in excluding], k,
                                            settings, batch_size)
            for r, hits in zip(excluding, ranked):
                results[r] = hits
        return results

    def exclusion_settings(self, exclusions: Any = "rules") -> Any:
        """The exclusion settings a search uses: the model's fitted ones (infembed.json) or the defaults."""
        from infembed.exclusions import DEFAULTS, ExclusionSettings, resolve_exclusions

        if self.kind == "bm25":
            default = DEFAULTS["bm25"]
        else:
            fitted = getattr(self.model.config, "exclusions", None)
            default = ExclusionSettings.from_json(fitted) if fitted else DEFAULTS["dense"]
        return resolve_exclusions(exclusions, default)

    def split(self, instructions: Sequence[str | None], settings: Any = None,
              exclusion_splitter: Callable[[str], Any] | None = None) -> list[Any]:
        """Each instruction's :class:`~infembed.instructions.Instruction` as :meth:`search` uses it."""
        from infembed.instructions import Instruction, split_instructions

        settings = settings if settings is not None else self.exclusion_settings("rules")
        if not settings.enabled:
            return [Instruction((i or "").strip()) for i in instructions]
        if settings.splitter == "llm" and exclusion_splitter is None:
            raise ValueError("exclusions 'llm' needs an exclusion_splitter (infembed.instructions.llm_splitter)")
        return split_instructions(list(instructions), exclusion_splitter or settings.splitter)

    def _exclusion_search(self, queries: list[str], splits: list[Any], k: int, settings: Any,
                          batch_size: int) -> list[list[Hit]]:
        """Keep-part candidates, then the exclusion penalty over them (infembed.exclusions)."""
        from infembed.exclusions import penalised_scores

        depth = min(self.count, max(settings.pool, 5 * k))
        keeps = [s.keep or None for s in splits]
        if self.kind == "bm25":
            all_scores = self._bm25_scores(queries, keeps)
            candidates = [np.argsort(-row, kind="stable")[:depth] for row in all_scores]
            keep_scores = [row[c] for row, c in zip(all_scores, candidates)]
        else:
            vectors = self.model.encode_queries(queries, keeps, batch_size=batch_size)
            scores, indices = self.search_vectors(vectors, depth)
            candidates = [row[row >= 0] for row in indices]
            keep_scores = [s[i >= 0] for s, i in zip(scores, indices)]
        texts = [t for s in splits for t in (*s.exclude, *(g for g in s.guards if g))]
        text_scores = self._text_scores(texts, candidates, splits, batch_size)
        out = []
        for row in range(len(splits)):
            aspect_rows, guard_rows = text_scores[row]
            final = penalised_scores(keep_scores[row], aspect_rows, settings, guards=guard_rows)
            order = np.argsort(-final, kind="stable")[:k]
            out.append(self.hits(final[order][None], candidates[row][order][None])[0])
        return out

    def _text_scores(self, texts: list[str], candidates: list[np.ndarray], splits: list[Any],
                     batch_size: int) -> list[tuple[np.ndarray, list[np.ndarray | None]]]:
        """Per query, the scores of its aspects (m, n_candidates) and guards against its candidates."""
        if self.kind == "bm25":
            matrix = self._bm25_scores(texts, [None] * len(texts)) if texts else np.zeros((0, self.count))
        else:
            vectors = self.model.encode_queries(texts, None, batch_size=batch_size) if texts else None
        out, cursor = [], 0
        for row, split in enumerate(splits):
            cand = candidates[row]
            n_texts = len(split.exclude) + sum(1 for g in split.guards if g)
            if self.kind == "bm25":
                block = matrix[cursor:cursor + n_texts][:, cand]
            else:
                block = vectors[cursor:cursor + n_texts] @ self._vectors_of(cand).T
            cursor += n_texts
            aspects = block[: len(split.exclude)]
            guard_iter = iter(block[len(split.exclude):])
            guards = [next(guard_iter) if split.guard_of(j) else None for j in range(len(split.exclude))]
            out.append((aspects, guards))
        return out

    def _vectors_of(self, rows: np.ndarray) -> np.ndarray:
        """The stored embeddings of these rows (faiss reconstruct; IVF gets a direct map once)."""
        if self.kind == "ivf" and not getattr(self, "_direct_map", False):
            import faiss

            faiss.extract_index_ivf(self.vectors).make_direct_map()
            self._direct_map = True
        return self.vectors.reconstruct_batch(np.asarray(rows, dtype=np.int64))

    def _bm25_scores(self, queries: list[str], instructions: list[str | None]) -> np.ndarray:
        """BM25 scores of every joined (query, instruction) text against every document."""
        import bm25s

        from infembed.templates import join

        settings = self.meta["bm25"]
        texts = [join(settings["template"], q, i) for q, i in zip(queries, instructions)]
        tokens = bm25s.tokenize(texts, stopwords=settings["stopwords"], return_ids=False, show_progress=False)
        return np.stack([self.bm25.get_scores(t) for t in tokens]).astype(np.float32)

    def encode_queries(
        self,
        queries: Sequence[str],
        instructions: Sequence[str | None] | None = None,
        *,
        batch_size: int = 32,
    ) -> np.ndarray:
        if self.model is None:
            raise ValueError("a BM25 index has no embedding model")
        return self.model.encode_queries(queries, instructions, batch_size=batch_size)

    def search_vectors(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """faiss search of query embeddings: (scores, row indices), both (n, min(k, count)); -1 marks no result."""
        if self.vectors is None:
            raise ValueError("a BM25 index has no vectors")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        return self.vectors.search(vectors, min(k, self.count))

    def hits(self, scores: np.ndarray, indices: np.ndarray, k: int | None = None) -> list[list[Hit]]:
        """Turn (scores, indices) rows into Hits, dropping -1 (no result) and keeping at most ``k``."""
        out = []
        for row_scores, row_indices in zip(scores, indices):
            row = []
            for score, i in zip(row_scores, row_indices):
                if i < 0:
                    continue
                doc = self.docs.get(int(i))
                row.append(Hit(id=doc["_id"], score=float(score), title=doc["title"], text=doc["text"]))
                if k is not None and len(row) >= k:
                    break
            out.append(row)
        return out

    def _bm25_search(
        self, queries: list[str], instructions: list[str | None], k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        import bm25s

        from infembed.model.interaction import join

        settings = self.meta["bm25"]
        texts = [join(settings["template"], q, i) for q, i in zip(queries, instructions)]
        tokens = bm25s.tokenize(texts, stopwords=settings["stopwords"], return_ids=False, show_progress=False)
        result = self.bm25.retrieve(tokens, k=min(k, self.count), show_progress=False)
        indices = np.where(result.scores > 0, result.documents, -1)  # no shared term: not a result
        return result.scores, indices


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
        raise ValueError(f"{len(queries)} queries but {len(instructions)} instructions")
    return queries, instructions


def _check_output_dir(root: Path) -> None:
    """Refuse to write into a dir that holds anything but an (old or partial) infembed index."""
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


def _faiss_settings(
    kind: str,
    count: int,
    hnsw_m: int,
    ef_construction: int,
    ef_search: int,
    nlist: int | None,
    nprobe: int | None,
) -> dict[str, Any]:
    if kind == "flat":
        return {"type": "IndexFlatIP"}
    if kind == "hnsw":
        return {
            "type": "IndexHNSWFlat",
            "M": hnsw_m,
            "ef_construction": ef_construction,
            "ef_search": ef_search,
        }
    # faiss wants >= 39 training points per list; 4 * sqrt(n) lists is its usual starting point.
    nlist = nlist or max(1, min(int(4 * np.sqrt(count)), count // 39))
    return {"type": "IndexIVFFlat", "nlist": int(nlist), "nprobe": int(nprobe or min(nlist, 32))}


def _iter_shards(root: Path, shards: int) -> Iterable[np.ndarray]:
    for shard in range(shards):
        yield np.load(_shard_path(root, shard))


def _assemble_faiss(
    root: Path, kind: str, dim: int, count: int, shards: int, settings: dict[str, Any]
) -> Any:
    import faiss

    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, settings["M"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings["ef_construction"]
    else:
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, settings["nlist"], faiss.METRIC_INNER_PRODUCT)
        index.train(_training_sample(root, shards, count, settings["nlist"] * 256))
    for vectors in _iter_shards(root, shards):
        index.add(vectors)
    return index


def _training_sample(root: Path, shards: int, count: int, size: int, seed: int = 0) -> np.ndarray:
    """A uniform sample of rows across all shards (the corpus may be sorted, so not just the first rows)."""
    if count <= size:
        return np.concatenate(list(_iter_shards(root, shards)))
    rows = np.sort(np.random.default_rng(seed).choice(count, size=size, replace=False))
    parts, start = [], 0
    for shard in range(shards):
        array = np.load(_shard_path(root, shard), mmap_mode="r")
        stop = start + len(array)
        local = rows[(rows >= start) & (rows < stop)] - start
        parts.append(np.asarray(array[local]))
        start = stop
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def _write_faiss(index: Any, path: Path) -> None:
    import faiss

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        faiss.write_index(index, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _versions() -> dict[str, str]:
    import faiss

    from infembed import __version__

    return {"infembed": __version__, "faiss": faiss.__version__}
