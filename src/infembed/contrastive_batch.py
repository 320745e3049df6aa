"""The input of :class:`~infembed.losses.InFEmbedLoss` and the negative sets it defines.

:class:`EmbeddedBatch` holds one batch's embeddings with the text identity of every row (built by
:func:`build_batch_ids`); :func:`check_batch` validates its shapes. The identities are what define the
*marginal* negative sets ``P``, ``I`` and ``IQ`` (:data:`NEGATIVE_SETS`, named in settings as parsed by
:func:`parse_negatives`): :func:`negative_masks` says, per anchor, which candidates of the batch belong to
each set. The loss turns those masks into logits and an objective.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from infembed.data.errors import SettingsError
from infembed.data.records import text_id

__all__ = [
    "NEGATIVE_SETS",
    "EmbeddedBatch",
    "build_batch_ids",
    "check_batch",
    "negative_masks",
    "parse_negatives",
]

#: The marginal negative sets, in canonical order.
NEGATIVE_SETS: tuple[str, ...] = ("P", "I", "IQ")
#: The reference code's names for the same sets (docs/losses.md), for
#: :meth:`InFEmbedLoss.from_reference <infembed.losses.InFEmbedLoss.from_reference>` only.
REFERENCE_NEGATIVES = {"qk": "P", "only_neg": "I", "kq": "IQ"}


@dataclass
class EmbeddedBatch:
    """Embeddings of one training batch plus the text identity of every row.

    Attributes:
        queries: ``(N + K, d)`` embeddings of joined instruction+query texts. The first ``N`` rows are the
            anchors ``iq_{i,i}``, anchor ``i`` having positive passage ``i``; the last ``K`` rows are extra
            combinations (e.g. another in-batch instruction joined with an anchor's query) that are only ever
            negatives.
        passages: ``(M, d)`` passage embeddings, ``M >= N``. ``passages[i]`` is the positive of anchor ``i`` for
            ``i < N``; rows ``>= N`` are extra passages (negatives only).
        instruction_ids: ``(N + K,)`` integer identity of each query row's instruction text (equal id <=> same text).
        query_ids: ``(N + K,)`` integer identity of each query row's query text.
        passage_ids: ``(M,)`` integer identity of each passage text.
        num_anchors: ``N``. ``None`` means ``min(len(queries), len(passages))``, which is right when there are no
            extra query rows (``K = 0``) or no extra passages (``M = N``). Set it when the batch has both.
        aspects: ``(A, d)`` embeddings of excluded aspects (each encoded as a query without instruction), for the
            exclusion-aware score (``docs/losses.md``); ``None`` or empty: every row is scored by its cosine.
        aspect_owner: ``(A,)`` index of the query row (``0 .. N+K-1``) whose instruction excludes each aspect;
            that row's embedding is then of the query with what its instruction keeps.

    Build the id tensors with :func:`build_batch_ids`.
    """

    queries: Tensor
    passages: Tensor
    instruction_ids: Tensor
    query_ids: Tensor
    passage_ids: Tensor
    num_anchors: int | None = None
    aspects: Tensor | None = None
    aspect_owner: Tensor | None = None

    @property
    def anchors(self) -> int:
        """The number of anchors ``N``."""
        if self.num_anchors is not None:
            return int(self.num_anchors)
        return min(self.queries.shape[0], self.passages.shape[0])


def build_batch_ids(texts: Sequence[str]) -> Tensor:
    """Map texts to int64 identity ids: equal texts get equal ids, different texts different ids.

    The id is a 63-bit BLAKE2b hash of the UTF-8 text, so it is the same in every batch, process and rank:
    ids built on different devices can be all-gathered and compared. (A collision needs about 3e9 distinct
    texts in one batch to become likely.)

    Example::

        >>> ids = build_batch_ids(["find reviews", "find news", "find reviews"])
        >>> bool(ids[0] == ids[2]), bool(ids[0] == ids[1])
        (True, False)
    """
    if isinstance(texts, str):
        raise TypeError("build_batch_ids expects a sequence of texts, not a single string")
    ids = []
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"build_batch_ids expects strings, got {type(text).__name__}: {text!r}")
        ids.append(text_id(text))
    return torch.tensor(ids, dtype=torch.long)


def parse_negatives(negatives: str | Iterable[str]) -> tuple[str, ...]:
    """The negative sets named by a setting (a tuple/list or a string like ``"P,I"``), in canonical order;
    an unknown or empty choice raises :class:`~infembed.data.errors.SettingsError` naming the choices."""
    if isinstance(negatives, str):
        items = [part for part in negatives.replace("+", ",").split(",") if part.strip()]
    else:
        try:
            items = list(negatives)
        except TypeError:
            raise SettingsError(
                f"negatives must be a subset of {{'P', 'I', 'IQ'}} given as a tuple/list or a string like 'P,I'; "
                f"got {negatives!r}"
            ) from None
    chosen = set()
    for item in items:
        if not isinstance(item, str):
            raise SettingsError(
                f"negatives must contain strings among 'P', 'I', 'IQ'; got {item!r} in {negatives!r}"
            )
        key = item.strip().upper()
        if key not in NEGATIVE_SETS:
            hint = (
                f" ({item!r} is the reference code's name: build the loss with InFEmbedLoss.from_reference)"
                if item.strip().lower() in REFERENCE_NEGATIVES
                else ""
            )
            raise SettingsError(
                f"unknown negative set {item!r} in negatives={negatives!r}: use 'P' (other passages), 'I' (other "
                f"instructions with the same query) or 'IQ' (other instruction+query texts), e.g. negatives=('P', 'I')"
                + hint
            )
        chosen.add(key)
    if not chosen:
        raise SettingsError(
            f"negatives must name at least one of 'P', 'I', 'IQ'; got {negatives!r}. The paper's best is ('P', 'I')."
        )
    return tuple(name for name in NEGATIVE_SETS if name in chosen)


def check_batch(batch: EmbeddedBatch) -> int:
    """Validate shapes; return the number of anchors."""
    if not isinstance(batch, EmbeddedBatch):
        raise TypeError(f"InFEmbedLoss expects an EmbeddedBatch, got {type(batch).__name__}")
    queries, passages = batch.queries, batch.passages
    if queries.dim() != 2 or passages.dim() != 2:
        raise SettingsError(
            f"queries and passages must be 2-D (rows, dim); got shapes {tuple(queries.shape)} and {tuple(passages.shape)}"
        )
    if queries.shape[1] != passages.shape[1]:
        raise SettingsError(
            f"queries and passages must have the same embedding size; got {queries.shape[1]} and {passages.shape[1]}"
        )
    for name, ids, rows in (
        ("instruction_ids", batch.instruction_ids, queries.shape[0]),
        ("query_ids", batch.query_ids, queries.shape[0]),
        ("passage_ids", batch.passage_ids, passages.shape[0]),
    ):
        if ids.dim() != 1 or ids.shape[0] != rows:
            raise SettingsError(
                f"{name} must be 1-D with {rows} entries (one per row); got shape {tuple(ids.shape)}"
            )
        if ids.dtype.is_floating_point or ids.dtype.is_complex:
            raise SettingsError(
                f"{name} must hold integer text ids (see build_batch_ids); got dtype {ids.dtype}"
            )
    if (batch.aspects is None) != (batch.aspect_owner is None):
        raise SettingsError("aspects and aspect_owner come together (both set or both None)")
    if batch.aspects is not None:
        aspects, owner = batch.aspects, batch.aspect_owner
        if aspects.dim() != 2 or aspects.shape[1] != queries.shape[1]:
            raise SettingsError(
                f"aspects must be 2-D with the queries' embedding size; got shape {tuple(aspects.shape)}"
            )
        if owner.dim() != 1 or owner.shape[0] != aspects.shape[0] or owner.dtype.is_floating_point:
            raise SettingsError(
                f"aspect_owner must be 1-D integer with {aspects.shape[0]} entries; got shape {tuple(owner.shape)}"
            )
        if owner.numel() and not (0 <= int(owner.min()) and int(owner.max()) < queries.shape[0]):
            raise SettingsError(f"aspect_owner must index query rows 0..{queries.shape[0] - 1}")
    n = batch.anchors
    if not 1 <= n <= min(queries.shape[0], passages.shape[0]):
        raise SettingsError(
            f"num_anchors must be between 1 and min(len(queries), len(passages)) = "
            f"{min(queries.shape[0], passages.shape[0])}; got {n}"
        )
    return n


def negative_masks(
    batch: EmbeddedBatch,
    negatives: Iterable[str],
    *,
    iq_negatives: str = "anchors",
    mask_duplicates: bool = True,
    device: torch.device | None = None,
) -> dict[str, Tensor]:
    """Per selected negative set, the ``(N, C)`` boolean mask of the candidates that are negatives of each
    anchor (``True``: a negative), in canonical order. The candidates are the passages (``C = M``) for ``P`` and
    the query rows (``C = N + K``) for ``I`` and ``IQ``; see :class:`~infembed.losses.InFEmbedLoss` for the sets
    and the duplicate masking. ``batch`` must have passed :func:`check_batch`."""
    negatives = tuple(negatives)
    device = device if device is not None else batch.queries.device
    n = batch.anchors
    instruction_ids = batch.instruction_ids.to(device)
    query_ids = batch.query_ids.to(device)
    passage_ids = batch.passage_ids.to(device)
    masks: dict[str, Tensor] = {}

    if "P" in negatives:
        keep = ~_eye(n, passage_ids.shape[0], device)  # s(p_m, iq_{i,i}), m != i
        if mask_duplicates:
            keep &= passage_ids[None, :] != passage_ids[:n, None]
        masks["P"] = keep

    if "I" in negatives or "IQ" in negatives:
        rows = query_ids.shape[0]  # s(p_i, q_r), r != i
        not_self = ~_eye(n, rows, device)
        same_query = query_ids[None, :] == query_ids[:n, None]
        same_instruction = instruction_ids[None, :] == instruction_ids[:n, None]
        if "I" in negatives:
            keep = not_self & same_query
            if mask_duplicates:
                keep &= ~same_instruction
            masks["I"] = keep
        if "IQ" in negatives:
            if iq_negatives == "anchors":
                is_anchor = torch.arange(rows, device=device) < n
                keep = not_self & is_anchor[None, :]
                if mask_duplicates:
                    keep &= ~(same_instruction & same_query)
            else:
                keep = not_self & same_instruction
                if mask_duplicates:
                    keep &= ~same_query
            masks["IQ"] = keep
    return masks


def _eye(rows: int, cols: int, device: torch.device) -> Tensor:
    return torch.eye(rows, cols, dtype=torch.bool, device=device)
