"""Exclusion-aware scoring: search with what the instruction keeps, push down what it excludes.

For one query with instruction ``I``, :func:`infembed.instructions.split_instruction` gives ``keep`` and the
excluded aspects ``e_1..e_m``. A retriever scores the query text (the template applied to ``keep``) and each
aspect, as a standalone text, against the documents: ``s_k(d)`` and ``s_j(d)``. Both are standardised over the
query's candidate pool (its top ``pool`` documents by ``s_k``, or the given candidates when reranking), so the
rule is the same for BM25 and cosine scores::

    z_k(d) = (s_k(d) - mean_pool s_k) / std_pool s_k          z_j(d) likewise for s_j
    penalty(d) = max_j relu(z_j(d) - max(threshold, z_k(d) + margin))
    score(d)   = s_k(d) - alpha * std_pool(s_k) * penalty(d)

A document is punished only when it matches an excluded aspect clearly (above ``threshold``) *and* better than
it matches what is kept (by ``margin``): a still-relevant document that shares words with the excluded aspect
but matches the kept part at least as well keeps its score. An instruction without exclusions gives exactly
the plain score. ``alpha``, ``threshold`` and ``margin`` are fitted on training rows (:func:`fit`), never on
benchmark queries, and saved with a trained model (``infembed.json``: ``exclusions``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from infembed.data.errors import SettingsError
from infembed.instructions import DEFAULT_SPLITTER, SPLITTERS, Instruction, split_instructions

__all__ = ["ExclusionSettings", "DEFAULTS", "penalised_scores", "ExclusionPlan", "plan", "apply", "fit", "FitReport",
           "exclusion_aware_scores", "resolve_exclusions"]


SCALES = ("range", "zscore")
#: Fitted settings whose objective is within this of the best are equally good (fit() and fit-exclusions --save).
FIT_TIE = 0.002
#: The splitter the settings are fitted with: the rules split the negation-aware rows' long excluded clauses whole,
#: the learned decomposer (auto) cuts them into pieces (fit objective 0.600 against 0.887 for BM25), so a fit with
#: it would tune the scoring to that failure (docs/instructions.md). The fitted settings serve every splitter.
FIT_SPLITTER = "rules"
#: What matches documents against the excluded aspects and guards: the retriever's own scorer, or BM25 over the
#: same documents (lexical evidence; a short aspect phrase is a keyword query, where small dense encoders are
#: least precise). The keep part is always scored by the retriever itself.
ASPECT_SCORERS = ("self", "bm25")


@dataclass(frozen=True)
class ExclusionSettings:
    """How instructions that exclude are handled. ``splitter``: ``off`` (plain scoring), ``rules`` or ``llm``.

    The defaults were fitted on the negation-aware InF-IR rows with the packaged MiniLM and with BM25 (see
    docs/instructions.md); a trained model carries its own fitted values."""

    splitter: str = DEFAULT_SPLITTER
    alpha: float = 5.0
    threshold: float = 0.75
    margin: float = 0.5
    pool: int = 100
    scale: str = "range"
    aspect_scorer: str = "self"

    def __post_init__(self) -> None:
        if self.splitter not in SPLITTERS:
            raise SettingsError(f"exclusions must be one of {SPLITTERS}, got {self.splitter!r}")
        for name in ("alpha", "threshold", "margin"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise SettingsError(f"exclusion setting {name} must be a finite number, got {value!r}")
        if self.alpha < 0:
            raise SettingsError(f"exclusion setting alpha must be >= 0, got {self.alpha}")
        if self.scale not in SCALES:
            raise SettingsError(f"exclusion setting scale must be one of {SCALES}, got {self.scale!r}")
        if self.aspect_scorer not in ASPECT_SCORERS:
            raise SettingsError(
                f"exclusion setting aspect_scorer must be one of {ASPECT_SCORERS}, got {self.aspect_scorer!r}"
            )
        if not isinstance(self.pool, int) or self.pool < 2:
            raise SettingsError(f"exclusion setting pool must be an integer >= 2, got {self.pool!r}")

    @property
    def enabled(self) -> bool:
        return self.splitter != "off"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None, **overrides: Any) -> ExclusionSettings:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in (data or {}).items() if k in names}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_splitter(self, splitter: str | None) -> ExclusionSettings:
        return self if splitter is None else replace(self, splitter=splitter)


def resolve_exclusions(exclusions: ExclusionSettings | str | None, default: ExclusionSettings) -> ExclusionSettings:
    """``None``/``"off"`` -> off; ``"rules"``/``"llm"`` -> the retriever's fitted settings with that splitter."""
    if exclusions is None:
        return default.with_splitter("off")
    if isinstance(exclusions, str):
        return default.with_splitter(exclusions)
    return exclusions


