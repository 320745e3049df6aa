"""InF-IR rows -> contrastive training batches.

Each row gives its three sibling pairs, (I+,Q+)->P+, (I-,Q+)->P1-, (I+,Q-)->P2-, placed in the same batch, so
the siblings are each other's marginal negatives (the I-negative of (I+,Q+) is (I-,Q+) for free). On top,
``extra_instruction_negatives`` other in-batch instructions are joined with each anchor's query (extra rows that
are never anchors). Every text gets an identity id (a stable 63-bit hash of the text, the same in every process),
which the loss uses to mask "negatives" identical to the positive.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import torch

from infembed.contrastive_batch import build_batch_ids
from infembed.data.records import Pair, Triplet


@dataclass
class TrainingBatch:
    """Texts of one contrastive batch. ``queries``/``instructions`` have N+K entries, the first N are anchors
    whose positive is ``passages[i]``; ``passages`` may hold more than N (extra negatives)."""

    queries: list[str]
    instructions: list[str]
    passages: list[str]
    n_anchors: int
    roles: list[str] = field(default_factory=list)
    #: exclusion-aware training (:meth:`decomposed`): per query row, the instruction text that is embedded
    #: (what the instruction keeps; ``None``: nothing, the query alone), the excluded aspects and their rows
    keeps: list[str | None] | None = None
    aspects: list[str] = field(default_factory=list)
    aspect_owner: list[int] = field(default_factory=list)

    def decomposed(self, split: Callable[[str], object]) -> TrainingBatch:
        """The batch with every instruction that excludes something decomposed by ``split`` (text ->
        :class:`~infembed.instructions.Instruction`): its row embeds the query with what the instruction keeps,
        and its aspects join the batch as texts of their own. Identity ids stay those of the whole instruction
        (two instructions that keep the same text but exclude different things are different instructions)."""
        keeps: list[str | None] = []
        aspects: list[str] = []
        owner: list[int] = []
        for row, instruction in enumerate(self.instructions):
            parts = split(instruction) if instruction else None
            if parts is None or not parts.exclude:
                keeps.append(instruction)
                continue
            keeps.append(parts.keep or None)
            aspects += list(parts.exclude)
            owner += [row] * len(parts.exclude)
        return replace(self, keeps=keeps, aspects=aspects, aspect_owner=owner)

    def embedding_inputs(self) -> tuple[list[str], list[str | None]]:
        """``(texts, instructions)`` for the query-side encoder: every query row (with what its instruction
        keeps, when decomposed), then every aspect alone (no instruction), as search encodes them."""
        kept = self.instructions if self.keeps is None else self.keeps
        return list(self.queries) + list(self.aspects), list(kept) + [None] * len(self.aspects)

    @property
    def instruction_ids(self) -> torch.Tensor:
        return build_batch_ids(self.instructions)

    @property
    def query_ids(self) -> torch.Tensor:
        return build_batch_ids(self.queries)

    @property
    def passage_ids(self) -> torch.Tensor:
        return build_batch_ids(self.passages)

    @property
    def n_pairs(self) -> int:
        return self.n_anchors

    @staticmethod
    def concat(batches: Sequence[TrainingBatch]) -> TrainingBatch:
        """The batch that one process would see for the union of several (per-rank) batches: all anchors
        first, then all extra rows; all positive passages first, then the extra passages."""
        anchors_q, anchors_i, extra_q, extra_i, pos_p, extra_p, roles = [], [], [], [], [], [], []
        for b in batches:
            n = b.n_anchors
            anchors_q += b.queries[:n]
            anchors_i += b.instructions[:n]
            extra_q += b.queries[n:]
            extra_i += b.instructions[n:]
            pos_p += b.passages[:n]
            extra_p += b.passages[n:]
            roles += b.roles[:n]
        joined = TrainingBatch(anchors_q + extra_q, anchors_i + extra_i, pos_p + extra_p, len(anchors_q), roles)
        if all(b.keeps is None for b in batches):
            return joined
        # keeps in the joined row order; aspects in rank order, each pointing at its row's joined position
        anchor_keeps, extra_keeps, aspects, owner = [], [], [], []
        anchor_offset, extra_offset = 0, len(anchors_q)
        for b in batches:
            n, keeps = b.n_anchors, b.keeps if b.keeps is not None else list(b.instructions)
            anchor_keeps += keeps[:n]
            extra_keeps += keeps[n:]
            aspects += b.aspects
            owner += [anchor_offset + r if r < n else extra_offset + r - n for r in b.aspect_owner]
            anchor_offset += n
            extra_offset += len(b.queries) - n
        return replace(joined, keeps=anchor_keeps + extra_keeps, aspects=aspects, aspect_owner=owner)


def pairs_batch(
    pairs: Sequence[Pair], extra_instruction_negatives: int = 0, rng: random.Random | None = None
) -> TrainingBatch:
    """A batch from flattened pairs; extra I-negatives are sampled from the batch's distinct instructions."""
    rng = rng or random.Random(0)
    queries = [p.query for p in pairs]
    instructions = [p.instruction for p in pairs]
    passages = [p.passage for p in pairs]
    extra_q: list[str] = []
    extra_i: list[str] = []
    if extra_instruction_negatives > 0:
        distinct = list(dict.fromkeys(instructions))
        present = set(zip(instructions, queries))
        for pair in pairs:
            options = [i for i in distinct if i != pair.instruction and (i, pair.query) not in present]
            for inst in rng.sample(options, min(extra_instruction_negatives, len(options))):
                present.add((inst, pair.query))
                extra_q.append(pair.query)
                extra_i.append(inst)
    return TrainingBatch(
        queries + extra_q, instructions + extra_i, passages, len(pairs), [p.role for p in pairs]
    )


