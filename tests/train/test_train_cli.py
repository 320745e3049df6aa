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


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"epochs": 0}, "epochs must be a number > 0"),
        ({"max_steps": -1}, "max_steps must be a whole number >= 1"),
        ({"pooling": "bogus"}, "pooling must be one of cls, mean, last"),
        ({"learning_rate": -1.0}, "learning_rate must be a number > 0"),
        ({"learning_rate": float("nan")}, "learning_rate must be a number > 0"),
        ({"warmup_ratio": 1.5}, "warmup_ratio must be a number >= 0 and <= 1"),
        ({"limit": 0}, "limit must be a whole number >= 1"),
        ({"objective": "both"}, "objective must be one of"),
        ({"eval_benchmark": "followir/robust04"}, "eval_steps is 0"),
    ],
    ids=["epochs-0", "max-steps-negative", "pooling-bogus", "lr-negative", "lr-nan", "warmup-1.5", "limit-0",
         "objective-bogus", "eval-benchmark-without-steps"],
)
def test_a_bad_setting_is_refused_naming_it(settings, expected):
    """Checked by TrainConfig itself (not the CLI), before any model or data is loaded."""
    with pytest.raises(ValueError, match=expected.replace("(", r"\(")):
        TrainConfig(**settings)


def test_yaml_numbers_without_a_dot_are_numbers(tmp_path):
    """PyYAML (YAML 1.1) reads ``1e-4`` as a string; a float setting accepts it, a non-number still fails."""
    config = tmp_path / "train.yaml"
    config.write_text("learning_rate: 1e-4\ntemperature: 5E-2\nbatch_size: 2\n")
    loaded = TrainConfig.from_file(config)
    assert loaded.learning_rate == 1e-4 and loaded.temperature == 0.05
    config.write_text("learning_rate: fast\n")
    with pytest.raises(DataError, match="learning_rate"):
        TrainConfig.from_file(config)
    config.write_text("learning_rate: -1e-4\n")
    with pytest.raises(DataError, match=f"{config}.*learning_rate must be a number > 0"):
        TrainConfig.from_file(config)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--epochs", "0"], "epochs must be a number > 0"),
        (["--pooling", "bogus"], "pooling must be one of cls, mean, last"),
        (["--output", "FILE"], "exists and is not a directory"),
    ],
    ids=["epochs-0", "pooling-bogus", "output-is-a-file"],
)
def test_cli_bad_settings_exit_2_with_one_line(rows_path, tmp_path, args, expected):
    existing = tmp_path / "notes.txt"
    existing.write_text("keep me\n")
    args = [str(existing) if a == "FILE" else a for a in args]
    out = tmp_path / "out"
    done = _infembed("train", "--data", str(rows_path), "--output", str(out), "--device", "cpu", *args)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr + done.stdout
    message = " ".join(done.stderr.split())
    assert expected in message and len(done.stderr.strip().splitlines()) <= 3  # one line (rich may wrap it)
    assert not out.exists() and existing.read_text() == "keep me\n"


def test_help_lists_every_setting():
    """Each TrainConfig field is declared once and reaches the command line from there."""
    from dataclasses import fields

    done = subprocess.run([str(INFEMBED), "train", "--help"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    for f in fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        assert flag in done.stdout, flag
        assert f.metadata.get("help"), f"{f.name} has no help text"


EVERY_SETTING = """\
data: [{rows}]
limit: 4
model: default
interaction: concat
template: "query: {{query}} instruction: {{instruction}}"
pooling: mean
separate_passage_encoder: true
query_max_length: 64
passage_max_length: 96
gguf_file: null
lora: false
lora_r: 4
lora_alpha: 8
lora_dropout: 0.1
objective: uni
negatives: P,I,IQ
iq_negatives: instruction_with_other_queries
positive_count: per_set
temperature: 5e-2
learn_temperature: true
extra_instruction_negatives: 1
epochs: 1
batch_size: 2
gradient_accumulation: 1
grad_cache_chunk: 3
learning_rate: 1e-4
interaction_lr_multiplier: 10
weight_decay: 0.0
warmup_ratio: 0.5
scheduler: cosine
max_grad_norm: 0.5
seed: 7
output: {output}
save_steps: 0
keep_checkpoints: 1
eval_benchmark: null
eval_steps: 0
log_steps: 1
device: cpu
max_steps: 1
"""


@pytest.mark.slow
def test_a_yaml_with_every_setting_round_trips_through_the_saved_config(rows_path, tmp_path):
    from dataclasses import fields

    out = tmp_path / "model"
    config = tmp_path / "every.yaml"
    config.write_text(EVERY_SETTING.format(rows=rows_path, output=out))
    expected = TrainConfig.from_file(config)
    assert set(expected.to_dict()) == {f.name for f in fields(TrainConfig)}  # the YAML names every field
    done = _infembed("train", "--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    saved = TrainConfig.from_file(out / "train_config.json")
    assert saved == expected
    assert json.loads((out / "train_config.json").read_text()) == expected.to_dict()