# Fitted with :func:`fit` on the 270 negation-aware InF-IR rows (docs/instructions.md): BM25 with bm25s, English
# stopwords; dense with the packaged all-MiniLM-L6-v2. A trained model saves its own fit in infembed.json.
DEFAULTS = {
    "bm25": ExclusionSettings(alpha=3.0, threshold=0.5, margin=0.5),
    "dense": ExclusionSettings(alpha=3.0, threshold=0.5, margin=0.25, aspect_scorer="bm25"),
}


def _median(sample: np.ndarray) -> float:
    """``np.median`` of a non-empty 1-d array, the same value, without its generic overhead (a search computes one
    per aspect and guard: most of exclusion-aware BM25 search's extra time went there)."""
    k = sample.size // 2
    if sample.size % 2:
        return float(np.partition(sample, k)[k])
    part = np.partition(sample, [k - 1, k])
    return float(np.mean(part[k - 1 : k + 1]))


def _standardise(values: np.ndarray, pool: np.ndarray, scale: str = "zscore") -> tuple[np.ndarray, float, float]:
    sample = values[pool]
    if scale == "range":
        if not sample.size:
            return np.zeros_like(values, dtype=np.float64), 0.0, 0.0
        mid, top = _median(sample), float(sample.max())
        spread = top - mid
        if not math.isfinite(spread) or spread <= 1e-12:
            return np.zeros_like(values, dtype=np.float64), mid, 0.0
        return (values.astype(np.float64) - mid) / spread, mid, spread
    mean = float(sample.mean()) if sample.size else 0.0
    std = float(sample.std()) if sample.size > 1 else 0.0
    if not math.isfinite(std) or std <= 1e-12:
        return np.zeros_like(values, dtype=np.float64), mean, 0.0
    return (values.astype(np.float64) - mean) / std, mean, std


def penalty(keep: np.ndarray, excluded: np.ndarray, pool: np.ndarray, settings: ExclusionSettings,
            guards: Sequence[np.ndarray | None] | None = None) -> tuple[np.ndarray, float]:
    """``(penalty per document, spread of the keep scores over the pool)`` for one query: ``keep`` (n_docs,),
    ``excluded`` (m, n_docs), ``pool`` the indices the scores are standardised over, ``guards[j]`` the scores of
    aspect j's guard (the positive requirement stated beside it) or None."""
    _, _, keep_spread = _standardise(keep, pool, settings.scale)
    out = np.zeros(keep.shape[0], dtype=np.float64)
    for j, row in enumerate(np.atleast_2d(excluded)):
        z_ex, _, ex_spread = _standardise(row, pool, settings.scale)
        if ex_spread == 0.0:
            continue
        floor: np.ndarray | float = settings.threshold
        guard = guards[j] if guards is not None and j < len(guards) else None
        if guard is not None:
            z_guard, _, guard_spread = _standardise(guard, pool, settings.scale)
            if guard_spread > 0.0:
                floor = np.maximum(settings.threshold, z_guard + settings.margin)
        np.maximum(out, z_ex - floor, out=out)
    return out, keep_spread


