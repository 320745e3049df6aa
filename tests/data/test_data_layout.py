"""One reader per format, one rule per check, imports that only go down (issue 11).

Invariants: a relevance label is accepted or refused alike by every qrels reader (qrels TSV, TREC qrels, hub
rows), since they share one rule; the qrels TSV reader keeps file order and lines for readers that need them;
no module of ``infembed.data`` imports, at module level, one that imports it back.
"""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

import infembed.data
from infembed.data import formats
from infembed.data.errors import DataError
from infembed.data.rows import Rows, qrels_from_rows

ACCEPTED = [("1", 1), ("0", 0), ("-1", -1), ("2.0", 2), ("1e1", 10)]
REFUSED = ["1.5", "nan", "inf", "high", "true"]


def _three_readers(tmp_path: Path, label: str) -> list:
    """The label's judgment through the qrels TSV, TREC qrels and hub-row readers; each result or DataError."""
    tsv = tmp_path / "qrels.tsv"
    tsv.write_text(f"query-id\tcorpus-id\tscore\nq1\td1\t{label}\n")
    trec = tmp_path / "qrels.trec"
    trec.write_text(f"q1 0 d1 {label}\n")
    readers = [
        lambda: formats.read_qrels_tsv(tsv),
        lambda: formats.read_trec_qrels(trec),
        lambda: qrels_from_rows(Rows("hub", [{"query-id": "q1", "corpus-id": "d1", "score": label}])),
    ]
    out = []
    for read in readers:
        try:
            out.append(read())
        except DataError as error:
            out.append(error)
    return out


@pytest.mark.parametrize("label, value", ACCEPTED)
def test_every_qrels_reader_accepts_the_same_labels(tmp_path, label, value):
    assert _three_readers(tmp_path, label) == [{"q1": {"d1": value}}] * 3


@pytest.mark.parametrize("label", REFUSED)
def test_every_qrels_reader_refuses_the_same_labels(tmp_path, label):
    results = _three_readers(tmp_path, label)
    assert all(isinstance(r, DataError) and f"{label!r} is not an integer" in str(r) for r in results), (
        results
    )


def test_qrels_tsv_judgments_keep_file_order_and_lines(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq2\td1\t1\n\nq1\td2\t0\nq2\td3\t2\n")
    assert list(formats.iter_qrels_tsv(path)) == [(2, "q2", "d1", 1), (4, "q1", "d2", 0), (5, "q2", "d3", 2)]
    assert formats.read_qrels_tsv(path) == {"q2": {"d1": 1, "d3": 2}, "q1": {"d2": 0}}


def _module_imports() -> dict[str, set[str]]:
    """Each module of infembed.data -> the infembed.data modules it imports at module level."""
    names = {"infembed.data"} | {
        info.name for info in pkgutil.walk_packages(infembed.data.__path__, "infembed.data.")
    }
    graph: dict[str, set[str]] = {}
    for name in names:
        spec_path = Path(__import__(name, fromlist=["_"]).__file__)
        deps: set[str] = set()
        for node in ast.parse(spec_path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.module and node.module in names:
                deps.add(node.module)
                deps |= {f"{node.module}.{alias.name}" for alias in node.names} & names
            elif isinstance(node, ast.Import):
                deps |= {alias.name for alias in node.names} & names
        graph[name] = deps - {name}  # a package importing its own submodules is no circle
    return graph


def test_no_import_circle_in_the_data_layer():
    graph = _module_imports()
    assert {"infembed.data.hub", "infembed.data.benchmarks.followir", "infembed.data.inf_ir"} <= set(graph)

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for dep in graph[start]:
            if dep == target or (dep not in seen and reaches(dep, target, seen | {dep})):
                return True
        return False

    circles = sorted(name for name in graph if reaches(name, name, {name}))
    assert not circles, circles
