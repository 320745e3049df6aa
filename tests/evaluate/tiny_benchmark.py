"""A tiny FollowIR-style benchmark dir, written file by file in the documented format (docs/architecture.md),
optionally with ``top_ranked.jsonl`` and ``excluded.jsonl``; for the runner and CLI tests."""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = {
    "d1": (
        "Heat conduction in composite slabs",
        "An experimental study of heat conduction through layered slabs.",
    ),
    "d2": ("Heat conduction in slabs", "A theoretical analysis of transient heat conduction in a slab."),
    "d3": ("Supersonic flow past a cylinder", "Measurements of supersonic flow past a circular cylinder."),
    "d4": ("Hypersonic flow past a cylinder", "Hypersonic flow past a cylinder at very high Mach number."),
    "d5": ("Boundary layer transition", "Transition of the boundary layer on a flat plate at low speed."),
    "d6": ("Wing in a slipstream", "The aerodynamics of a wing in a propeller slipstream."),
    "d7": ("Panel flutter", "Flutter of thin panels in supersonic flow."),
    "d8": ("Shock tubes", "Shock tube experiments on real gas effects."),
}
QUERIES = {
    "q1": (
        "heat conduction in slabs",
        "Experimental and theoretical studies are relevant.",
        "Only experimental studies are relevant.",
    ),
    "q2": (
        "flow past a cylinder",
        "Supersonic and hypersonic flow are relevant.",
        "Only supersonic flow is relevant; hypersonic flow is not.",
    ),
}
QRELS_OG = {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 1, "d4": 1}}
QRELS_CHANGED = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 1, "d4": 0}}


def _jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _qrels(path: Path, qrels) -> None:
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"{q}\t{d}\t{r}" for q, docs in qrels.items() for d, r in docs.items()
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_benchmark(
    root: Path,
    *,
    corpus: dict[str, tuple[str, str]] | None = None,
    top_ranked: dict[str, list[str]] | None = None,
    excluded: dict[str, list[str]] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    corpus = CORPUS if corpus is None else corpus
    _jsonl(root / "corpus.jsonl", ({"_id": d, "title": t, "text": x} for d, (t, x) in corpus.items()))
    _jsonl(
        root / "queries.jsonl",
        (
            {"_id": q, "text": t, "instruction_og": og, "instruction_changed": ch}
            for q, (t, og, ch) in QUERIES.items()
        ),
    )
    _qrels(root / "qrels_og.tsv", QRELS_OG)
    _qrels(root / "qrels_changed.tsv", QRELS_CHANGED)
    if top_ranked is not None:
        _jsonl(
            root / "top_ranked.jsonl", ({"query-id": q, "corpus-ids": ids} for q, ids in top_ranked.items())
        )
    if excluded is not None:
        _jsonl(root / "excluded.jsonl", ({"query-id": q, "corpus-ids": ids} for q, ids in excluded.items()))
    return root