def penalised_scores(keep: np.ndarray, excluded: np.ndarray, settings: ExclusionSettings,
                     pool: np.ndarray | None = None, guards: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
    """One query's final scores (see the module doc). ``pool`` defaults to the top ``settings.pool`` documents by
    ``keep``; with no excluded aspect the keep scores come back unchanged."""
    keep = np.asarray(keep)
    excluded = np.asarray(excluded).reshape(-1, keep.shape[0]) if np.size(excluded) else np.zeros((0, keep.shape[0]))
    if excluded.shape[0] == 0 or settings.alpha == 0.0 or keep.shape[0] == 0:
        return keep
    if pool is None:
        size = min(settings.pool, keep.shape[0])
        pool = np.argpartition(-keep, size - 1)[:size] if size < keep.shape[0] else np.arange(keep.shape[0])
    pen, keep_std = penalty(keep, excluded, pool, settings, guards)
    scale = keep_std if keep_std > 0 else 1.0
    return (keep.astype(np.float64) - settings.alpha * scale * pen).astype(keep.dtype if keep.dtype.kind == "f" else np.float64)


# ----------------------------------------------------------------------------------------------- plans
@dataclass
class ExclusionPlan:
    """What a retriever must score for a list of instructions: one keep text per query and the excluded
    aspects, flattened (``aspect_owner[j]`` is the query row of aspect ``j``)."""

    splits: list[Instruction]
    aspects: list[str]
    aspect_owner: list[int]
    #: per aspect, the index into ``guard_texts`` of its guard, or -1
    aspect_guard: list[int] = field(default_factory=list)
    guard_texts: list[str] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.aspects)

    def keep_instructions(self) -> list[str | None]:
        return [s.keep or None for s in self.splits]

    def rows_of(self, query_row: int) -> list[int]:
        return [j for j, owner in enumerate(self.aspect_owner) if owner == query_row]


def _without_aspects(guard: str, aspects: Sequence[str]) -> str:
    """A guard with the instruction's excluded aspects cut out: where the kept part still names an excluded item
    (a changed FollowIR instruction repeats the original text, which lists what is later excluded), the guard
    must not spare the documents on that item. Nothing searchable left: no guard."""
    import re

    from infembed.search.bm25 import terms

    for aspect in sorted(aspects, key=len, reverse=True):
        guard = re.sub(re.escape(aspect), " ", guard, flags=re.IGNORECASE)
    return guard.strip() if terms(guard) else ""


def plan(instructions: Sequence[str | None], splitter: str | Callable[[str], Instruction]) -> ExclusionPlan:
    """Split every instruction (``splitter`` ``"off"`` keeps them whole) and list the aspects and guards to
    score."""
    splits = split_instructions(list(instructions), splitter) if splitter != "off" else [
        Instruction((i or "").strip()) for i in instructions
    ]
    # an instruction that is only an exclusion keeps nothing: the query alone is searched
    aspects, owner, aspect_guard, guard_texts = [], [], [], []
    guard_index: dict[str, int] = {}
    for row, split in enumerate(splits):
        for index, aspect in enumerate(split.exclude):
            aspects.append(aspect)
            owner.append(row)
            guard = _without_aspects(split.guard_of(index), split.exclude)
            if guard:
                aspect_guard.append(guard_index.setdefault(guard, len(guard_index)))
                if len(guard_texts) < len(guard_index):
                    guard_texts.append(guard)
            else:
                aspect_guard.append(-1)
    return ExclusionPlan(splits, aspects, owner, aspect_guard, guard_texts)


def apply(keep_scores: np.ndarray, aspect_scores: np.ndarray, exclusion_plan: ExclusionPlan,
          settings: ExclusionSettings, pools: Sequence[np.ndarray | None] | None = None,
          guard_scores: np.ndarray | None = None) -> np.ndarray:
    """Scores for every query row: ``keep_scores`` (n_queries, n_docs), ``aspect_scores`` (n_aspects, n_docs),
    ``guard_scores`` (n_guard_texts, n_docs)."""
    out = np.array(keep_scores, copy=True)
    for row in range(out.shape[0]):
        rows = exclusion_plan.rows_of(row)
        if rows:
            pool = pools[row] if pools is not None else None
            guards = None
            if guard_scores is not None and len(guard_scores):
                guards = [guard_scores[exclusion_plan.aspect_guard[j]] if exclusion_plan.aspect_guard[j] >= 0 else None
                          for j in rows]
            out[row] = penalised_scores(keep_scores[row], aspect_scores[rows], settings, pool, guards)
    return out