def iter_batches(
    rows: Sequence[Triplet],
    rows_per_batch: int,
    *,
    seed: int = 0,
    epoch: int = 0,
    extra_instruction_negatives: int = 0,
    shuffle: bool = True,
    drop_last: bool = False,
    world_size: int = 1,
    rank: int = 0,
    mined: Sequence[Sequence[str]] | None = None,
) -> Iterator[TrainingBatch]:
    """Yield this rank's batches for one epoch. The global batch is ``rows_per_batch * world_size`` rows in a
    seeded order (the same in every process); rank ``r`` takes its slice, so the union over ranks is exactly the
    single-process batch of the same global size. ``mined[i]``: extra negative passages of row ``i``
    (:func:`~infembed.train.mining.mine_negatives`), appended to its batch once each."""
    order = list(range(len(rows)))
    if shuffle:
        random.Random(seed * 100_003 + epoch).shuffle(order)
    global_size = rows_per_batch * world_size
    for step, start in enumerate(range(0, len(order), global_size)):
        chunk = order[start : start + global_size]
        if drop_last and len(chunk) < global_size:
            break
        local = chunk[rank * rows_per_batch : (rank + 1) * rows_per_batch]
        if not local:
            local = chunk[-1:]  # keep every rank stepping together on a short last batch
        pairs = [pair for index in local for pair in rows[index].pairs()]
        rng = random.Random(hash((seed, epoch, step, rank)) & 0xFFFFFFFF)
        batch = pairs_batch(pairs, extra_instruction_negatives, rng)
        if mined:
            batch = with_extra_passages(batch, [text for index in local for text in mined[index]])
        yield batch


def with_extra_passages(batch: TrainingBatch, texts: Sequence[str]) -> TrainingBatch:
    """``batch`` with ``texts`` appended as extra (negative-only) passages, each once and none that the batch
    already holds."""
    seen = set(batch.passages)
    extra = [t for t in dict.fromkeys(texts) if t not in seen]
    return replace(batch, passages=list(batch.passages) + extra) if extra else batch


def batches_per_epoch(n_rows: int, rows_per_batch: int, world_size: int = 1, drop_last: bool = False) -> int:
    global_size = rows_per_batch * world_size
    return n_rows // global_size if drop_last else -(-n_rows // global_size)
