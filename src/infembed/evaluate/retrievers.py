"""Retrievers behind one protocol, so BM25, dense models and future rerankers are interchangeable.

A retriever is prepared once on a corpus (:meth:`Retriever.index`) and then scores any number of
(query, instruction) lists (:meth:`Retriever.retrieve`), either over the whole corpus (top ``k``) or over each
query's own candidate list (reranking, as FollowIR does with ``top_ranked``). The dense retriever encodes the
corpus once and reuses it for the og and changed runs; embeddings are also cached on disk, keyed by the model
fingerprint and the exact texts, so a second evaluation of the same model skips corpus encoding.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from infembed import cache_dir
from infembed.data.errors import SettingsError
from infembed.data.jsonl import atomic_write
from infembed.data.records import Document
from infembed.exclusions import DEFAULTS, ExclusionSettings, exclusion_aware_scores, resolve_exclusions
from infembed.instructions import Instruction
from infembed.search.bm25 import BM25, BM25Settings
from infembed.templates import DEFAULT_TEMPLATE, join, resolve_template

Run = dict[str, dict[str, float]]


@runtime_checkable
class Retriever(Protocol):
    name: str
    template: str

    def index(self, corpus: Mapping[str, Document]) -> None: ...

    def retrieve(
        self,
        query_ids: Sequence[str],
        queries: Sequence[str],
        instructions: Sequence[str | None],
        *,
        top_k: int = 1000,
        candidates: Mapping[str, Sequence[str]] | None = None,
    ) -> Run: ...


def top_k_run(
    scores: np.ndarray,
    query_ids: Sequence[str],
    doc_ids: Sequence[str],
    top_k: int,
    candidates: Mapping[str, Sequence[str]] | None = None,
    doc_index: Mapping[str, int] | None = None,
) -> Run:
    """Turn a (queries x docs) score matrix into a run dict keeping each query's top ``k`` (or its candidates)."""
    run: Run = {}
    for row, qid in enumerate(query_ids):
        if candidates is not None:
            cand = [d for d in candidates.get(qid, ()) if d in doc_index]
            idx = np.fromiter((doc_index[d] for d in cand), dtype=np.int64, count=len(cand))
            run[qid] = {doc_ids[i]: float(scores[row, i]) for i in idx}
            continue
        run[qid] = {doc_ids[i]: float(scores[row, i]) for i in _top_k_indices(scores[row], doc_ids, top_k)}
    return run


def _top_k_indices(row: np.ndarray, doc_ids: Sequence[str], k: int) -> np.ndarray:
    """The first ``k`` documents in the order every metric uses: score descending, ties by doc id descending
    (pytrec_eval and mteb), so a cut run scores like the full run at any cut-off <= k."""
    n = row.shape[0]
    if k >= n:
        return np.arange(n)
    kth = np.partition(row, n - k)[n - k]
    above = np.flatnonzero(row > kth)
    tied = sorted(np.flatnonzero(row == kth), key=lambda i: doc_ids[i], reverse=True)
    return np.concatenate([above, np.asarray(tied[: k - len(above)], dtype=np.int64)])


def candidate_pools(
    query_ids: Sequence[str], candidates: Mapping[str, Sequence[str]] | None, doc_index: Mapping[str, int]
) -> list[np.ndarray] | None:
    """Each query's candidate documents as indices (the pool exclusion scores are standardised over)."""
    if candidates is None:
        return None
    return [
        np.fromiter((doc_index[d] for d in candidates.get(q, ()) if d in doc_index), dtype=np.int64)
        for q in query_ids
    ]


