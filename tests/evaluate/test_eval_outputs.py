"""``infembed eval`` checks its inputs and its output path before it evaluates anything.

Invariant: a bad ``-o`` or ``--top-k`` exits 2 with one line naming the flag, before any benchmark is read, so
a long evaluation is never run only to be lost at the end; nothing is written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parents[1] / "data" / "fixtures" / "instruction_bench"
INFEMBED = Path(sys.executable).with_name("infembed")


def run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(INFEMBED), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300)


CASES = {
    "under-a-file": (lambda root: ["-o", root / "afile" / "results.json"], ["afile", "--output", "is a file"]),
    "two-runs-one-json": (
        lambda root: ["-b", BENCH, "-o", root / "two.json"],
        ["two.json", "--output", "makes 2", "give a directory"],
    ),
    "existing-file-for-two-runs": (
        lambda root: ["-b", BENCH, "-o", root / "afile"],
        ["afile", "--output", "not a directory"],
    ),
    "top-k-zero": (lambda root: ["--top-k", "0"], ["--top-k must be at least 1"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_outputs_and_flags_are_refused_before_evaluating(tmp_path, case):
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    (tmp_path / "afile").write_text("keep me\n")
    extra, expected = CASES[case]
    done = run("eval", "-b", BENCH, "-r", "bm25", *extra(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    for part in expected:
        assert part in message, message
    assert (tmp_path / "afile").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
