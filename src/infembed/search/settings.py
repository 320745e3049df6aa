"""How an index is built, declared once: :class:`IndexSettings` gives ``infembed index`` its flags (through
:func:`infembed.settings.settings_command`), :meth:`Index.build <infembed.search.index.Index.build>` its keyword
arguments, and both vector stores (faiss, Milvus) their tuning, with one default and one check per setting."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from infembed.data.errors import SettingsError
from infembed.settings import check_number, setting

DENSE_KINDS = ("flat", "hnsw", "ivf")
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
    nlist: int | None = setting(None, "IVF: number of lists (default: 4 * sqrt(documents), at most 1 per 39).")
    nprobe: int | None = setting(None, "IVF: lists visited per search, unless a search says otherwise "
                                 "(default: min(nlist, 32)).")

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SettingsError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
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
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise SettingsError(f"unknown index setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        given = {k: v for k, v in overrides.items() if v is not None}
        return dataclasses.replace(settings or cls(), **given)

    def ivf_lists(self, count: int) -> int:
        """IVF lists for ``count`` documents: ``nlist``, else 4 * sqrt(n) (faiss's usual start), capped so that
        every list has the >= 39 training points faiss asks for."""
        return int(self.nlist or max(1, min(int(4 * np.sqrt(count)), count // 39)))

    def ivf_probes(self, count: int) -> int:
        return int(self.nprobe or min(self.ivf_lists(count), 32))