class _ExclusionAware:
    """Shared by the retrievers: exclusion settings and the splitter (a callable for ``llm``)."""

    exclusions: ExclusionSettings
    exclusion_splitter: Callable[[str], Instruction] | None = None

    def _set_exclusions(self, exclusions, default: ExclusionSettings, splitter) -> None:
        self.exclusions = resolve_exclusions(exclusions, default)
        self.exclusion_splitter = splitter
        if self.exclusions.splitter == "llm" and splitter is None:
            raise SettingsError(
                "exclusions 'llm' needs an endpoint (--exclusion-llm-url and --exclusion-llm-model)"
            )

    def _scores(self, score_pairs, query_ids, queries, instructions, candidates) -> np.ndarray:
        pools = candidate_pools(query_ids, candidates, self.doc_index) if candidates is not None else None
        return exclusion_aware_scores(
            score_pairs,
            list(queries),
            list(instructions),
            self.exclusions,
            self.exclusion_splitter,
            pools,
            lexical_scores=self.lexical_scores,
        )

    def lexical_scores(self, texts: Sequence[str]) -> np.ndarray:
        """BM25 scores of texts (excluded aspects) against the indexed documents (``aspect_scorer="bm25"``)."""
        raise NotImplementedError


class BM25Retriever(_ExclusionAware):
    """Okapi BM25 through bm25s (English stopwords, no stemming by default, as in the dev-set reference).

    ``exclusions`` (``"off"``, ``"rules"``, ``"llm"`` or :class:`ExclusionSettings`) turns on exclusion-aware
    scoring (:mod:`infembed.exclusions`) with the settings fitted for BM25."""

    name = "bm25"

    def __init__(
        self,
        template: str | None = None,
        *,
        stopwords: str | None = "en",
        stemmer: str | None = None,
        k1: float = 1.5,
        b: float = 0.75,
        exclusions: ExclusionSettings | str | None = None,
        exclusion_splitter: Callable[[str], Instruction] | None = None,
    ):
        self.template = resolve_template(template or DEFAULT_TEMPLATE)
        self._set_exclusions(exclusions, DEFAULTS["bm25"], exclusion_splitter)
        self.settings = BM25Settings(stopwords=stopwords, stemmer=stemmer, k1=k1, b=b)
        self._bm25: BM25 | None = None

    def index(self, corpus: Mapping[str, Document]) -> None:
        self.doc_ids = list(corpus)
        self.doc_index = {d: i for i, d in enumerate(self.doc_ids)}
        self._bm25 = BM25(self.settings).index([corpus[d].full_text() for d in self.doc_ids])

    def retrieve(self, query_ids, queries, instructions, *, top_k=1000, candidates=None) -> Run:
        if self._bm25 is None:
            raise RuntimeError("call index(corpus) first")
        scores = self._scores(self.score_pairs, query_ids, queries, instructions, candidates)
        return top_k_run(scores, query_ids, self.doc_ids, top_k, candidates, self.doc_index)

    def score_pairs(self, queries: Sequence[str], instructions: Sequence[str | None]) -> np.ndarray:
        """BM25 scores of each joined (query, instruction) text against every indexed document."""
        return self._bm25.scores([join(self.template, q, i) for q, i in zip(queries, instructions)])

    def lexical_scores(self, texts: Sequence[str]) -> np.ndarray:
        return self._bm25.scores(list(texts))


