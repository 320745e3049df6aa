"""Local formats (infembed.data.formats, infembed.data.benchmarks.local, infembed.data.inf_ir): instruction
benchmark dirs, BEIR dirs, TREC qrels and runs, InF-IR rows.

Invariant: every reader gives back exactly what a writer wrote (save_benchmark / load_instruction_benchmark,
write_trec_run / read_trec_run, write_triplets / read_triplets), and the shared dev data reads with its
documented counts (Cranfield: 1,400 docs, 40 queries, 274 og and 141 changed judgments; InF-IR sample: 471 rows).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infembed.data import benchmarks, formats, inf_ir
from infembed.data.benchmarks import bright, local
from infembed.data.rows import Rows

FIXTURES = Path(__file__).parent / "fixtures"
DATA_DIR = Path(os.environ.get("INFEMBED_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))


def shared(*parts: str) -> Path:
    path = DATA_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (set INFEMBED_DATA_DIR)")
    return path


def test_instruction_benchmark_dir_fixture():
    bench = benchmarks.load_benchmark(FIXTURES / "instruction_bench")
    assert bench.name == "instruction_bench" and bench.main_score == "map_at_1000"
    assert bench.qrels_og == {"q1": {"d1": 1, "d2": 1}, "q2": {"d3": 2}}
    assert bench.qrels_changed == {"q1": {"d1": 1}, "q2": {"d3": 2}}
    assert bench.queries["q2"].instruction_changed == "Documents on transient conduction in layered slabs."
    assert bench.top_ranked == {"q1": ["d1", "d2", "d3"], "q2": ["d3", "d2"]}
    assert bench.corpus["d1"].full_text() == "Wing flutter Flutter of swept wings at transonic speeds."
    assert bench.has_changed


def test_cranfield_dev_benchmark_counts():
    bench = benchmarks.load_benchmark(shared("followir-cranfield"))
    summary = bench.summary()
    assert (summary["documents"], summary["queries"]) == (1400, 40)
    assert (summary["qrels_og"], summary["qrels_changed"]) == (274, 141)
    assert bench.has_changed and bench.top_ranked is None
    assert all(q.instruction_og and q.instruction_changed for q in bench.queries.values())


def test_save_and_load_round_trip(tmp_path):
    bench = local.load_instruction_benchmark(FIXTURES / "instruction_bench")
    bench.excluded = {"q1": ["d3"]}
    bench.main_score = "ndcg_at_5"
    local.save_benchmark(bench, tmp_path / "copy")
    again = local.load_instruction_benchmark(tmp_path / "copy")
    for field in ("corpus", "queries", "qrels_og", "qrels_changed", "top_ranked", "excluded", "main_score"):
        assert getattr(again, field) == getattr(bench, field), field


def test_hub_benchmark_saved_as_a_local_dir(tmp_path):
    """A hub benchmark written once with save_benchmark reads back offline, BRIGHT's exclusions included."""
    bench = bright.bright_from_rows(
        Rows.from_jsonl(FIXTURES / "bright/documents.jsonl"),
        Rows.from_jsonl(FIXTURES / "bright/examples.jsonl"),
        domain="biology",
    )
    local.save_benchmark(bench, tmp_path / "bright-biology")
    again = benchmarks.load_benchmark(tmp_path / "bright-biology")
    assert again.excluded == bench.excluded and again.qrels_og == bench.qrels_og
    assert again.main_score == "ndcg_at_10" and again.qrels_changed is None and not again.has_changed


def test_beir_dir_keeps_the_split_queries():
    bench = benchmarks.load_benchmark(FIXTURES / "beir")
    assert set(bench.queries) == {"t1", "t2"}  # train-9 has no test judgments (BEIR filters it too)
    assert bench.queries["t2"].instruction_og == "Answer with a river name."
    assert bench.qrels_og == {"t1": {"p1": 1}, "t2": {"p2": 1}} and bench.main_score == "ndcg_at_10"


def test_beir_dir_real_seed_set():
    seed = local.load_beir(shared("raw", "msmarco-instructir-seed"))
    assert len(seed.queries) == 1743 and all(len(docs) >= 1 for docs in seed.qrels_og.values())