# ----------------------------------------------------------------------------------------------- fitting
@dataclass
class FitReport:
    settings: ExclusionSettings
    objective: float
    objective_off: float
    n_scenarios: int
    grid: list[dict[str, float]]

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings.to_json(), "objective": self.objective, "objective_off": self.objective_off,
                "n_scenarios": self.n_scenarios}


ALPHAS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 8.0)
THRESHOLDS = (0.0, 0.25, 0.5, 0.75, 1.0)
# Never negative: a document that matches the kept part at least as well as an excluded aspect is not punished
# (a negative margin raised p-MRR on the training rows but pushed still-relevant documents down).
MARGINS = (0.0, 0.25, 0.5)


def scenarios_from_rows(rows: Sequence[Any]) -> tuple[list[str], list[tuple[str, str, int, int]]]:
    """Fitting scenarios from negation-aware InF-IR rows: ``(I+, Q+)`` must rank ``P+`` first while ``I+``
    excludes ``P1-``'s aspect, and ``(I-, Q+)`` must rank ``P1-`` first while ``I-`` excludes ``P+``'s. Returns
    the passage pool (every row's passages) and ``(query, instruction, target, excluded)`` index tuples."""
    passages: dict[str, int] = {}

    def pid(text: str) -> int:
        return passages.setdefault(text, len(passages))

    out = []
    for row in rows:
        p, n1 = pid(row.document_positive), pid(row.hard_negative_document_1)
        pid(row.hard_negative_document_2)
        out.append((row.query_positive, row.instruction_positive, p, n1))
        out.append((row.query_positive, row.instruction_negative, n1, p))
    return list(passages), out


def _ranks(scores: np.ndarray, docs: np.ndarray) -> np.ndarray:
    own = scores[np.arange(len(docs)), docs][:, None]
    return 1 + (scores > own).sum(axis=1)


def _mrr(scores: np.ndarray, targets: np.ndarray) -> float:
    return float(np.mean(1.0 / _ranks(scores, targets)))


def _objective(scores: np.ndarray, plain: np.ndarray, targets: np.ndarray, excluded: np.ndarray) -> float:
    """Half the intended passage's MRR, half p-MRR's rank-change score of the excluded passage between the
    search without the exclusion (``plain``: the keep text alone) and with it, as FollowIR scores a changed
    instruction."""
    before, after = _ranks(plain, excluded), _ranks(scores, excluded)
    moved = np.where(before >= after, after / before - 1.0, 1.0 - before / after)
    return 0.5 * _mrr(scores, targets) + 0.5 * float(np.mean(moved))


