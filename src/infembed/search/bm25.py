"""Okapi BM25 through bm25s, one wrapper for evaluation and for the search index, so both tokenise and score a
text the same way.

Defaults (English stopwords, no stemming, k1 = 1.5, b = 0.75, bm25s's Lucene variant) are those of the dev-set
reference runs. A saved index keeps its settings beside the bm25s files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError
from infembed.data.jsonl import atomic_dir
from infembed.search.store import REBUILD


@dataclass(frozen=True)
class BM25Settings:
    stopwords: str | None = "en"
    stemmer: str | None = None
    k1: float = 1.5
    b: float = 0.75


def terms(text: str, settings: BM25Settings | None = None) -> list[str]:
    """The words of ``text`` that BM25 searches with (lower-cased, stop words and one-letter words left out):
    a text without any matches nothing (:meth:`BM25.scores` gives it zeros)."""
    return BM25(settings)._tokenize([text], return_ids=False)[0]


class BM25:
    """A BM25 index over a list of texts: :meth:`scores` for every document, :meth:`top_k` for the best."""

    def __init__(self, settings: BM25Settings | None = None) -> None:
        self.settings = settings or BM25Settings()
        self._stemmer = None
        if self.settings.stemmer:
            import Stemmer

            self._stemmer = Stemmer.Stemmer(self.settings.stemmer)
        self._model: Any = None
        self.count = 0

    def _tokenize(self, texts: Sequence[str], **kwargs: Any) -> Any:
        import bm25s

        return bm25s.tokenize(
            list(texts),
            stopwords=self.settings.stopwords,
            stemmer=self._stemmer,
            show_progress=False,
            **kwargs,
        )

    def index(self, texts: Sequence[str]) -> BM25:
        import bm25s

        self._model = bm25s.BM25(k1=self.settings.k1, b=self.settings.b)
        self._model.index(self._tokenize(texts), show_progress=False)
        self.count = len(texts)
        return self

    def _ready(self) -> Any:
        if self._model is None:
            raise RuntimeError("call index(texts) first")
        return self._model

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), count) BM25 scores of each text against every document; a text with no searchable
        word (empty, or only stop words: "the", "not not not") scores 0 everywhere, as it matches nothing."""
        model = self._ready()
        out = np.zeros((len(texts), self.count), dtype=np.float32)
        if not texts:
            return out
        tokenized = self._tokenize(texts, return_ids=False)
        if getattr(model, "nonoccurrence_array", None) is not None:  # BM25L/BM25+: bm25s adds a term per token
            for row, tokens in enumerate(tokenized):
                if tokens:  # bm25s's get_scores indexes the first token: an empty list is an IndexError
                    out[row] = model.get_scores(tokens)
            return out
        # bm25s's eager index holds each term's document scores as a sparse column; a text's scores are the sum
        # of its terms' columns, taken here with one bincount per text instead of bm25s's np.add.at per term
        # (the exclusion-aware search scores several short texts per query: the aspects and guards)
        data, indices, indptr = (model.scores[k] for k in ("data", "indices", "indptr"))
        vocab = model.vocab_dict
        for row, tokens in enumerate(tokenized):
            ids = [vocab[t] for t in tokens if t in vocab]
            if not ids:
                continue
            postings = np.concatenate([np.arange(indptr[i], indptr[i + 1]) for i in ids])
            out[row] = np.bincount(indices[postings], weights=data[postings], minlength=self.count)
        return out

    def top_k(self, texts: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, document rows), both (len(texts), min(k, count)); a document sharing no term with the text is
        not a result (row -1), rather than score-0 filler."""
        model = self._ready()
        result = model.retrieve(
            self._tokenize(texts, return_ids=False), k=min(k, self.count), show_progress=False
        )
        return result.scores, np.where(result.scores > 0, result.documents, -1)

    def save(self, path: Path) -> None:
        """Write the index to ``path`` (a dir) atomically: a temporary dir renamed over the old one."""
        with atomic_dir(path) as tmp:
            self._ready().save(str(tmp), show_progress=False)
            (tmp / "infembed_bm25.json").write_text(json.dumps(asdict(self.settings)))

    @classmethod
    def load(cls, path: Path, settings: BM25Settings | None = None) -> BM25:
        """Reopen a saved index; ``settings`` for indexes saved before the settings file existed."""
        import bm25s

        path = Path(path)
        if not path.is_dir():
            raise DataError("missing: the BM25 index is not there", path, hint=REBUILD)
        saved = path / "infembed_bm25.json"
        try:
            if saved.exists():
                settings = BM25Settings(**json.loads(saved.read_text(encoding="utf-8")))
            bm25 = cls(settings)
            bm25._model = bm25s.BM25.load(str(path), show_progress=False)
            bm25.count = int(bm25._model.scores["num_docs"])
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            EOFError,
        ) as error:  # bm25s reads json and npy files
            reason = f"{type(error).__name__}: {error}".splitlines()[0]
            raise DataError(f"not a readable BM25 index ({reason})", path, hint=REBUILD) from None
        return bm25
