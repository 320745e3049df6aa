"""Outputs that cannot be written (a directory the user may not write into) are one line naming the path, exit 2,
for every verb that writes: ``eval -o``, ``index -o``, ``report --html``, ``train -o``, ``synth run -o``; and the
write helpers of :mod:`infembed.data.jsonl` raise a DataError naming the file they were writing.

The PermissionError is real, raised by the filesystem: as root (who may write anywhere) the commands run as the
user ``nobody`` (``setpriv``) against a root-owned 0755 directory; as any other user, against a 0555 directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

INFEMBED = Path(sys.executable).with_name("infembed")
SETPRIV = shutil.which("setpriv")

pytestmark = [
    pytest.mark.skipif(not INFEMBED.exists(), reason="the infembed entry point is not installed"),
    pytest.mark.skipif(sys.platform != "linux", reason="POSIX permissions on Linux"),
]


class Sandbox:
    """``base`` (readable by the user who runs the commands), ``locked`` (a directory that user may not write
    into), ``home`` (writable by that user: caches)."""

    def __init__(self) -> None:
        self.root = os.geteuid() == 0
        if self.root and SETPRIV is None:
            pytest.skip("running as root without setpriv: no way to be refused a write")
        self.base = Path(tempfile.mkdtemp(prefix="infembed-perm-"))
        self.base.chmod(0o755)
        self.locked = self.base / "locked"
        self.locked.mkdir()
        self.home = self.base / "home"
        self.home.mkdir()
        if self.root:
            os.chown(self.home, 65534, 65534)  # nobody; self.locked stays root's, 0755
        else:
            self.locked.chmod(0o555)

    def file(self, name: str, text: str) -> Path:
        path = self.base / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)
        return path

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "HOME": str(self.home),
            "INFEMBED_CACHE_DIR": str(self.home / "cache"),
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        env.pop("INFEMBED_DEBUG", None)
        prefix = [SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if self.root else []
        return subprocess.run(
            [*prefix, *args], capture_output=True, text=True, cwd=self.home, env=env, timeout=timeout
        )

    def close(self) -> None:
        if not self.root:
            self.locked.chmod(0o755)
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def sandbox():
    box = Sandbox()
    probe = box.run(sys.executable, "-c", f"open({str(box.locked / 'x')!r}, 'w')")
    if probe.returncode == 0:
        box.close()
        pytest.skip("this user may write into a read-only directory (a capability such as CAP_DAC_OVERRIDE)")
    yield box
    box.close()


def one_line_naming(result: subprocess.CompletedProcess, path: Path) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert str(path) in errors[0], errors[0]
    assert ".tmp" not in errors[0], errors[0]  # the file asked for, not the temporary beside it
    return errors[0]


@pytest.fixture(scope="module")
def corpus(sandbox):
    docs = [
        {"_id": str(i), "title": "", "text": text}
        for i, text in enumerate(
            ["heat transfer in hypersonic flow", "wing lift at low speed", "boundary layer transition"]
        )
    ]
    return sandbox.file("corpus.jsonl", "".join(json.dumps(d) + "\n" for d in docs))


def test_write_helpers_name_the_file(sandbox):
    target = sandbox.locked / "out.json"
    code = (
        "from infembed.data.errors import DataError\n"
        "from infembed.data.jsonl import write_json, ensure_dir, JsonlAppender\n"
        "import sys\n"
        "for attempt in (lambda: write_json(sys.argv[1], {}), lambda: ensure_dir(sys.argv[2]),\n"
        "                lambda: JsonlAppender(sys.argv[3])):\n"
        "    try:\n"
        "        attempt()\n"
        "    except DataError as error:\n"
        "        print(error)\n"
    )
    result = sandbox.run(
        sys.executable,
        "-c",
        code,
        str(target),
        str(sandbox.locked / "sub" / "dir"),
        str(sandbox.locked / "rows.jsonl"),
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result.stdout
    assert str(target) in lines[0] and "permission denied" in lines[0] and ".tmp" not in lines[0]
    assert str(sandbox.locked / "sub") in lines[1] and "permission denied" in lines[1]
    assert str(sandbox.locked / "rows.jsonl") in lines[2] and "permission denied" in lines[2]


@pytest.mark.parametrize("output", ["results.json", "results/"])
def test_eval_output(sandbox, data_dir, output):
    target = sandbox.locked / output
    result = sandbox.run(
        str(INFEMBED), "eval", "-b", str(data_dir / "followir-cranfield"), "-r", "bm25", "-o", str(target)
    )
    one_line_naming(result, target.parent if output.endswith("/") else target)


def test_index_output(sandbox, corpus):
    target = sandbox.locked / "idx"
    result = sandbox.run(str(INFEMBED), "index", "--kind", "bm25", "--corpus", str(corpus), "-o", str(target))
    one_line_naming(result, target)


def test_report_html(sandbox, data_dir):
    results = sandbox.home / "results.json"
    made = sandbox.run(
        str(INFEMBED), "eval", "-b", str(data_dir / "followir-cranfield"), "-r", "bm25", "-o", str(results)
    )
    assert made.returncode == 0, made.stderr[-3000:]
    target = sandbox.locked / "report.html"
    one_line_naming(sandbox.run(str(INFEMBED), "report", str(results), "--html", str(target)), target)


def test_train_output(sandbox, data_dir):
    target = sandbox.locked / "model"
    result = sandbox.run(
        str(INFEMBED),
        "train",
        "--data",
        str(data_dir / "inf-ir-msmarco-sample"),
        "--limit",
        "4",
        "--model",
        "default",
        "--batch-size",
        "2",
        "--epochs",
        "0.5",
        "--device",
        "cpu",
        "-o",
        str(target),
    )
    one_line_naming(result, target)
    assert "Loading weights" not in result.stderr  # refused before the model is loaded


def test_synth_run_output(sandbox, data_dir):
    target = sandbox.locked / "run"
    result = sandbox.run(
        str(INFEMBED),
        "synth",
        "run",
        str(data_dir / "raw" / "msmarco-instructir-seed"),
        "--limit",
        "2",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "-o",
        str(target),
    )
    one_line_naming(result, target)
