"""InF-Embed contrastive objectives (Zhuang et al. 2025, section 5.2 and appendix C).

One module, :class:`InFEmbedLoss`, computes the univariate (eq. 6, 8-14) and multivariate (eq. 7, 15-21)
objectives over any non-empty combination of the three *marginal* negative sets:

* ``P``: other passages for the anchor's instruction+query (the classic in-batch negatives),
* ``I``: other instructions joined with the anchor's query, scored against the anchor's passage,
* ``IQ``: other instruction+query texts scored against the anchor's passage.

It works on embeddings only (:class:`~infembed.contrastive_batch.EmbeddedBatch`, re-exported here with
:func:`~infembed.contrastive_batch.build_batch_ids` as the loss' input), so the trainer decides how texts are
encoded, gathered across devices or cached; which candidates form each negative set is worked out in
:mod:`infembed.contrastive_batch`. See ``docs/losses.md`` for the mapping to the paper and to the
authors' reference code.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from infembed.contrastive_batch import (
    NEGATIVE_SETS,
    REFERENCE_NEGATIVES,
    EmbeddedBatch,
    build_batch_ids,
    check_batch,
    negative_masks,
    parse_negatives,
)
from infembed.data.errors import SettingsError

__all__ = [
    "NEGATIVE_SETS",
    "EmbeddedBatch",
    "InFEmbedLoss",
    "build_batch_ids",
]

_OBJECTIVES = ("uni", "multi")
_IQ_READINGS = ("anchors", "instruction_with_other_queries")
_POSITIVE_COUNTS = ("once", "per_set")
#: The reference code's objective names (docs/losses.md), for :meth:`InFEmbedLoss.from_reference` only: they
#: are the other way round from the paper's equations.
REFERENCE_OBJECTIVES = {"uni": "multi", "add": "uni", "multi": "uni"}
#: Width (in cosine units) of the softplus that smooths the exclusion penalty's hinge (docs/losses.md).
EXCLUSION_SHARPNESS = 0.05
#: Upper bound of a learned scale (1 / temperature), as in CLIP: keeps the logits from exploding.
MAX_LEARNED_SCALE = 100.0


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value


class InFEmbedLoss(nn.Module):
    def __init__(
        self,
        objective: str = "multi",
        negatives: str | Iterable[str] = ("P", "I"),
        temperature: float = 0.05,
        learn_temperature: bool = False,
        iq_negatives: str = "anchors",
        positive_count: str = "once",
        mask_duplicates: bool = True,
        exclusion_alpha: float = 1.0,
        exclusion_margin: float = 0.0,
    ) -> None:
        r"""
        The InF-Embed contrastive loss for instruction-following retrieval. Each anchor is an instruction joined
        with a query (``iq_{i,i}``) and has one positive passage ``p_i``. The loss asks the anchor's score
        ``s(p_i, iq_{i,i}) = cos / temperature`` to be higher than the scores of three kinds of *marginal*
        negatives, each obtained by changing one variable while keeping the others at their positive:

        - ``P`` (passages): ``s(p_m, iq_{i,i})`` for every other passage ``m`` in the batch. This is the usual
          in-batch-negatives loss (:class:`~sentence_transformers.losses.MultipleNegativesRankingLoss`).
        - ``I`` (instructions): ``s(p_i, iq_{j,i})`` for every query row of the batch that has the anchor's query
          joined with a *different* instruction. In an InF-IR batch the sibling ``(I-, Q+)`` is such a row, so the
          poisoned instruction is a free, hard negative for ``(I+, Q+)``.
        - ``IQ`` (instruction+query texts): ``s(p_i, iq_{k,k})`` for every other anchor ``k`` of the batch
          (``iq_negatives="anchors"``, the appendix (eq. 10) and reference-code reading: the passage ranks the
          in-batch queries), or ``s(p_i, iq_{i,k})``, the anchor's instruction joined with other queries
          (``iq_negatives="instruction_with_other_queries"``, the reading of the main text, eq. 6-7).

        Candidates whose text equals the positive's are not negatives and are masked (``mask_duplicates=True``):
        a passage with the positive passage's text (``P``), a row with the anchor's own instruction (``I``; the
        reference code counts the sibling ``(I+, Q-)``'s instruction joined with ``Q+``, i.e. the positive itself,
        as a negative), an anchor/row with the anchor's own instruction and query text (``IQ``).

        Two ways to combine the selected sets ``S_1 .. S_n``:

        - ``objective="uni"`` (paper eq. 6, 11-14, "univariate"): one cross-entropy per set, summed::

              sum_S  -log( e^pos / (e^pos + sum_{x in S} e^x) )

        - ``objective="multi"`` (paper eq. 7, 18-21, "multivariate"): one cross-entropy whose denominator holds
          every selected set (each set's sum is added, as in the equations)::

              -log( e^pos / (c * e^pos + sum_S sum_{x in S} e^x) )

          with ``c = 1`` (``positive_count="once"``, the reference code) or ``c = n`` (``"per_set"``: the
          equations literally, where every set's sum runs over the positive too).

        The loss is the mean over anchors. An anchor whose selected set is empty (e.g. no other instruction with
        its query in the batch) still counts in the mean; that set's term is ``-log(e^pos / e^pos) = 0`` (and
        ``log c`` for ``"multi"`` with ``"per_set"`` when all its sets are empty). With a single set ``uni`` and
        ``multi`` coincide.

        Args:
            objective: ``"multi"`` (default, the paper's best) or ``"uni"``, in the paper's sense (eq. 6-7).
            negatives: a non-empty subset of ``{"P", "I", "IQ"}``, as a tuple/list or a string like ``"P,I"``.
            temperature: the softmax temperature; logits are ``cos / temperature`` (``scale = 1 / temperature``,
                0.05 -> 20, as in the reference code and MultipleNegativesRankingLoss' default).
            learn_temperature: learn ``log(scale)`` as a parameter (``self.log_scale``), initialised from
                ``temperature`` and clamped to a scale of at most 100. Add the loss' parameters to the optimizer.
            iq_negatives: ``"anchors"`` (default: other anchors ``iq_{k,k}``) or ``"instruction_with_other_queries"``
                (``iq_{i,k}``: rows with the anchor's instruction and another query).
            positive_count: ``"once"`` (default) or ``"per_set"``: how often the positive appears in the
                multivariate denominator. Ignored by ``"uni"``.
            mask_duplicates: mask negatives whose text equals the positive's (see above). ``False`` reproduces the
                reference code, where only the anchor's own row/column is excluded.

        The reference code's vocabulary (its "uni" is the paper's ``multi``; ``qk``/``only_neg``/``kq`` are
        ``P``/``I``/``IQ``) is translated by :meth:`from_reference`, never accepted here: one name per setting.

        Requirements:
            1. Queries are joined instruction+query texts; the first ``N`` query rows are anchors, each with its
               positive passage in the same row of ``passages``.
            2. Text identities of every instruction, query and passage (:func:`build_batch_ids`), so that the I and
               IQ sets can be formed and duplicates masked.
            3. For the ``I`` set to be non-empty, the batch must hold the same query with other instructions: keep
               the three InF-IR siblings (I+,Q+)->P+, (I-,Q+)->P1-, (I+,Q-)->P2- of a row in the same batch.

        Inputs:
            +------------------------------------------------------------------+-------------------------------------+
            | Input (:class:`EmbeddedBatch` field)                             | Content                             |
            +==================================================================+=====================================+
            | ``queries`` ``(N+K, d)``                                         | instruction+query embeddings:       |
            |                                                                  | N anchors, then K extra rows        |
            +------------------------------------------------------------------+-------------------------------------+
            | ``passages`` ``(M, d)``, ``M >= N``                              | positives of the anchors, then      |
            |                                                                  | extra (negative) passages           |
            +------------------------------------------------------------------+-------------------------------------+
            | ``instruction_ids``, ``query_ids`` ``(N+K,)``; ``passage_ids``   | text identities (ints)              |
            | ``(M,)``                                                         |                                     |
            +------------------------------------------------------------------+-------------------------------------+
            | ``num_anchors``                                                  | ``N`` (needed when K > 0 and M > N) |
            +------------------------------------------------------------------+-------------------------------------+

        Recommendations:
            - ``InFEmbedLoss(objective="multi", negatives=("P", "I"))`` (the default) is the paper's best setting
              (Table 3, section 6.3).
            - Keep the three siblings of an InF-IR row in one batch; otherwise ``I`` (and most of ``IQ``) is empty
              and the loss reduces to in-batch passage negatives.
            - Keep ``mask_duplicates=True``; use ``False`` only to reproduce the reference implementation.

        Relations:
            - ``negatives=("P",)`` is :class:`~sentence_transformers.losses.MultipleNegativesRankingLoss` with
              ``scale = 1 / temperature`` (plus duplicate masking); extra passages play the role of its hard negatives.
            - ``objective="uni", negatives=("P", "IQ")`` with ``iq_negatives="anchors"`` is the symmetric InfoNCE
              (MultipleNegativesRankingLoss with ``directions=("query_to_doc", "doc_to_query")``, summed instead of
              averaged).

        Loss variants from the paper (``l^obj_sets`` in its notation):
            - ``l_{P,I}^multi`` (eq. 18), the recommended one::

                  loss = InFEmbedLoss(objective="multi", negatives=("P", "I"))

            - ``l_{P,I,IQ}^multi`` (eq. 7 / 21)::

                  loss = InFEmbedLoss(objective="multi", negatives=("P", "I", "IQ"))

            - ``l_{P,I}^uni`` (eq. 11), separate passage and instruction contrasts (Promptriever-like)::

                  loss = InFEmbedLoss(objective="uni", negatives=("P", "I"))

            - the reference code's single softmax (its "uni") over ``qk`` and ``only_neg``, with its unmasked
              duplicates, to compare with the authors' implementation (:meth:`from_reference` translates its
              vocabulary into the paper's: this is ``objective="multi", negatives=("P", "I")``)::

                  loss = InFEmbedLoss.from_reference("uni", "qk,only_neg")

        Example:
            ::

                import torch
                from infembed.losses import EmbeddedBatch, InFEmbedLoss, build_batch_ids

                # one InF-IR row: (I+, Q+) -> P+, (I-, Q+) -> P1-, (I+, Q-) -> P2-
                instructions = ["Only reviews from 2020.", "Only news articles.", "Only reviews from 2020."]
                queries = ["best budget phone", "best budget phone", "best flagship phone"]
                passages = ["A 2020 review of ...", "News: phone prices ...", "A 2020 review of flagships ..."]

                encode = lambda texts: torch.randn(len(texts), 8, requires_grad=True)  # your encoder here
                batch = EmbeddedBatch(
                    queries=encode([f"{q} {i}" for i, q in zip(instructions, queries)]),
                    passages=encode(passages),
                    instruction_ids=build_batch_ids(instructions),
                    query_ids=build_batch_ids(queries),
                    passage_ids=build_batch_ids(passages),
                )
                loss = InFEmbedLoss()(batch)
                loss.backward()

        Exclusion-aware scores: when the batch carries ``aspects`` (the excluded aspects of decomposed
        instructions, :class:`EmbeddedBatch`), a query row ``r`` whose instruction excludes aspects
        ``a_{r,1..m}`` is scored against a passage ``p`` as search scores it at query time, keep score minus a
        penalty, here a smooth one (``docs/losses.md``)::

            s(r, p) = cos(q_r, p) - exclusion_alpha * max_j t * softplus((cos(a_rj, p) - cos(q_r, p) - exclusion_margin) / t)

        with ``q_r`` the query joined with what the instruction keeps and ``t`` = :data:`EXCLUSION_SHARPNESS`;
        rows without aspects keep ``cos(q_r, p)``. Every logit above (positive, P, I, IQ) uses ``s``.
        """
        super().__init__()
        self.objective = _check_choice("objective", objective, _OBJECTIVES)
        self.negatives = parse_negatives(negatives)
        self.iq_negatives = _check_choice("iq_negatives", iq_negatives, _IQ_READINGS)
        self.positive_count = _check_choice("positive_count", positive_count, _POSITIVE_COUNTS)
        if not isinstance(mask_duplicates, bool):
            raise SettingsError(f"mask_duplicates must be True or False; got {mask_duplicates!r}")
        self.mask_duplicates = mask_duplicates
        for name, value in (("exclusion_alpha", exclusion_alpha), ("exclusion_margin", exclusion_margin)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SettingsError(f"{name} must be a finite number; got {value!r}")
        if exclusion_alpha < 0:
            raise SettingsError(f"exclusion_alpha must be >= 0; got {exclusion_alpha!r}")
        self.exclusion_alpha, self.exclusion_margin = float(exclusion_alpha), float(exclusion_margin)
        if not isinstance(learn_temperature, bool):
            raise SettingsError(f"learn_temperature must be True or False; got {learn_temperature!r}")
        self.learn_temperature = learn_temperature
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise SettingsError(f"temperature must be a positive number such as 0.05; got {temperature!r}")
        if not (math.isfinite(temperature) and temperature > 0):
            raise SettingsError(
                f"temperature must be a positive finite number such as 0.05; got {temperature!r}"
            )
        if learn_temperature and 1.0 / temperature > MAX_LEARNED_SCALE:
            raise SettingsError(
                f"with learn_temperature=True the scale 1/temperature is clamped to {MAX_LEARNED_SCALE:g}; "
                f"temperature={temperature!r} starts above that (use temperature >= {1 / MAX_LEARNED_SCALE:g})"
            )
        self.temperature = float(temperature)
        if learn_temperature:
            self.log_scale: nn.Parameter | None = nn.Parameter(torch.tensor(math.log(1.0 / temperature)))
        else:
            self.log_scale = None

    # -- settings ---------------------------------------------------------------------------------------------

    @classmethod
    def from_reference(
        cls, objective: str, negatives: str | Iterable[str], *, mask_duplicates: bool = False, **settings: Any
    ) -> InFEmbedLoss:
        """The loss named in the reference code's vocabulary, translated into the paper's.

        The reference code calls the single softmax over the union of the negative sets "uni" (the paper's
        ``multi``, eq. 7) and the sum of separate cross-entropies "``*_add``" (the paper's ``uni``, eq. 6), and
        names the sets ``qk`` (P), ``only_neg`` (I) and ``kq`` (IQ). It does not mask negatives whose text equals
        the positive's, hence ``mask_duplicates=False`` by default here. Example:
        ``InFEmbedLoss.from_reference("uni", "qk,only_neg")`` is ``InFEmbedLoss("multi", ("P", "I"),
        mask_duplicates=False)``.
        """
        key = objective.strip().lower().removesuffix("_add") if isinstance(objective, str) else objective
        if isinstance(objective, str) and objective.strip().lower().endswith("_add"):
            key = "add"
        if key not in REFERENCE_OBJECTIVES:
            raise SettingsError(
                f"unknown reference objective {objective!r}: the reference code's are 'uni' (one softmax) and "
                "'*_add' (a sum of cross-entropies)"
            )
        names = negatives.replace("+", ",").split(",") if isinstance(negatives, str) else list(negatives)
        translated = []
        for name in names:
            if not isinstance(name, str) or name.strip().lower() not in REFERENCE_NEGATIVES:
                raise SettingsError(
                    f"unknown reference negative set {name!r}: the reference code's are "
                    f"{', '.join(REFERENCE_NEGATIVES)}"
                )
            translated.append(REFERENCE_NEGATIVES[name.strip().lower()])
        return cls(
            objective=REFERENCE_OBJECTIVES[key],
            negatives=translated,
            mask_duplicates=mask_duplicates,
            **settings,
        )

    @property
    def scale(self) -> float:
        """The current scale ``1 / temperature`` (the learned one with ``learn_temperature=True``)."""
        return float(self._scale_tensor(torch.float32, torch.device("cpu")).detach())

    def _scale_tensor(self, dtype: torch.dtype, device: torch.device) -> Tensor:
        if self.log_scale is None:
            return torch.tensor(1.0 / self.temperature, dtype=dtype, device=device)
        return self.log_scale.to(dtype=dtype, device=device).exp().clamp(max=MAX_LEARNED_SCALE)

    def get_config_dict(self) -> dict[str, Any]:
        """The constructor arguments; ``InFEmbedLoss(**loss.get_config_dict())`` rebuilds the loss (a learned
        temperature is in the state dict as ``log_scale``, not here)."""
        return {
            "objective": self.objective,
            "negatives": list(self.negatives),
            "temperature": self.temperature,
            "learn_temperature": self.learn_temperature,
            "iq_negatives": self.iq_negatives,
            "positive_count": self.positive_count,
            "mask_duplicates": self.mask_duplicates,
            "exclusion_alpha": self.exclusion_alpha,
            "exclusion_margin": self.exclusion_margin,
        }

    def extra_repr(self) -> str:
        return ", ".join(f"{key}={value!r}" for key, value in self.get_config_dict().items())

    @property
    def citation(self) -> str:
        return """
@misc{zhuang2025betterinstructionfollowingretrieval,
      title={Towards Better Instruction Following Retrieval Models},
      author={Yuchen Zhuang and Aaron Trinh and Rushi Qiang and Haotian Sun and Chao Zhang and Hanjun Dai and Bo Dai},
      year={2025},
      eprint={2505.21439},
      archivePrefix={arXiv},
      url={https://arxiv.org/abs/2505.21439},
}
"""

    # -- computation ------------------------------------------------------------------------------------------

    def forward(self, batch: EmbeddedBatch) -> Tensor:
        return self.compute_loss_from_embeddings(batch)

    def compute_loss_from_embeddings(self, batch: EmbeddedBatch) -> Tensor:
        """The loss (a scalar, mean over anchors) of one :class:`EmbeddedBatch`."""
        n = check_batch(batch)
        queries, passages = batch.queries, batch.passages
        if queries.dtype in (torch.float16, torch.bfloat16):
            # logits up to 100 and sums over the batch: do the softmax part in float32
            queries, passages = queries.float(), passages.float()
        queries = F.normalize(queries, dim=-1)
        passages = F.normalize(passages, dim=-1)
        device = queries.device
        scale = self._scale_tensor(queries.dtype, device)
        cosines = queries @ passages.T  # (N+K, M): cos(q_r, p_m)
        if batch.aspects is not None and batch.aspects.shape[0] > 0:
            cosines = cosines - self.exclusion_alpha * self._penalty(cosines, batch, passages)
        positive = scale * cosines[:n, :n].diagonal()  # (N,)
        masks = negative_masks(
            batch,
            self.negatives,
            iq_negatives=self.iq_negatives,
            mask_duplicates=self.mask_duplicates,
            device=device,
        )
        negative_logits: list[Tensor] = []  # one (N, C) matrix per selected set, masked entries at -inf
        if "P" in masks:
            scores = scale * cosines[:n]  # (N, M): s(p_m, iq_{i,i})
            negative_logits.append(scores.masked_fill(~masks["P"], -math.inf))
        if "I" in masks or "IQ" in masks:
            scores = scale * cosines[:, :n].T  # (N, N+K): s(p_i, q_r)
            negative_logits += [
                scores.masked_fill(~masks[name], -math.inf) for name in ("I", "IQ") if name in masks
            ]

        positive_column = positive[:, None]
        if self.objective == "uni":
            per_anchor = sum(
                torch.logsumexp(torch.cat([positive_column, logits], dim=1), dim=1) - positive
                for logits in negative_logits
            )
        else:
            if self.positive_count == "per_set":
                positive_column = positive_column + math.log(len(negative_logits))
            log_denominator = torch.logsumexp(torch.cat([positive_column, *negative_logits], dim=1), dim=1)
            per_anchor = log_denominator - positive
        return per_anchor.mean()

    def _penalty(self, cosines: Tensor, batch: EmbeddedBatch, passages: Tensor) -> Tensor:
        """``(N+K, M)``: per query row and passage, the largest smoothed hinge over the row's aspects (0 for a
        row without aspects)."""
        aspects = batch.aspects.to(passages.dtype)
        owner = batch.aspect_owner.to(cosines.device).long()
        aspect_cos = F.normalize(aspects, dim=-1) @ passages.T  # (A, M)
        hinge = aspect_cos - cosines[owner] - self.exclusion_margin
        smooth = F.softplus(hinge, beta=1.0 / EXCLUSION_SHARPNESS)  # t * log(1 + exp(hinge / t))
        rows = cosines.shape[0]
        owns = torch.zeros(rows, owner.shape[0], dtype=torch.bool, device=cosines.device)
        owns[owner, torch.arange(owner.shape[0], device=cosines.device)] = True
        per_row = smooth.unsqueeze(0).masked_fill(~owns[:, :, None], -math.inf).amax(dim=1)
        return torch.where(owns.any(dim=1)[:, None], per_row, torch.zeros_like(per_row))
