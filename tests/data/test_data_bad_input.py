"""Bad input never passes silently.

Invariant: every reader, local or hub schema, rejects a bad line with a DataError whose message names the file
(or hub table), the 1-based line and the field, so the CLI can print it without a traceback.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from infembed.data import benchmarks, formats, inf_ir
from infembed.data.benchmarks import bright, followir, local, mair
from infembed.data.errors import DataError
from infembed.data.rows import Rows

FIXTURES = Path(__file__).parent / "fixtures"
BENCH = FIXTURES / "instruction_bench"


def bench_dir(root: Path, **files: str) -> Path:
    """A copy of the fixture instruction benchmark with some files replaced (names with '.' as '_')."""
    target = root / "bench"
    shutil.copytree(BENCH, target)
    for name, text in files.items():
        path = target / name.replace("_jsonl", ".jsonl").replace("_tsv", ".tsv").replace("_json", ".json")
        path.write_text(text)
    return target


CORPUS = (BENCH / "corpus.jsonl").read_text().splitlines()
QUERIES = (BENCH / "queries.jsonl").read_text().splitlines()


def lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


# (id, files to write into a copy of the fixture dir, expected fragments of the message)
DIR_CASES = [
    (
        "malformed json line",
        {"corpus_jsonl": lines(CORPUS[0], '{"_id": "d2", "text": "unterminated}', CORPUS[2])},
        ["corpus.jsonl", "line 2", "not valid JSON"],
    ),
    (
        "missing field",
        {"queries_jsonl": lines(QUERIES[0], '{"_id": "q2", "instruction_og": "x"}')},
        ["queries.jsonl", "line 2", "field 'text'", "missing"],
    ),
    (
        "wrong type of title",
        {"corpus_jsonl": lines(CORPUS[0], CORPUS[1], '{"_id": "d3", "title": 5, "text": "t"}')},
        ["corpus.jsonl", "line 3", "field 'title'", "expected a string, got int"],
    ),
    (
        "wrong type of changed instruction",
        {"queries_jsonl": lines(QUERIES[0], '{"_id": "q2", "text": "t", "instruction_changed": ["a"]}')},
        ["queries.jsonl", "line 2", "field 'instruction_changed'"],
    ),
    (
        "duplicate doc id",
        {"corpus_jsonl": lines(CORPUS[0], CORPUS[1], '{"_id": "d1", "title": "", "text": "again"}')},
        ["corpus.jsonl", "line 3", "field '_id'", "duplicate document id 'd1'"],
    ),
    (
        "duplicate query id",
        {"queries_jsonl": lines(QUERIES[0], QUERIES[1], QUERIES[0])},
        ["queries.jsonl", "line 3", "field '_id'", "duplicate query id 'q1'"],
    ),
    (
        "qrels with a bad score",
        {"qrels_og_tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\thigh\n"},
        ["qrels_og.tsv", "line 3", "field 'score'", "'high' is not an integer"],
    ),
    (
        "qrels without header, bad first score",
        {"qrels_og_tsv": "q1\td1\tx\nq1\td2\t1\n"},
        ["qrels_og.tsv", "line 1", "field 'score'"],
    ),
    (
        "qrels with a fractional score",
        {"qrels_changed_tsv": "query-id\tcorpus-id\tscore\nq1\td1\t0.5\n"},
        ["qrels_changed.tsv", "line 2", "field 'score'"],
    ),
    (
        "qrels with an infinite score",
        {"qrels_og_tsv": "query-id\tcorpus-id\tscore\nq1\td1\tinf\n"},
        ["qrels_og.tsv", "line 2", "field 'score'"],
    ),
    (
        "qrels judging a doc twice",
        {"qrels_og_tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t0\n"},
        ["qrels_og.tsv", "line 3", "field 'score'", "judged twice"],
    ),
    (
        "qrels with an empty doc id",
        {"qrels_og_tsv": "query-id\tcorpus-id\tscore\nq1\t\t1\n"},
        ["qrels_og.tsv", "line 2", "field 'corpus-id'", "is empty"],
    ),
    (
        "qrels with spaces instead of tabs",
        {"qrels_og_tsv": "query-id\tcorpus-id\tscore\nq1 d1 1\n"},
        ["qrels_og.tsv", "line 2", "expected 3 tab-separated columns"],
    ),
    (
        "qrels for an unknown query",
        {"qrels_og_tsv": "query-id\tcorpus-id\tscore\nq9\td1\t1\n"},
        ["qrels_og.tsv", "field 'query-id'", "'q9' is not in queries.jsonl"],
    ),
    (
        "top_ranked ids not a list",
        {"top_ranked_jsonl": '{"query-id": "q1", "corpus-ids": "d1 d2"}\n'},
        ["top_ranked.jsonl", "line 1", "field 'corpus-ids'"],
    ),
    (
        "qrels with only a header",
        {"qrels_og_tsv": "query-id\tcorpus-id\tscore\n"},
        ["qrels_og.tsv", "no document is judged relevant"],
    ),
    (
        "empty changed instruction",
        {
            "queries_jsonl": lines(
                QUERIES[0].replace('"Documents on flutter of swept wings only."', '""'), QUERIES[1]
            )
        },
        ["queries.jsonl", "field 'instruction_changed'", "'q1'", "is empty"],
    ),
    (
        "missing og instruction with changed judgments",
        {"queries_jsonl": lines('{"_id": "q1", "text": "t", "instruction_changed": "c"}', QUERIES[1])},
        ["queries.jsonl", "field 'instruction_og'", "'q1'"],
    ),
    (
        "query text given as a number",
        {
            "queries_jsonl": lines(
                QUERIES[0], '{"_id": "q2", "text": 42, "instruction_og": "o", "instruction_changed": "c"}'
            )
        },
        ["queries.jsonl", "line 2", "field 'text'", "expected a string, got int 42"],
    ),
    (
        "document text given as NaN",
        {"corpus_jsonl": lines(CORPUS[0], '{"_id": "d2", "title": "", "text": NaN}', CORPUS[2])},
        ["corpus.jsonl", "line 2", "field 'text'", "expected a string, got float nan"],
    ),
    (
        "fractional document id",
        {"corpus_jsonl": lines(CORPUS[0], '{"_id": 4.5, "title": "", "text": "t"}', CORPUS[2])},
        ["corpus.jsonl", "line 2", "field '_id'", "expected an id"],
    ),
    (
        "control character inside a string",
        {
            "corpus_jsonl": lines(
                CORPUS[0],
                '{"_id": "d2", "title": "", "text": "a\u0001b"}'.replace("\\u0001", "\x01"),
                CORPUS[2],
            )
        },
        ["corpus.jsonl", "line 2", "Invalid control character at column"],
    ),
    (
        "benchmark.json not JSON",
        {"benchmark_json": '{"main_score": }'},
        ["benchmark.json", "line 1", "not valid JSON"],
    ),
]


@pytest.mark.parametrize(
    "files, expected", [case[1:] for case in DIR_CASES], ids=[case[0] for case in DIR_CASES]
)
def test_instruction_dir_errors_name_file_line_field(tmp_path, files, expected):
    root = bench_dir(tmp_path, **files)
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark(root)
    message = str(caught.value)
    for fragment in expected:
        assert fragment in message, (fragment, message)


def write(tmp_path: Path, name: str, *rows: str) -> Path:
    path = tmp_path / name
    path.write_text(lines(*rows))
    return path


def _triplet_line(**change: object) -> str:
    import json

    row = json.loads((FIXTURES / "inf_ir_rows.jsonl").read_text().splitlines()[0])
    row.update(change)
    return json.dumps({k: v for k, v in row.items() if v is not None})


BRIGHT_OK = (FIXTURES / "bright/examples.jsonl").read_text().splitlines()[0]
MAIR_OK = (FIXTURES / "mair/SciFact.queries.jsonl").read_text().splitlines()[0]
QRELS_OK = '{"query-id": "301", "corpus-id": "FBIS3-1", "score": 2.0}'


def _bright(path: Path):
    return bright.bright_from_rows(
        Rows.from_jsonl(FIXTURES / "bright/documents.jsonl"), Rows.from_jsonl(path), domain="biology"
    )


def _mair(path: Path):
    return mair.mair_from_rows(Rows.from_jsonl(path), Rows.from_jsonl(FIXTURES / "mair/SciFact.docs.jsonl"))


def _followir_qrels(path: Path):
    root = FIXTURES / "followir_hub"
    return followir.followir_from_rows(
        Rows.from_jsonl(root / "corpus.jsonl"),
        Rows.from_jsonl(root / "queries.jsonl"),
        Rows.from_jsonl(path),
        Rows.from_jsonl(root / "qrels_changed/test.jsonl"),
    )


def _followir_corpus(path: Path):
    root = FIXTURES / "followir_hub"
    return followir.followir_from_rows(
        Rows.from_jsonl(path),
        Rows.from_jsonl(root / "queries.jsonl"),
        Rows.from_jsonl(root / "qrels_og/test.jsonl"),
        Rows.from_jsonl(root / "qrels_changed/test.jsonl"),
    )


def _mteb_queries(path: Path):
    root = FIXTURES / "followir_mteb"
    return followir.followir_from_mteb_rows(
        Rows.from_jsonl(root / "corpus.jsonl"),
        Rows.from_jsonl(path),
        Rows.from_jsonl(root / "default.jsonl"),
        Rows.from_jsonl(root / "instruction.jsonl"),
    )


# (id, file name, its lines, reader, expected fragments)
FILE_CASES: list[tuple[str, str, tuple[str, ...], Callable[[Path], object], list[str]]] = [
    (
        "InF-IR row missing a field",
        "rows.jsonl",
        (_triplet_line(), _triplet_line(instruction_negative=None)),
        inf_ir.read_triplets,
        ["rows.jsonl", "line 2", "field 'instruction_negative'", "missing"],
    ),
    (
        "InF-IR row with a list for text",
        "rows.jsonl",
        (_triplet_line(), "", _triplet_line(query_positive=["a", "b"])),
        inf_ir.read_triplets,
        ["rows.jsonl", "line 3", "field 'query_positive'", "expected a string, got list"],
    ),
    (
        "InF-IR hub row missing a field",
        "hub_rows.jsonl",
        (_triplet_line(hard_negative_document_2=None),),
        lambda path: inf_ir.triplets_from_rows(Rows.from_jsonl(path)),
        ["hub_rows.jsonl", "line 1", "field 'hard_negative_document_2'"],
    ),
    (
        "TREC run with a document twice",
        "run.txt",
        ("1 Q0 a 1 2.0 x", "1 Q0 a 2 1.0 x"),
        formats.read_trec_run,
        ["run.txt", "line 2", "field 'docid'", "appears twice"],
    ),
    (
        "TREC run with a NaN score",
        "run.txt",
        ("1 Q0 a 1 nan x",),
        formats.read_trec_run,
        ["run.txt", "line 1", "field 'score'", "not a finite number"],
    ),
    (
        "TREC qrels with a bad label",
        "qrels.txt",
        ("1 0 a 1", "1 0 b yes"),
        formats.read_trec_qrels,
        ["qrels.txt", "line 2", "field 'rel'", "'yes' is not an integer"],
    ),
    (
        "BRIGHT gold_ids not a list",
        "examples.jsonl",
        (
            BRIGHT_OK,
            BRIGHT_OK.replace('"id": "0"', '"id": "1"').replace(
                '"gold_ids": [', '"gold_ids": "x", "unused": ['
            ),
        ),
        _bright,
        ["examples.jsonl", "line 2", "field 'gold_ids'", "expected a list of ids, got str"],
    ),
    (
        "BRIGHT gold id also excluded",
        "examples.jsonl",
        (BRIGHT_OK.replace('["N/A"]', '["insects_light/Phototaxis_0.txt"]'),),
        _bright,
        ["examples.jsonl", "line 1", "field 'excluded_ids'", "both gold and excluded"],
    ),
    (
        "MAIR label with a fractional score",
        "queries.jsonl",
        (MAIR_OK.replace('"score": 1', '"score": 0.5'),),
        _mair,
        ["queries.jsonl", "line 1", "field 'labels[0].score'"],
    ),
    (
        "MAIR row without labels",
        "queries.jsonl",
        (MAIR_OK, MAIR_OK.replace('"sf-1"', '"sf-3"').replace('"labels"', '"label"')),
        _mair,
        ["queries.jsonl", "line 2", "field 'labels'", "missing"],
    ),
    (
        "FollowIR hub qrels with a fractional score",
        "test.jsonl",
        (QRELS_OK, QRELS_OK.replace("FBIS3-1", "LA-3").replace("2.0", "1.5")),
        _followir_qrels,
        ["test.jsonl", "line 2", "field 'score'", "1.5"],
    ),
    (
        "FollowIR hub corpus with a duplicate id",
        "corpus.jsonl",
        ('{"_id": "FBIS3-1", "title": "", "text": "a"}', '{"_id": "FBIS3-1", "title": "", "text": "b"}'),
        _followir_corpus,
        ["corpus.jsonl", "line 2", "field '_id'", "duplicate document id"],
    ),
    (
        "mteb FollowIR query id without a side",
        "queries.jsonl",
        ('{"_id": "301-og", "text": "ferry disasters"}', '{"_id": "301", "text": "ferry disasters"}'),
        _mteb_queries,
        ["queries.jsonl", "line 2", "field '_id'", "ends in neither '-og' nor '-changed'"],
    ),
]


@pytest.mark.parametrize(
    "name, rows, reader, expected", [case[1:] for case in FILE_CASES], ids=[case[0] for case in FILE_CASES]
)
def test_file_errors_name_file_line_field(tmp_path, name, rows, reader, expected):
    path = write(tmp_path, name, *rows)
    with pytest.raises(DataError) as caught:
        reader(path)
    message = str(caught.value)
    for fragment in expected:
        assert fragment in message, (fragment, message)


def test_hub_rows_without_a_file_are_numbered_from_one():
    with pytest.raises(DataError) as caught:
        mair.mair_from_rows(
            [
                {"qid": "1", "instruction": "", "query": "q", "labels": [{"id": "d"}]},
                {"qid": "2", "instruction": "i"},
            ],
            [{"id": "d", "doc": "x"}],
        )
    assert str(caught.value).startswith("queries, line 2, field 'query': missing")


def test_missing_dir_and_unknown_name():
    with pytest.raises(DataError, match="missing qrels/dev.tsv"):
        local.load_beir(FIXTURES / "beir", split="dev")
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark("bright/zoology")
    assert "bright/<domain> with domain one of biology" in str(caught.value)


def test_control_character_message_says_at_once(tmp_path):
    root = bench_dir(tmp_path, corpus_jsonl=lines(CORPUS[0], '{"_id": "d2", "text": "a\x01b"}'))
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark(root)
    assert "at at" not in str(caught.value)


def test_bytes_that_are_not_utf8_name_file_line_and_column(tmp_path):
    root = bench_dir(tmp_path)
    with open(root / "corpus.jsonl", "ab") as handle:
        handle.write(b'{"_id": "d9", "text": "caf\xe9"}\n')
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark(root)
    message = str(caught.value)
    assert "corpus.jsonl" in message and "line 4" in message and "not valid UTF-8" in message
    assert "byte 0xe9 at column 27" in message


def test_a_lone_surrogate_escape_is_refused_where_it_is_read(tmp_path):
    """``"\\ud800"`` is valid JSON but not text: it used to load and then fail as a UnicodeEncodeError traceback
    when the index or the results were written. A proper pair (an emoji) is text and loads."""
    root = bench_dir(
        tmp_path,
        corpus_jsonl=lines(
            CORPUS[0],
            '{"_id": "d2", "title": "", "text": "ok \\ud83d\\ude00 x"}',
            '{"_id": "d3", "text": "bad \\ud800 char"}',
        ),
    )
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark(root)
    message = str(caught.value)
    assert "corpus.jsonl" in message and "line 3" in message and "field 'text'" in message
    assert "lone UTF-16 surrogate (\\ud800)" in message
    (root / "corpus.jsonl").write_text(
        lines(*CORPUS[:1], '{"_id": "d2", "text": "ok \\ud83d\\ude00 x"}', *CORPUS[2:])
    )
    assert benchmarks.load_benchmark(root).corpus["d2"].text == "ok \U0001f600 x"


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    root = bench_dir(tmp_path)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels_og.tsv"):
        path = root / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    bench = benchmarks.load_benchmark(root)
    assert set(bench.corpus) == {"d1", "d2", "d3"} and set(bench.queries) == {"q1", "q2"}
    assert bench.qrels_og == benchmarks.load_benchmark(BENCH).qrels_og


def test_integral_float_ids_are_the_integer_id(tmp_path):
    """pandas-backed exports write integer ids as 4.0; the id must match the qrels' "4", not become "4.0"."""
    root = bench_dir(
        tmp_path,
        corpus_jsonl=lines(
            CORPUS[0], '{"_id": 4.0, "title": "", "text": "Boundary layer transition."}', CORPUS[2]
        ),
        qrels_og_tsv="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\t4\t1\n",
        # candidates must be in the corpus (d2 is not, here)
        top_ranked_jsonl='{"query-id": "q1", "corpus-ids": ["d1", 4, "d3"]}\n',
    )
    bench = benchmarks.load_benchmark(root)
    assert bench.top_ranked == {"q1": ["d1", "4", "d3"]}
    assert "4" in bench.corpus and "4.0" not in bench.corpus


def test_judged_documents_missing_from_the_corpus_are_counted_in_a_warning(tmp_path, caplog):
    root = bench_dir(
        tmp_path, qrels_og_tsv="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tgone1\t1\nq2\tgone2\t0\n"
    )
    with caplog.at_level("WARNING"):
        benchmarks.load_benchmark(root)
    warned = [r.getMessage() for r in caplog.records if "not in corpus.jsonl" in r.getMessage()]
    assert len(warned) == 1 and "qrels_og.tsv: 2 judged document(s)" in warned[0], caplog.text


def test_a_negative_row_limit_is_refused():
    with pytest.raises(ValueError, match="limit"):
        inf_ir.read_triplets(FIXTURES / "inf_ir_rows.jsonl", limit=-1)
    assert len(inf_ir.read_triplets(FIXTURES / "inf_ir_rows.jsonl", limit=1)) == 1
