"""``infembed eval`` and ``infembed report`` as a user runs them (a subprocess of the installed entry point).

Invariants: a good run exits 0, writes results.json and prints the x100 table; ``report --plot`` writes a PNG.
Bad input (a benchmark dir that does not exist, a malformed queries.jsonl line or field, a results file that
is not JSON or not a results object) exits with status 2 and one message that names the file, line and field,
never a Python traceback. Neither --model nor --retriever evaluates the default model, named by its real name.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_benchmark import write_benchmark

INFEMBED = Path(sys.executable).with_name("infembed")


def infembed(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    # the environment (HF_HUB_OFFLINE, the session's INFEMBED_CACHE_DIR) is inherited from tests/conftest.py
    return subprocess.run(
        [str(INFEMBED), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def squeeze(text: str) -> str:
    """The text without whitespace: rich folds long messages (and long paths) at the terminal width."""
    return re.sub(r"\s+", "", text)


def test_eval_bm25_then_report_with_plot(data_dir, tmp_path):
    bench = data_dir / "followir-cranfield"
    if not bench.is_dir():
        pytest.skip(f"{bench} not found")
    out = tmp_path / "x.json"
    done = infembed("eval", "--benchmark", bench, "--retriever", "bm25", "--output", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert {"benchmark", "model", "retriever", "template", "p-MRR", "score", "og", "changed", "per_query",
            "n_queries", "seconds"} <= set(result)  # fmt: skip
    # the reference to its published precision (a tolerance: 47.763 is 0.013 from a rounding boundary)
    assert 100 * result["p-MRR"] == pytest.approx(9.6, abs=0.05)
    assert 100 * result["score"] == pytest.approx(47.8, abs=0.05)
    # the table row, x100: benchmark, model, p-MRR, score (MAP@1000), ..., nDCG@5, nDCG@10
    row = next(line for line in done.stdout.splitlines() if "followir-cranfield" in line)
    cells = [cell.strip() for cell in re.split(r"[│|]", row) if cell.strip()]
    shown = [f"{100 * result['p-MRR']:.1f}", f"{100 * result['score']:.1f}"]
    assert cells[:4] == ["followir-cranfield", "BM25", *shown]
    assert f"{100 * result['og']['ndcg_at_5']:.1f}" in cells
    assert f"{100 * result['og']['ndcg_at_10']:.1f}" in cells
    assert "Traceback" not in done.stderr

    png = tmp_path / "plots" / "p.png"
    done = infembed("report", out, "--plot", png, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert "followir-cranfield" in done.stdout and shown[0] in done.stdout


def _queries_lines(bench: Path) -> list[str]:
    return (bench / "queries.jsonl").read_text().splitlines()


def _malformed_json_line(bench: Path) -> list[str]:
    lines = _queries_lines(bench)
    (bench / "queries.jsonl").write_text(
        lines[0] + '\n{"_id": "q9", "text": \n' + "\n".join(lines[1:]) + "\n"
    )
    return ["queries.jsonl", "line 2"]


def _missing_text_field(bench: Path) -> list[str]:
    lines = _queries_lines(bench)
    row = json.loads(lines[1])
    del row["text"]
    (bench / "queries.jsonl").write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    return ["queries.jsonl", "line 2", "field 'text'"]


BAD_CASES = [
    "no-such-benchmark",
    "malformed-json-line",
    "missing-text-field",
    "results-not-json",
    "results-not-an-object",
]


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, list[str], Path]]:
    """Every bad-input case, run as concurrent subprocesses (most of their time is start-up imports)."""
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    cases = {}
    for case in BAD_CASES:
        root = tmp_path_factory.mktemp(case)
        bench = write_benchmark(root / "bench")
        if case == "no-such-benchmark":
            args, expected = (
                ["eval", "--benchmark", root / "no-such-dir", "--retriever", "bm25"],
                ["no-such-dir"],
            )
        elif case == "malformed-json-line":
            args, expected = (
                ["eval", "--benchmark", bench, "--retriever", "bm25"],
                _malformed_json_line(bench),
            )
        elif case == "missing-text-field":
            args, expected = ["eval", "--benchmark", bench, "--retriever", "bm25"], _missing_text_field(bench)
        elif case == "results-not-json":
            bad = root / "results.json"
            bad.write_text("this is not JSON {\n")
            args, expected = ["report", bad], [str(bad), "line 1"]
        elif case == "results-not-an-object":
            bad = root / "results.json"
            bad.write_text("[1, 2]\n")
            args, expected = ["report", bad], [str(bad), "field '[0]'"]
        else:
            raise AssertionError(case)
        process = subprocess.Popen(
            [str(INFEMBED), *map(str, args)],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        cases[case] = (process, args, expected, bench)
    done = {}
    for case, (process, args, expected, bench) in cases.items():
        stdout, stderr = process.communicate(timeout=300)
        done[case] = (subprocess.CompletedProcess(args, process.returncode, stdout, stderr), expected, bench)
    return done


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_exits_2_with_a_clear_message(case, bad_runs):
    done, expected, bench = bad_runs[case]
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "Traceback" not in done.stdout
    message = squeeze(done.stderr)
    assert message.startswith("error:")
    for part in expected:
        assert squeeze(part) in message, done.stderr
    if case in ("malformed-json-line", "missing-text-field"):
        assert squeeze(str(bench / "queries.jsonl")) in message  # the full path, not just the name


def test_eval_without_model_uses_the_default_model_by_its_name(tmp_path):
    bench = write_benchmark(tmp_path / "bench")
    out = tmp_path / "runs"
    done = infembed("eval", "--benchmark", bench, "--output", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (written,) = out.glob("*.json")
    assert written.name == "bench__all-MiniLM-L6-v2.json"
    assert json.loads(written.read_text())["model"] == "all-MiniLM-L6-v2"
    row = next(line for line in done.stdout.splitlines() if line.lstrip("│| ").startswith("bench"))
    assert [cell.strip() for cell in re.split(r"[│|]", row) if cell.strip()][1] == "all-MiniLM-L6-v2"
