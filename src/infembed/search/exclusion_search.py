"""Exclusion-aware search over an index (docs/instructions.md): the settings a search uses, the split of each
instruction, candidates by the kept part, and the penalty from the excluded aspects and guards, scored by the
index's own scorer or by BM25 over its documents (``aspect_scorer``). :class:`~infembed.search.index.Index`
inherits it; it uses only the index's public search primitives and its documents."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from infembed.data.errors import SettingsError
from infembed.data.records import Document
from infembed.instructions.split import DEFAULT_SPLITTER
from infembed.search.bm25 import BM25
from infembed.search.store import BM25_DIR

if TYPE_CHECKING:  # the result type only; index.py imports this module
    from infembed.search.index import Hit


class ExclusionSearch:
    """The exclusion-aware half of :class:`~infembed.search.index.Index`."""

    def exclusion_settings(self, exclusions: Any = DEFAULT_SPLITTER) -> Any:
        """The exclusion settings a search uses: the model's fitted ones (infembed.json) or the defaults."""
        from infembed.exclusions import DEFAULTS, ExclusionSettings, resolve_exclusions

        if self.kind == "bm25":
            default = DEFAULTS["bm25"]
        else:
            fitted = getattr(self.model.config, "exclusions", None)
            default = ExclusionSettings.from_json(fitted) if fitted else DEFAULTS["dense"]
        return resolve_exclusions(exclusions, default)

    def split(
        self,
        instructions: Sequence[str | None],
        settings: Any = None,
        exclusion_splitter: Callable[[str], Any] | None = None,
    ) -> list[Any]:
        """Each instruction's :class:`~infembed.instructions.Instruction` as :meth:`search` uses it."""
        from infembed.instructions import Instruction, split_instructions

        settings = settings if settings is not None else self.exclusion_settings(DEFAULT_SPLITTER)
        if not settings.enabled:
            return [Instruction((i or "").strip()) for i in instructions]
        if settings.splitter == "llm" and exclusion_splitter is None:
            raise SettingsError(
                "exclusions 'llm' needs an exclusion_splitter (infembed.instructions.llm_splitter)"
            )
        return split_instructions(list(instructions), exclusion_splitter or settings.splitter)

    def _exclusion_search(
        self, queries: list[str], splits: list[Any], k: int, settings: Any, batch_size: int
    ) -> list[list[Hit]]:
        """Keep-part candidates, then the exclusion penalty over them (infembed.exclusions)."""
        from infembed.exclusions import penalised_scores

        depth = min(self.count, max(settings.pool, 5 * k))
        keeps = [s.keep or None for s in splits]
        texts = [t for s in splits for t in (*s.exclude, *(g for g in s.guards if g))]
        matrix = None
        if self.kind == "bm25":
            # the kept parts, aspects and guards in one BM25 pass (one tokenisation: a third of the time saved)
            every = self._bm25_scores(list(queries) + texts, list(keeps) + [None] * len(texts))
            all_scores, matrix = every[: len(queries)], every[len(queries) :]
            candidates = [np.argsort(-row, kind="stable")[:depth] for row in all_scores]
            keep_scores = [row[c] for row, c in zip(all_scores, candidates)]
        else:
            vectors = self.model.encode_queries(queries, keeps, batch_size=batch_size)
            scores, indices = self.search_vectors(vectors, depth)
            candidates = [row[row >= 0] for row in indices]
            keep_scores = [s[i >= 0] for s, i in zip(scores, indices)]
        text_scores = self._text_scores(texts, candidates, splits, batch_size, settings.aspect_scorer, matrix)
        out = []
        for row in range(len(splits)):
            aspect_rows, guard_rows = text_scores[row]
            final = penalised_scores(keep_scores[row], aspect_rows, settings, guards=guard_rows)
            order = np.argsort(-final, kind="stable")[:k]
            out.append(self.hits(final[order][None], candidates[row][order][None])[0])
        return out

    def _text_scores(
        self,
        texts: list[str],
        candidates: list[np.ndarray],
        splits: list[Any],
        batch_size: int,
        aspect_scorer: str = "self",
        matrix: np.ndarray | None = None,
    ) -> list[tuple[np.ndarray, list[np.ndarray | None]]]:
        """Per query, the scores of its aspects (m, n_candidates) and guards against its candidates: by the
        index's own scorer, or by BM25 over its documents (``aspect_scorer="bm25"``). ``matrix``: the texts'
        BM25 scores over every document, when already computed."""
        lexical = self.kind == "bm25" or aspect_scorer == "bm25"
        if matrix is not None:
            pass
        elif self.kind == "bm25":
            matrix = self._bm25_scores(texts, [None] * len(texts)) if texts else np.zeros((0, self.count))
        elif lexical:
            matrix = self.lexical().scores(texts) if texts else np.zeros((0, self.count))
        else:
            vectors = self.model.encode_queries(texts, None, batch_size=batch_size) if texts else None
        out, cursor = [], 0
        for row, split in enumerate(splits):
            cand = candidates[row]
            n_texts = len(split.exclude) + sum(1 for g in split.guards if g)
            if lexical:
                block = matrix[cursor : cursor + n_texts][:, cand]
            else:
                block = vectors[cursor : cursor + n_texts] @ self._vectors_of(cand).T
            cursor += n_texts
            aspects = block[: len(split.exclude)]
            guard_iter = iter(block[len(split.exclude) :])
            guards = [next(guard_iter) if split.guard_of(j) else None for j in range(len(split.exclude))]
            out.append((aspects, guards))
        return out

    def lexical(self) -> BM25:
        """BM25 over the index's documents: the index itself for kind "bm25", else the bm25/ dir written beside
        the vectors, or (an index built before it was) one built in memory from docs.jsonl on first use."""
        if self.bm25 is not None:
            return self.bm25
        if (self.path / BM25_DIR).is_dir():
            self.bm25 = BM25.load(self.path / BM25_DIR)
        else:  # in batches: a Milvus store answers 1,000 documents a request
            texts = []
            for start in range(0, self.count, 1000):
                for doc in self._documents(list(range(start, min(self.count, start + 1000)))):
                    texts.append(
                        Document(title=doc.get("title") or "", text=doc.get("text") or "").full_text()
                    )
            self.bm25 = BM25().index(texts)
        return self.bm25