class DenseRetriever(_ExclusionAware):
    """Exact inner-product search over L2-normalised embeddings of an :class:`~infembed.model.InFEmbed` model.

    ``exclusions`` as for :class:`BM25Retriever`; the settings are the model's own fit (``infembed.json``), or
    the dense defaults fitted on the base MiniLM. ``backend`` (``"torch"``/``"openvino"``; None: the model's
    own) switches the model to it (:meth:`InFEmbed.use_backend`; the model object is changed, not copied)."""

    def __init__(
        self,
        model,
        *,
        batch_size: int = 32,
        cache: bool = True,
        template: str | None = None,
        show_progress: bool = True,
        exclusions: ExclusionSettings | str | None = None,
        exclusion_splitter: Callable[[str], Instruction] | None = None,
        backend: str | None = None,
    ):
        if backend is not None and backend != getattr(model, "backend", "torch"):
            model.use_backend(backend)
        self.model = model
        fitted = getattr(getattr(model, "config", None), "exclusions", None)
        self._set_exclusions(
            exclusions,
            ExclusionSettings.from_json(fitted) if fitted else DEFAULTS["dense"],
            exclusion_splitter,
        )
        # the override lives here, not on the (possibly shared) model object
        if template is not None and getattr(model, "interaction", None) is not None:
            raise SettingsError(
                "--template applies to concatenation models only; this model uses cross-attention"
            )
        self._template = resolve_template(template) if template is not None else None
        self.batch_size = batch_size
        self.cache = cache
        self.show_progress = show_progress
        self.name = getattr(model, "source", None) or model.config.base_model or "dense"
        self._embeddings: np.ndarray | None = None
        self._texts: list[str] = []
        self._lexical: BM25 | None = None

    @property
    def template(self) -> str:
        return self._template or self.model.config.template

    def _cache_file(self, texts: Sequence[str]) -> Path:
        digest = hashlib.sha256()
        for text in texts:
            digest.update(text.encode())
            digest.update(b"\0")
        key = f"{self.model.fingerprint()}-{self.model.config.passage_max_length}-{digest.hexdigest()[:20]}"
        backend = getattr(self.model, "backend", "torch")
        if backend != "torch":  # equal within 1e-5 cosine, not bit for bit: each backend has its own cache
            key += f"-{backend}"
        return cache_dir() / "embeddings" / f"{key}.npy"

    def index(self, corpus: Mapping[str, Document], doc_ids: Sequence[str] | None = None) -> None:
        self.doc_ids = list(doc_ids) if doc_ids is not None else list(corpus)
        self.doc_index = {d: i for i, d in enumerate(self.doc_ids)}
        texts = [corpus[d].full_text() for d in self.doc_ids]
        self._texts, self._lexical = texts, None
        path = self._cache_file(texts) if self.cache else None
        if path is not None and path.exists():
            self._embeddings = np.load(path)
            return
        self._embeddings = self.model.encode_passages(
            texts, batch_size=self.batch_size, progress="encoding corpus" if self.show_progress else None
        )
        if path is not None:
            with atomic_write(path, "wb") as handle:
                np.save(handle, self._embeddings)

    def retrieve(self, query_ids, queries, instructions, *, top_k=1000, candidates=None) -> Run:
        if self._embeddings is None:
            raise RuntimeError("call index(corpus) first")
        scores = self._scores(self.score_pairs, query_ids, queries, instructions, candidates)
        return top_k_run(scores, query_ids, self.doc_ids, top_k, candidates, self.doc_index)

    def lexical_scores(self, texts: Sequence[str]) -> np.ndarray:
        if self._lexical is None:  # built on first use: only instructions that exclude need it
            self._lexical = BM25().index(self._texts)
        return self._lexical.scores(texts)

    def score_pairs(self, queries: Sequence[str], instructions: Sequence[str | None]) -> np.ndarray:
        """Cosine of each (query, instruction) embedding with every indexed document."""
        q = self.model.encode_queries(
            list(queries),
            list(instructions),
            batch_size=self.batch_size,
            template=self._template,
            progress="encoding queries" if self.show_progress else None,
        )
        return q @ self._embeddings.T


def build_retriever(
    spec: str,
    *,
    template: str | None = None,
    batch_size: int = 32,
    device: str | None = None,
    cache: bool = True,
    show_progress: bool = True,
    exclusions: ExclusionSettings | str | None = None,
    exclusion_splitter: Callable[[str], Instruction] | None = None,
    backend: str | None = None,
) -> Retriever:
    """``"bm25"`` or a model (dir or hub name; ``"default"`` is the packaged MiniLM), run with ``backend``
    (``"torch"``, the default, or ``"openvino"``; BM25 has none)."""
    if spec.lower() == "bm25":
        return BM25Retriever(template=template, exclusions=exclusions, exclusion_splitter=exclusion_splitter)
    from infembed.model import InFEmbed

    model = InFEmbed.load(spec, device=device, backend=backend)
    return DenseRetriever(
        model,
        batch_size=batch_size,
        cache=cache,
        template=template,
        show_progress=show_progress,
        exclusions=exclusions,
        exclusion_splitter=exclusion_splitter,
    )
