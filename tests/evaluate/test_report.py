"""Reading results.json files and showing them (:mod:`infembed.evaluate.report`).

Invariants: every run read back prints one table row (x100, signed when negative) and feeds the PNG; a file
that is not an ``infembed eval`` results.json (not JSON, not UTF-8, not an object, a missing key, a value
that is not a number) raises a :class:`DataError` that names the file and the field; a directory stands for
its ``*.json`` files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infembed.data.errors import DataError
from infembed.evaluate.report import load_results, plot_results, results_table

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