def fit(retriever: Any, rows: Sequence[Any], *, splitter: str | Callable[[str], Instruction] = FIT_SPLITTER,
        pool: int = 100, scale: str = "range", alphas: Sequence[float] = ALPHAS,
        thresholds: Sequence[float] = THRESHOLDS, margins: Sequence[float] = MARGINS,
        aspect_scorers: Sequence[str] = ("self",)) -> FitReport:
    """Grid-fit ``alpha``, ``threshold`` and ``margin`` (and, given several ``aspect_scorers``, which scorer
    matches the excluded aspects) for ``retriever`` (a BM25 or dense retriever of
    :mod:`infembed.evaluate.retrievers`) on negation-aware training rows (see :func:`scenarios_from_rows`).

    The retriever is indexed on every row's passages. The objective is half the mean reciprocal rank of the
    intended passage and half the p-MRR rank-change score of the excluded passage between the search with the
    kept part alone and the exclusion-aware search, as FollowIR scores a changed instruction: pushing the
    excluded passage down counts, and so does keeping the intended one (which often shares words with the
    excluded aspect) up. Among settings within 0.002 of the best objective the mildest (the retriever's own
    aspect scorer, then the smallest ``alpha``, then the largest ``threshold`` and ``margin``) is chosen."""
    from infembed.data.records import Document

    for scorer in aspect_scorers:
        if scorer not in ASPECT_SCORERS:
            raise SettingsError(f"aspect scorer must be one of {ASPECT_SCORERS}, got {scorer!r}")
    passages, items = scenarios_from_rows(rows)
    if not items:
        raise SettingsError("no rows to fit exclusion settings on")
    retriever.index({str(i): Document("", text) for i, text in enumerate(passages)})
    queries = [query for query, _, _, _ in items]
    instructions = [instruction for _, instruction, _, _ in items]
    exclusion_plan = plan(instructions, splitter)
    extra = exclusion_plan.aspects + exclusion_plan.guard_texts
    keep_scores = retriever.score_pairs(queries, exclusion_plan.keep_instructions())
    targets = np.array([t for _, _, t, _ in items])
    excluded = np.array([e for _, _, _, e in items])
    objective_off = _objective(retriever.score_pairs(queries, instructions), keep_scores, targets, excluded)
    n_aspects = len(exclusion_plan.aspects)
    grid = []
    for scorer in aspect_scorers:
        if scorer == "bm25":
            from infembed.search.bm25 import BM25

            extra_scores = BM25().index(passages).scores(extra)
        else:
            extra_scores = retriever.score_pairs(extra, [None] * len(extra))
        aspect_scores, guard_scores = extra_scores[:n_aspects], extra_scores[n_aspects:]
        for alpha, threshold, margin in itertools.product(alphas, thresholds, margins):
            settings = ExclusionSettings(alpha=alpha, threshold=threshold, margin=margin, pool=pool, scale=scale)
            adjusted = apply(keep_scores, aspect_scores, exclusion_plan, settings, guard_scores=guard_scores)
            grid.append({"aspect_scorer": scorer, "alpha": alpha, "threshold": threshold, "margin": margin,
                         "objective": _objective(adjusted, keep_scores, targets, excluded)})
    best = max(g["objective"] for g in grid)
    chosen = min((g for g in grid if g["objective"] >= best - FIT_TIE),
                 key=lambda g: (g["aspect_scorer"] != "self", g["alpha"], -g["threshold"], -g["margin"]))
    settings = ExclusionSettings(alpha=chosen["alpha"], threshold=chosen["threshold"], margin=chosen["margin"], pool=pool,
                                 scale=scale, splitter=splitter if isinstance(splitter, str) else "llm",
                                 aspect_scorer=chosen["aspect_scorer"])
    return FitReport(settings, chosen["objective"], objective_off, len(items), grid)


# ----------------------------------------------------------------------------------------------- scoring
ScorePairs = Callable[[Sequence[str], Sequence["str | None"]], np.ndarray]


def exclusion_aware_scores(score_pairs: ScorePairs, queries: Sequence[str], instructions: Sequence[str | None],
                           settings: ExclusionSettings | None,
                           splitter: Callable[[str], Instruction] | None = None,
                           pools: Sequence[np.ndarray | None] | None = None,
                           lexical_scores: Callable[[Sequence[str]], np.ndarray] | None = None) -> np.ndarray:
    """The (n_queries, n_docs) scores of any retriever, exclusion-aware when ``settings`` enable it.

    ``score_pairs(queries, instructions)`` is the retriever's own scorer of (query, instruction) pairs against
    its documents (an instruction of None scores the text alone): BM25 over the joined text, a dense model's
    cosines. With ``settings.aspect_scorer == "bm25"`` the excluded aspects and guards are scored by
    ``lexical_scores(texts)`` (BM25 over the same documents) instead. Queries whose instruction excludes nothing
    get exactly ``score_pairs``'s scores."""
    if settings is None or not settings.enabled:
        return score_pairs(queries, instructions)
    exclusion_plan = plan(instructions, splitter or settings.splitter)
    if not exclusion_plan.any:
        return score_pairs(queries, instructions)
    extra = exclusion_plan.aspects + exclusion_plan.guard_texts
    n, m = len(queries), len(exclusion_plan.aspects)
    if settings.aspect_scorer == "bm25" and lexical_scores is not None:
        keep = score_pairs(list(queries), exclusion_plan.keep_instructions())
        extra_scores = lexical_scores(extra)
        return apply(keep, extra_scores[:m], exclusion_plan, settings, pools, guard_scores=extra_scores[m:])
    scores = score_pairs(list(queries) + extra, exclusion_plan.keep_instructions() + [None] * len(extra))
    return apply(scores[:n], scores[n:n + m], exclusion_plan, settings, pools, guard_scores=scores[n + m:])
