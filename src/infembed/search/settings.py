"""How an index is built, declared once: :class:`IndexSettings` gives ``infembed index`` its flags (through
:func:`infembed.settings.settings_command`), :meth:`Index.build <infembed.search.index.Index.build>` its keyword
arguments, and both vector stores (faiss, Milvus) their tuning, with one default and one check per setting."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from infembed.data.errors import SettingsError
from infembed.model.backends import backend_setting, check_backend
from infembed.settings import check_number, setting

DENSE_KINDS = ("flat", "hnsw", "ivf")


def _with_overrides(cls: type, what: str, settings: object | None, overrides: dict[str, object]) -> object:
    """The one rule of both settings classes' ``of``: known names only, None means "not given"."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise SettingsError(
            f"unknown {what} setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}"
        )
    given = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(settings or cls(), **given)


KINDS = (*DENSE_KINDS, "bm25")


@dataclass(frozen=True)
class IndexSettings:
    """The settings of one index build; the search-time ``ef_search``/``nprobe`` given to ``search``/``serve``
    override the defaults recorded here."""

    kind: str = setting("flat", "flat (exact) | hnsw | ivf (approximate, large corpora) | bm25 (lexical).")
    batch_size: int = setting(32, "Texts per encoder call.")
    shard_size: int = setting(4096, "Documents per resumable shard.")
    hnsw_m: int = setting(32, "HNSW: graph neighbours per node.")
    ef_construction: int = setting(200, "HNSW: candidates explored while building.")
    ef_search: int = setting(128, "HNSW: candidates explored per search, unless a search says otherwise.")
    nlist: int | None = setting(
        None, "IVF: number of lists (default: 4 * sqrt(documents), at most 1 per 39)."
    )
    nprobe: int | None = setting(
        None, "IVF: lists visited per search, unless a search says otherwise (default: min(nlist, 32))."
    )
    #: how the model encodes the corpus; not part of the index's identity (either backend gives the same
    #: embeddings within 1e-5 cosine), so an index built with one is searched with the other
    backend: str | None = backend_setting()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SettingsError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        check_backend(self.backend)  # None: torch, or a given model's own backend
        check_number("batch_size", self.batch_size, minimum=1, integer=True)
        check_number("shard_size", self.shard_size, minimum=1, integer=True)
        check_number("hnsw_m", self.hnsw_m, minimum=2, integer=True, why="an HNSW node needs neighbours")
        check_number("ef_construction", self.ef_construction, minimum=1, integer=True)
        check_number("ef_search", self.ef_search, minimum=1, integer=True)
        check_number("nlist", self.nlist, minimum=1, integer=True, optional=True)
        check_number("nprobe", self.nprobe, minimum=1, integer=True, optional=True)

    @classmethod
    def of(cls, settings: IndexSettings | None = None, **overrides: object) -> IndexSettings:
        """``settings`` (default: the defaults) with the keyword arguments that are not None put in; an unknown
        name is a SettingsError listing the known ones."""
        return _with_overrides(cls, "index", settings, overrides)

    def check_count(self, count: int) -> None:
        """Settings that cannot index ``count`` documents, refused before anything is encoded: faiss trains an IVF
        index on the documents, and needs at least one per list."""
        if self.kind == "ivf" and self.nlist is not None and self.nlist > count:
            raise SettingsError(
                f"nlist {self.nlist} is more than the {count} documents: IVF needs at least one document per list "
                f"(faiss asks for 39); give --nlist {count} or less, or leave it out"
            )

    def ivf_lists(self, count: int) -> int:
        """IVF lists for ``count`` documents: ``nlist``, else 4 * sqrt(n) (faiss's usual start), capped so that
        every list has the >= 39 training points faiss asks for."""
        return int(self.nlist or max(1, min(int(4 * np.sqrt(count)), count // 39)))

    def ivf_probes(self, count: int) -> int:
        return int(self.nprobe or min(self.ivf_lists(count), 32))


#: A request waits at most this long for others to share its encoder call: beyond it, a lone request would
#: wait for company that may never come (``inf`` made every /search hang, and the server deaf to SIGTERM).
MAX_WAIT_MS_LIMIT = 1000


@dataclass(frozen=True)
class ServeSettings:
    """How ``infembed serve`` (:func:`~infembed.search.server.serve`) and
    :func:`~infembed.search.service.create_app` serve an index: the address, the per-request limits, the request
    batching and the timeouts. Declared once: the ``serve`` flags come from these fields, and every value is
    checked here, before the index or its model is loaded."""

    host: str = setting("127.0.0.1", "Address to bind; loopback by default. Use 0.0.0.0 only with --api-key.")
    port: int = setting(8000, "TCP port.")
    max_batch: int = setting(64, "Most queries/texts per request, and per encoder call.")
    max_text_chars: int = setting(4096, "Longest query, instruction or text accepted.")
    max_k: int = setting(100, "Largest k accepted.")
    max_wait_ms: float = setting(
        2.0, f"How long a request waits for others to share its encoder call (0 to {MAX_WAIT_MS_LIMIT} ms)."
    )
    batching: bool = setting(
        True, "Share encoder calls between concurrent requests (--no-batching: each alone)."
    )
    header_timeout: float = setting(
        10.0, "Seconds a client has to send a request's headers; slower ones are dropped."
    )
    body_timeout: float | None = setting(
        30.0, "Seconds a client has to send a request's body; slower ones get 408."
    )
    limit_concurrency: int = setting(256, "Open connections served at once; more get 503.")
    backend: str | None = backend_setting()

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host.strip():
            raise SettingsError(
                f"host must be an address to bind (127.0.0.1, 0.0.0.0, ::1), got {self.host!r}"
            )
        check_number("port", self.port, minimum=1, maximum=65535, integer=True)
        check_number("max_batch", self.max_batch, minimum=1, integer=True)
        check_number("max_text_chars", self.max_text_chars, minimum=1, integer=True)
        check_number("max_k", self.max_k, minimum=1, integer=True)
        check_number(
            "max_wait_ms",
            self.max_wait_ms,
            minimum=0,
            maximum=MAX_WAIT_MS_LIMIT,
            why="how long a request waits for others to share its encoder call",
        )
        if not isinstance(self.batching, bool):
            raise SettingsError(f"batching must be true or false, got {self.batching!r}")
        check_number("header_timeout", self.header_timeout, above=0, why="seconds")
        # None (the library only): no deadline for a request body
        check_number("body_timeout", self.body_timeout, above=0, optional=True, why="seconds")
        check_number("limit_concurrency", self.limit_concurrency, minimum=1, integer=True)
        check_backend(self.backend)  # None: torch, or a given model's own backend

    @classmethod
    def of(cls, settings: ServeSettings | None = None, **overrides: object) -> ServeSettings:
        """``settings`` (default: the defaults) with the keyword arguments that are not None put in; an unknown
        name is a SettingsError listing the known ones."""
        return _with_overrides(cls, "serve", settings, overrides)
