"""Plain records shared by every capability.

* :class:`Triplet`: one InF-IR row (positive instruction/query/passage, poisoned instruction and query,
  and the two negative passages). It yields three (instruction, query) -> passage pairs.
* :class:`Pair`: one (instruction, query) -> passage training pair with a role tag.
* :class:`Benchmark`: a corpus, queries with an original and (optionally) a changed instruction, and qrels.
* :func:`text_id`: the stable identity of a text, the same in every process (training batches carry it so the
  loss can mask negatives identical to the positive, across devices too).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

#: The InF-IR row schema (field names of the public InF-IR data set).
TRIPLET_FIELDS: tuple[str, ...] = (
    "query_positive",
    "instruction_positive",
    "document_positive",
    "instruction_negative",
    "query_negative",
    "hard_negative_document_1",
    "hard_negative_document_2",
)
#: Older releases of InF-IR call ``document_positive`` just ``document``.
TRIPLET_ALIASES: dict[str, str] = {"document": "document_positive"}
OPTIONAL_TRIPLET_FIELDS: tuple[str, ...] = ("id", "query_id", "doc_id")


@dataclass(frozen=True)
class Pair:
    """An (instruction, query) -> passage pair. ``role`` is ``"pos"`` for (I+, Q+) -> P+,
    ``"inst_neg"`` for (I-, Q+) -> P1- and ``"query_neg"`` for (I+, Q-) -> P2-."""

    instruction: str
    query: str
    passage: str
    role: str = "pos"
    row_id: str | None = None


@dataclass
class Triplet:
    """One InF-IR row."""

    query_positive: str
    instruction_positive: str
    document_positive: str
    instruction_negative: str
    query_negative: str
    hard_negative_document_1: str
    hard_negative_document_2: str
    id: str | None = None
    query_id: str | None = None
    doc_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def pairs(self) -> list[Pair]:
        """The three sibling pairs of the row, in the reference order: (I+,Q+)->P+, (I-,Q+)->P1-, (I+,Q-)->P2-."""
        return [
            Pair(self.instruction_positive, self.query_positive, self.document_positive, "pos", self.id),
            Pair(
                self.instruction_negative,
                self.query_positive,
                self.hard_negative_document_1,
                "inst_neg",
                self.id,
            ),
            Pair(
                self.instruction_positive,
                self.query_negative,
                self.hard_negative_document_2,
                "query_neg",
                self.id,
            ),
        ]

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "extra" and v is not None}
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class Document:
    title: str
    text: str

    def full_text(self, separator: str = " ") -> str:
        """Title and text joined as sentence-transformers/BEIR do (title first), or the text alone."""
        if self.title:
            return f"{self.title}{separator}{self.text}" if self.text else self.title
        return self.text


@dataclass(frozen=True)
class InstructionQuery:
    """A query with its original instruction and, for FollowIR-style benchmarks, a changed one."""

    text: str
    instruction_og: str = ""
    instruction_changed: str | None = None


@dataclass
class Benchmark:
    """An instruction retrieval benchmark in memory.

    ``qrels_changed`` is ``None`` for benchmarks without a changed instruction (MAIR, BRIGHT): then only the
    og run is scored and p-MRR is not defined. ``top_ranked`` (qid -> candidate doc ids) means "rerank these"
    instead of searching the whole corpus. ``excluded`` (qid -> doc ids) are removed from runs before scoring
    (BRIGHT). ``main_score`` names the headline metric, in mteb's naming (``map_at_1000``, ``ndcg_at_5`` ...), and
    ``main_score_source`` says whose choice it is (FollowIR's headline is its paper's, while mteb's main score
    for those tasks is p-MRR). ``changed_documents`` (qid -> doc ids) is the data set's own list of documents
    whose relevance changed (FollowIR's ``qrel_diff``), used for p-MRR; ``None`` means p-MRR recomputes it from
    the two qrels (relevant under og, not relevant under changed).
    """

    name: str
    corpus: dict[str, Document]
    queries: dict[str, InstructionQuery]
    qrels_og: dict[str, dict[str, int]]
    qrels_changed: dict[str, dict[str, int]] | None = None
    top_ranked: dict[str, list[str]] | None = None
    excluded: dict[str, list[str]] | None = None
    main_score: str = "map_at_1000"
    source: str = ""
    main_score_source: str = ""
    changed_documents: dict[str, list[str]] | None = None

    @property
    def has_changed(self) -> bool:
        return self.qrels_changed is not None and any(
            q.instruction_changed is not None for q in self.queries.values()
        )

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "documents": len(self.corpus),
            "queries": len(self.queries),
            "qrels_og": sum(len(v) for v in self.qrels_og.values()),
            "qrels_changed": sum(len(v) for v in self.qrels_changed.values()) if self.qrels_changed else None,
            "reranking": self.top_ranked is not None,
            "main_score": self.main_score,
            "main_score_source": self.main_score_source,
        }


def text_id(text: str) -> int:
    """A stable 63-bit identity of a text (equal text <=> equal id, up to hash collisions of ~2^-63)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1
