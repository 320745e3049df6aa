"""``infembed train`` from the command line.

Invariants: a one-step run exits 0 and writes the model dir with everything needed to reproduce and inspect the
run (``infembed.json``, ``train_config.json``, ``metrics.jsonl``, ``loss.png``); a bad config file exits 2
with one line naming the file (and the line, for YAML syntax errors) and no traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infembed.data.errors import DataError
from infembed.train.config import TrainConfig

INFEMBED = Path(sys.executable).with_name("infembed")


def _infembed(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(INFEMBED), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_cli_train_one_step_writes_the_model_dir(rows_path, tmp_path):
    out = tmp_path / "model"
    done = _infembed(
        "train", "--data", str(rows_path), "--output", str(out), "--max-steps", "1", "--batch-size", "2",
        "--device", "cpu",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("infembed.json", "train_config.json", "metrics.jsonl", "loss.png", "model.safetensors"):
        assert (out / name).is_file(), name
    settings = json.loads((out / "train_config.json").read_text())
    assert settings["max_steps"] == 1 and settings["batch_size"] == 2 and settings["data"] == [str(rows_path)]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1] and metrics[0]["loss"] > 0
    assert (out / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    squeezed = "".join(done.stderr.split())  # rich wraps (and may fold) long lines
    assert "saved" + "".join(str(out).split()) + "(1steps" in squeezed


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("unknown.yaml", "batch_size: 2\nlearning_rat: 0.001\n", "unknown setting(s) learning_rat"),
        ("broken.yaml", "batch_size: [2\nepochs: 1\n", "line 2: not valid YAML"),
    ],
    ids=["unknown-key", "invalid-yaml"],
)
def test_cli_bad_config_exits_2_naming_the_file(tmp_path, name, text, expected):
    config = tmp_path / name
    config.write_text(text)
    done = _infembed("train", "--config", str(config), "--data", "x.jsonl", "--output", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    message = " ".join(done.stderr.split())  # rich may wrap long lines
    assert str(config) in message and expected in message
    assert not (tmp_path / "out").exists()


def test_config_file_errors_name_the_file(tmp_path):
    """The same errors in-process (what the CLI prints is ``str(error)``)."""
    config = tmp_path / "broken.json"
    config.write_text('{"batch_size": 2,}\n')
    with pytest.raises(DataError, match="not valid JSON") as error:
        TrainConfig.from_file(config)
    assert str(config) in str(error.value) and "line 1" in str(error.value)
    with pytest.raises(DataError, match="file not found"):
        TrainConfig.from_file(tmp_path / "missing.yaml")


def test_config_value_of_the_wrong_type_names_the_file_and_field(tmp_path):
    config = tmp_path / "typo.yaml"
    config.write_text("batch_size: sixteen\n")
    with pytest.raises(DataError) as error:  # the CLI turns a DataError into exit 2 without a traceback
        TrainConfig.from_file(config)
    assert str(config) in str(error.value) and "batch_size" in str(error.value)
