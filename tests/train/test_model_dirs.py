"""A directory given as a model that holds no loadable model is one clear error (DataError: the CLI prints one line
and exits 2), not a transformers traceback: an empty dir, a torn infembed.json, a broken config.json, a training
run that has not saved its model yet."""

from __future__ import annotations

import pytest

from infembed.data.errors import DataError
from infembed.model import InFEmbed


def test_an_empty_dir_is_not_a_model(tmp_path):
    with pytest.raises(DataError, match=r"not a model directory \(no modules.json, config.json or .gguf file\)"):
        InFEmbed.load(str(tmp_path), device="cpu")


def test_a_torn_infembed_json_names_file_and_line(tmp_path):
    (tmp_path / "infembed.json").write_text('{"base_model": "x",\n  "pooling": ')
    with pytest.raises(DataError) as caught:
        InFEmbed.load(str(tmp_path), device="cpu")
    assert str(caught.value).startswith(f"{tmp_path / 'infembed.json'}, line 2: not valid JSON")
    (tmp_path / "infembed.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="expected a JSON object of model settings, got list"):
        InFEmbed.load(str(tmp_path), device="cpu")


def test_a_config_transformers_cannot_read_is_named(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(DataError, match=r"cannot load a model from this directory \(Unrecognized model"):
        InFEmbed.load(str(tmp_path), device="cpu")


def test_an_unfinished_training_run_says_so(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "train_config.json").write_text("{}")
    with pytest.raises(DataError, match="a training run that has saved no model yet .*rerun `infembed train`"):
        InFEmbed.load(str(tmp_path), device="cpu")
