"""TREC run files (:func:`write_trec_run`, :func:`read_trec_run`): the format other systems' runs come in.

Invariants:
* A written run reads back to the same run (every score to the bit), and its rank column follows the order
  every metric uses: score descending, ties by doc id descending (trec_eval's, pytrec_eval's and mteb's rule),
  whatever order the documents were given in.
* A malformed run is refused with one DataError naming file, line and field: a line without 6 columns, a rank
  or score that is not a number (a rank must be a whole number >= 0), a non-finite score, a document twice for
  a query; with the benchmark's ids given, a query or document id the benchmark does not know; an empty file.
* An id or tag holding whitespace cannot be written (it would shift the columns).
"""

from __future__ import annotations

import pytest

from infembed.data import formats
from infembed.data.errors import DataError


def test_written_ranks_follow_the_metrics_tie_rule(tmp_path):
    run = {"q": {"a": 0.5, "b": 0.9, "c": 0.5, "d": 0.5, "e": 0.1}}  # a, c, d tied
    formats.write_trec_run(tmp_path / "run.trec", run, tag="sys")
    lines = [line.split() for line in (tmp_path / "run.trec").read_text().splitlines()]
    assert [(parts[2], parts[3]) for parts in lines] == [
        ("b", "1"),
        ("d", "2"),
        ("c", "3"),
        ("a", "4"),
        ("e", "5"),
    ]
    assert formats.read_trec_run(tmp_path / "run.trec") == run
    assert formats.trec_run_tag(tmp_path / "run.trec") == "sys"


QIDS, DOCS = {"1", "2"}, {"a", "b", "c"}
BAD = {
    "five columns": ("1 Q0 a 1 2.0\n", ["line 1", "expected 6 columns"], None),
    "seven columns": ("1 Q0 a 1 2.0 sys\n1 Q0 b 2 1.0 sys extra\n", ["line 2", "expected 6 columns"], None),
    "non-numeric score": ("1 Q0 a 1 high sys\n", ["line 1", "field 'score'", "'high' is not a number"], None),
    "infinite score": ("1 Q0 a 1 inf sys\n", ["line 1", "field 'score'", "not a finite number"], None),
    "non-numeric rank": ("1 Q0 a first 2.0 sys\n", ["line 1", "field 'rank'", "'first'"], None),
    "fractional rank": ("1 Q0 a 1.5 2.0 sys\n", ["line 1", "field 'rank'", "'1.5'"], None),
    "negative rank": ("1 Q0 a -1 2.0 sys\n", ["line 1", "field 'rank'", "'-1'"], None),
    "duplicate (qid, docid)": (
        "1 Q0 a 1 2.0 sys\n1 Q0 a 2 1.0 sys\n",
        ["line 2", "field 'docid'", "twice"],
        None,
    ),
    "unknown query id": (
        "1 Q0 a 1 2.0 sys\n9 Q0 a 1 2.0 sys\n",
        ["line 2", "field 'qid'", "'9'"],
        (QIDS, DOCS),
    ),
    "unknown doc id": (
        "1 Q0 a 1 2.0 sys\n1 Q0 zz 2 1.0 sys\n",
        ["line 2", "field 'docid'", "'zz'"],
        (QIDS, DOCS),
    ),
    "empty file": ("\n", ["no run line"], None),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_runs_name_file_line_and_field(tmp_path, case):
    text, expected, known = BAD[case]
    path = tmp_path / "run.trec"
    path.write_text(text)
    with pytest.raises(DataError) as caught:
        formats.read_trec_run(path, *(known or ()))
    message = str(caught.value)
    for part in [str(path), *expected]:
        assert part in message, message


def test_zero_based_ranks_and_any_q0_column_are_read(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("1 Q0 a 0 2.0 sys\n1 0 b 1 1.0 sys\n")
    assert formats.read_trec_run(path, QIDS, DOCS) == {"1": {"a": 2.0, "b": 1.0}}


@pytest.mark.parametrize(("run", "tag", "field"), [
    ({"q 1": {"a": 1.0}}, "sys", "qid"),
    ({"q": {"a b": 1.0}}, "sys", "docid"),
    ({"q": {"a": 1.0}}, "my system", "tag"),
])  # fmt: skip
def test_ids_and_tags_with_whitespace_cannot_be_written(tmp_path, run, tag, field):
    with pytest.raises(DataError, match=f"field '{field}'"):
        formats.write_trec_run(tmp_path / "run.trec", run, tag=tag)
    assert not (tmp_path / "run.trec").exists()
