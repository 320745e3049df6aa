"""The CLI's error policy: the project's own errors are one line and exit 2; anything else is a bug and keeps
its traceback; ``--debug`` (or INFEMBED_DEBUG=1) shows every traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from infembed.cli import friendly_errors
from infembed.data.errors import DataError, SettingsError

INFEMBED = Path(sys.executable).with_name("infembed")


@pytest.mark.parametrize(
    "error",
    [
        DataError("bad line", "x.jsonl", 3, "text"),
        SettingsError("k must be >= 1"),
        FileNotFoundError("no such file: y"),
    ],
)
def test_expected_errors_exit_2(error, capsys, monkeypatch):
    monkeypatch.delenv("INFEMBED_DEBUG", raising=False)

    @friendly_errors
    def command() -> None:
        raise error

    with pytest.raises(typer.Exit) as caught:
        command()
    assert caught.value.exit_code == 2
    assert capsys.readouterr().err.strip().startswith("error:")


@pytest.mark.parametrize(
    "bug", [KeyError("pooling"), ValueError("invalid literal for int()"), TypeError("x")]
)
def test_other_errors_are_bugs_and_keep_their_traceback(bug, monkeypatch):
    monkeypatch.delenv("INFEMBED_DEBUG", raising=False)

    @friendly_errors
    def command() -> None:
        raise bug

    with pytest.raises(type(bug)):
        command()


def test_debug_shows_the_traceback_of_expected_errors_too(monkeypatch):
    monkeypatch.setenv("INFEMBED_DEBUG", "1")

    @friendly_errors
    def command() -> None:
        raise SettingsError("k must be >= 1")

    with pytest.raises(SettingsError):
        command()


def test_markup_in_a_message_is_printed_as_text(capsys, monkeypatch):
    monkeypatch.delenv("INFEMBED_DEBUG", raising=False)

    @friendly_errors
    def command() -> None:
        raise DataError("not valid JSON", "runs/[/bold]odd[red].jsonl", 1)

    with pytest.raises(typer.Exit):
        command()
    assert "runs/[/bold]odd[red].jsonl" in capsys.readouterr().err


@pytest.mark.skipif(not INFEMBED.exists(), reason="the infembed entry point is not installed")
def test_debug_flag_from_the_shell(tmp_path):
    args = ["eval", "-b", str(tmp_path / "missing"), "-r", "bm25"]
    plain = subprocess.run([str(INFEMBED), *args], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr and "missing" in plain.stderr
    debug = subprocess.run(
        [str(INFEMBED), "--debug", *args], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "DataError" in debug.stderr


# ------------------------------------------------------------------ a model that is not there (issue 23 item 9)


@pytest.mark.parametrize("name", ["my-model/", "./nope", "../nope", "~/nope-model", "runs/nope", "a/b/c"])
def test_a_model_dir_that_does_not_exist_is_named_as_a_directory(name, tmp_path, monkeypatch):
    from infembed.model import InFEmbed

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()  # "runs/nope": the first part exists, so it is a path, not a hub name
    with pytest.raises(DataError) as caught:
        InFEmbed.load(name, device="cpu")
    message = str(caught.value)
    assert os.path.expanduser(name) in message and "does not exist" in message, message
    assert "Repo id" not in message and "hub" not in message.lower(), message
    assert "\n" not in message


@pytest.mark.parametrize("name", ["bogus-model-xyz", "nosuchorg/nosuchmodel"])
def test_a_hub_name_offline_says_hub_names_cannot_be_fetched(name, tmp_path, monkeypatch):
    from infembed.model import InFEmbed

    monkeypatch.chdir(tmp_path)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set by conftest for every test
    with pytest.raises(DataError) as caught:
        InFEmbed.load(name, device="cpu")
    message = str(caught.value)
    assert name in message and "offline" in message and "HF_HUB_OFFLINE=1 is set" in message, message
    assert "offline-mode" not in message and "couldn't connect" not in message, message  # no advice to set it
    assert "\n" not in message


@pytest.mark.skipif(not INFEMBED.exists(), reason="the infembed entry point is not installed")
def test_eval_with_an_unknown_retriever_names_the_choices(tmp_path, data_dir):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("INFEMBED_DEBUG", None)
    result = subprocess.run(
        [str(INFEMBED), "eval", "-b", str(data_dir / "followir-cranfield"), "-r", "bogus"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0], result.stderr  # one line, the last: nothing after it
    assert "'bogus'" in errors[0] and "bm25" in errors[0] and "offline" in errors[0], errors[0]
    assert "Traceback" not in result.stderr and "huggingface.co" not in result.stderr, result.stderr