def test_trec_qrels_and_run_round_trip(tmp_path):
    assert formats.read_trec_qrels(FIXTURES / "trec/qrels.txt") == {
        "1": {"doc-a": 1, "doc-b": 0},
        "2": {"doc-c": 2},
    }
    run = formats.read_trec_run(FIXTURES / "trec/run.txt")
    assert run == {"1": {"doc-a": 2.5, "doc-b": 1.25}, "2": {"doc-c": 0.75}}
    scores = {"q1": {"a": 0.123456789012, "b": 1 / 3, "c": 1 / 3, "d": -2.5e-9}, "q2": {"x": 7.0}}
    formats.write_trec_run(tmp_path / "run.txt", scores, tag="dense")
    assert formats.read_trec_run(tmp_path / "run.txt") == scores  # scores survive exactly
    lines = (tmp_path / "run.txt").read_text().splitlines()
    # ties ranked as every metric ranks them: doc id descending (tests/data/test_trec_run_files.py)
    assert lines[0].split() == ["q1", "Q0", "c", "1", repr(1 / 3), "dense"]
    assert [line.split()[3] for line in lines[:4]] == ["1", "2", "3", "4"]


def test_inf_ir_rows_local(tmp_path):
    rows = inf_ir.read_triplets(FIXTURES / "inf_ir_rows.jsonl")
    assert rows[1].document_positive.startswith("Adult house cats")  # `document` alias
    assert rows[0].to_dict()["id"] == "r1"
    inf_ir.write_triplets(tmp_path / "rows.jsonl", rows)
    assert inf_ir.read_triplets(tmp_path / "rows.jsonl") == rows
    assert inf_ir.read_triplets(FIXTURES / "inf_ir_rows.jsonl", limit=0) == []


def test_inf_ir_real_sample_dir():
    sample = inf_ir.read_triplets(shared("inf-ir-msmarco-sample"))
    assert len(sample) == 471 and sample[0].query_id is not None


def test_atomic_writes_keep_the_old_file_on_failure_and_get_normal_permissions(tmp_path):
    """One helper replaces files and dirs atomically; what it publishes is readable like any file written with
    open() (mkstemp's private 0600 must not leak into results others read)."""
    import os

    from infembed.data.jsonl import atomic_dir, atomic_path, atomic_write

    target = tmp_path / "results.json"
    with atomic_write(target) as handle:
        handle.write("old\n")
    with pytest.raises(RuntimeError), atomic_write(target) as handle:
        handle.write("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old\n"
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
    with atomic_path(tmp_path / "plot.png") as tmp:
        tmp.write_bytes(b"png")
    assert (tmp_path / "plot.png").read_bytes() == b"png"
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(RuntimeError), atomic_dir(tmp_path / "model") as tmp:
        (tmp / "b").write_text("2")
        raise RuntimeError("killed")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["a"]
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "c").write_text("3")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["c"]
    assert (tmp_path / "model").stat().st_mode & 0o777 == 0o777 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "plot.png", "results.json"]  # no leftovers


def test_atomic_writes_name_what_blocks_them(tmp_path):
    """A file where a directory must be, or a directory where the file goes: one DataError, nothing written."""
    from infembed.data.errors import DataError
    from infembed.data.jsonl import atomic_dir, atomic_write

    (tmp_path / "afile").write_text("keep\n")
    with pytest.raises(DataError, match="afile: is a file, so nothing can be written there"):
        with atomic_write(tmp_path / "afile" / "sub" / "r.json") as handle:
            handle.write("x")
    (tmp_path / "adir").mkdir()
    with pytest.raises(DataError, match="is a directory, expected a file name"):
        with atomic_write(tmp_path / "adir") as handle:
            handle.write("x")
    with pytest.raises(DataError, match="is a file"), atomic_dir(tmp_path / "afile" / "model"):
        pass
    assert (tmp_path / "afile").read_text() == "keep\n" and list((tmp_path / "adir").iterdir()) == []


def test_output_dirs_are_made_through_one_helper_that_names_a_blocking_file(tmp_path):
    from infembed.data.errors import DataError
    from infembed.data.jsonl import ensure_dir

    assert ensure_dir(tmp_path / "a" / "b").is_dir() and ensure_dir(tmp_path / "a" / "b").is_dir()
    (tmp_path / "f").write_text("x")
    for target in (tmp_path / "f", tmp_path / "f" / "sub" / "dir"):
        with pytest.raises(DataError, match="f: is a file, so nothing can be written there"):
            ensure_dir(target)
