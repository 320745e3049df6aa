"""The CLI's error policy: the project's own errors are one line and exit 2; anything else is a bug and keeps
its traceback; ``--debug`` (or INFEMBED_DEBUG=1) shows every traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from infembed.cli import friendly_errors
from infembed.data.errors import DataError, SettingsError

INFEMBED = Path(sys.executable).with_name("infembed")


@pytest.mark.parametrize("error", [DataError("bad line", "x.jsonl", 3, "text"), SettingsError("k must be >= 1"),
                                   FileNotFoundError("no such file: y")])
def test_expected_errors_exit_2(error, capsys, monkeypatch):
    monkeypatch.delenv("INFEMBED_DEBUG", raising=False)

    @friendly_errors
    def command() -> None:
        raise error

    with pytest.raises(typer.Exit) as caught:
        command()
    assert caught.value.exit_code == 2
    assert capsys.readouterr().err.strip().startswith("error:")


@pytest.mark.parametrize("bug", [KeyError("pooling"), ValueError("invalid literal for int()"), TypeError("x")])
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
    debug = subprocess.run([str(INFEMBED), "--debug", *args], capture_output=True, text=True, cwd=tmp_path,
                           timeout=300)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "DataError" in debug.stderr
