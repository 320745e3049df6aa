"""TREC runs in and out of ``infembed eval``: what IR researchers compare systems with.

Invariants:
* ``eval --trec-runs DIR`` writes each evaluated run as ``<name>.og.trec`` and ``<name>.changed.trec`` in the
  6-column TREC format (``qid Q0 docid rank score tag``), ranks in the metrics' tie order.
* ``eval --run-og F --run-changed G`` scores runs made elsewhere through the same scoring path as a retriever:
  a run written by infembed and scored again gives exactly (==) the same p-MRR, headline score, og/changed
  metrics and per-query numbers, ties included (BM25 scores most of the tiny corpus 0 for each query).
* Judged queries missing from a run are left out of every mean with a warning counting them (trec_eval and
  mteb average over the queries a run holds); a run holding none is refused.
* A malformed run file is one line naming file, line and field (exit 2); so are flags that do not apply to runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_benchmark import write_benchmark

from infembed.data.benchmarks import load_benchmark
from infembed.data.errors import SettingsError
from infembed.data.formats import read_trec_run, write_trec_run
from infembed.evaluate.retrievers import BM25Retriever
from infembed.evaluate.runner import evaluate_runs, evaluate_with_runs

INFEMBED = Path(sys.executable).with_name("infembed")
SAME = ("p-MRR", "score", "main_score", "og", "changed", "n_queries", "reranking")


def infembed(*args, cwd: Path) -> subprocess.CompletedProcess:
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    return subprocess.run(
        [str(INFEMBED), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def same_numbers(a: dict, b: dict) -> None:
    for key in SAME:
        assert a[key] == b[key], key
    assert a["per_query"].keys() == b["per_query"].keys()
    for q, entry in a["per_query"].items():
        for key in ("og", "changed", "p-MRR", "changed_documents", "top_og", "top_changed"):
            assert entry.get(key) == b["per_query"][q].get(key), (q, key)


@pytest.mark.parametrize("exclusions", ["off", "rules"])
def test_a_written_run_scores_to_identical_numbers(make_benchmark, tmp_path, exclusions):
    bench = load_benchmark(make_benchmark())
    result, run_og, run_changed = evaluate_with_runs(bench, BM25Retriever(exclusions=exclusions))
    assert any(list(docs.values()).count(0.0) > 1 for docs in run_og.values())  # ties to break
    write_trec_run(tmp_path / "og.trec", run_og, tag="bm25")
    write_trec_run(tmp_path / "changed.trec", run_changed, tag="bm25")
    again = evaluate_runs(
        bench, read_trec_run(tmp_path / "og.trec"), read_trec_run(tmp_path / "changed.trec"), name="bm25"
    )
    same_numbers(result, again)
    assert again["retriever"] == "run file" and again["queries_left_out"] == 0


def test_queries_missing_from_a_run_are_left_out_with_a_count(make_benchmark, caplog):
    bench = load_benchmark(make_benchmark())
    full, run_og, run_changed = evaluate_with_runs(bench, BM25Retriever())
    with caplog.at_level("WARNING"):
        part = evaluate_runs(bench, {"q1": run_og["q1"]}, {"q1": run_changed["q1"]}, name="x")
    assert "holds 1 of the 2 judged queries" in caplog.text
    assert part["n_queries"] == 1 and part["queries_left_out"] == 1
    assert part["og"] == full["per_query"]["q1"]["og"]  # the mean over the one query the run holds
    with pytest.raises(SettingsError, match="none of the 2 judged queries"):
        evaluate_runs(bench, {"q9": {"d1": 1.0}}, name="x")


def test_queries_without_candidates_are_left_out_with_a_count(make_benchmark, caplog):
    """top_ranked covering 1 of 2 judged queries: mteb warns and skips the other; so do we (no silent 0.0)."""
    bench = load_benchmark(make_benchmark(top_ranked={"q1": ["d1", "d2", "d5"], "q2": []}))
    with caplog.at_level("WARNING"):
        result, _, _ = evaluate_with_runs(bench, BM25Retriever())
    assert "top_ranked lists candidates for 1 of the 2 judged queries" in caplog.text
    assert result["n_queries"] == 1 and result["queries_left_out"] == 1 and set(result["per_query"]) == {"q1"}
    assert result["og"]["recall_at_10"] == 1.0  # q1's candidates hold both relevant documents


def test_eval_writes_trec_runs_and_scores_them_again_to_the_same_numbers(tmp_path):
    bench = write_benchmark(tmp_path / "bench")
    done = infembed(
        "eval",
        "-b",
        bench,
        "-r",
        "bm25",
        "-m",
        "default",
        "--trec-runs",
        tmp_path / "runs",
        "-o",
        tmp_path / "results",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "bench__all-MiniLM-L6-v2.changed.trec", "bench__all-MiniLM-L6-v2.og.trec",
        "bench__bm25.changed.trec", "bench__bm25.og.trec",
    ]  # fmt: skip
    lines = (tmp_path / "runs" / "bench__bm25.og.trec").read_text().splitlines()
    assert len(lines) == 2 * 8  # two queries, the whole 8-document corpus
    for line in lines:
        qid, q0, did, rank, score, tag = line.split()
        assert (q0, tag) == ("Q0", "bm25") and int(rank) >= 1 and float(score) == float(score)
    for name in ("bench__bm25", "bench__all-MiniLM-L6-v2"):
        out = tmp_path / f"{name}.rescored.json"
        done = infembed(
            "eval",
            "-b",
            bench,
            "--run-og",
            tmp_path / "runs" / f"{name}.og.trec",
            "--run-changed",
            tmp_path / "runs" / f"{name}.changed.trec",
            "-o",
            out,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        same_numbers(
            json.loads((tmp_path / "results" / f"{name}.json").read_text()), json.loads(out.read_text())
        )
    # written into a dir, a scored run file gets its own name, beside the retriever's results
    done = infembed(
        "eval",
        "-b",
        bench,
        "--run-og",
        tmp_path / "runs" / "bench__bm25.og.trec",
        "-o",
        tmp_path / "results",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "results" / "bench__run-bm25.json").exists()


BAD_RUNS = {
    "wrong column count": ("q1 Q0 d1 1 2.0\n", ["line 1", "expected 6 columns"]),
    "non-numeric score": ("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 high x\n", ["line 2", "field 'score'"]),
    "non-numeric rank": ("q1 Q0 d1 one 2.0 x\n", ["line 1", "field 'rank'"]),
    "unknown query id": ("q1 Q0 d1 1 2.0 x\nq7 Q0 d1 1 2.0 x\n", ["line 2", "field 'qid'", "'q7'"]),
    "unknown doc id": ("q1 Q0 d99 1 2.0 x\n", ["line 1", "field 'docid'", "'d99'"]),
    "duplicate (qid, docid)": ("q1 Q0 d1 1 2.0 x\nq1 Q0 d1 2 1.0 x\n", ["line 2", "field 'docid'", "twice"]),
}
BAD_FLAGS = {
    "changed without og": (["--run-changed", "{good}"], ["--run-changed needs --run-og"]),
    "a model too": (["--run-og", "{good}", "-m", "default"], ["--model", "apply to a retriever's runs"]),
    "two benchmarks": (["--run-og", "{good}", "-b", "{bench}"], ["one --benchmark, got 2"]),
}


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, list[str]]]:
    """Every bad run file and flag, run as concurrent subprocesses (most of their time is start-up imports)."""
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    root = tmp_path_factory.mktemp("bad-runs")
    bench = write_benchmark(root / "bench")
    good = root / "good.trec"
    good.write_text("q1 Q0 d1 1 2.0 x\n")
    processes = {}
    for case, (text, expected) in BAD_RUNS.items():
        path = root / (re.sub(r"\W+", "_", case) + ".trec")
        path.write_text(text)
        processes[case] = (
            ["eval", "-b", bench, "--run-og", good, "--run-changed", path],
            [str(path), *expected],
        )
    for case, (args, expected) in BAD_FLAGS.items():
        args = [a.format(good=good, bench=bench) for a in args]
        processes[case] = (["eval", "-b", bench, *args], expected)
    started = {
        case: (
            subprocess.Popen(
                [str(INFEMBED), *map(str, args)],
                cwd=root,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            args,
            expected,
        )
        for case, (args, expected) in processes.items()
    }
    done = {}
    for case, (process, args, expected) in started.items():
        stdout, stderr = process.communicate(timeout=300)
        done[case] = (subprocess.CompletedProcess(args, process.returncode, stdout, stderr), expected)
    return done


@pytest.mark.parametrize("case", [*BAD_RUNS, *BAD_FLAGS])
def test_malformed_run_files_and_flags_are_one_line(refused, case):
    done, expected = refused[case]
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stderr.count("error:") == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error:")
    message = re.sub(r"\s+", "", done.stderr)
    for part in expected:
        assert re.sub(r"\s+", "", part) in message, done.stderr
