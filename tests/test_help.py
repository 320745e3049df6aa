"""Every verb's ``--help`` is readable on an 80-column terminal: each flag's full name is shown (none cut to
``--learning-rate,-…``), no line is wider than the terminal, booleans are flags (``--x`` or ``--x/--no-x``)
without a ``<bool>`` value; and ``infembed --version`` names the package and the libraries that decide the numbers.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from infembed.cli import _register, app

INFEMBED = Path(sys.executable).with_name("infembed")


def _commands() -> list[tuple[list[str], Any]]:
    _register()
    root = typer.main.get_command(app)
    found: list[tuple[list[str], Any]] = []

    def walk(path: list[str], command: Any) -> None:
        found.append((path, command))
        if hasattr(command, "commands"):  # a group (typer vendors its own click)
            for name, sub in command.commands.items():
                walk([*path, name], sub)

    walk([], root)
    return found


COMMANDS = _commands()


def test_every_verb_is_walked():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {
        "",
        "train",
        "eval",
        "fit-exclusions",
        "index",
        "search",
        "serve",
        "demo",
        "synth",
        "synth run",
    } <= names


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) or "infembed" for p, _ in COMMANDS])
def test_help_at_80_columns_shows_every_flag_in_full(path, command):
    result = CliRunner().invoke(
        app, [*path, "--help"], env={"COLUMNS": "80", "TERM": "dumb"}, prog_name="infembed"
    )
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text
    assert "…" not in text, text  # nothing cut
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert not too_wide, too_wide
    for param in command.params:
        if param.param_type_name != "option" or param.hidden:
            continue
        for name in [*param.opts, *param.secondary_opts]:
            assert name in text.replace("\n", " "), f"{' '.join(path)} --help does not show {name}:\n{text}"


@pytest.mark.skipif(not INFEMBED.exists(), reason="the infembed entry point is not installed")
def test_help_from_the_shell_at_80_columns():
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [str(INFEMBED), "train", "--help"], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    for name in ("--learning-rate", "--lr", "--separate-passage-encoder", "--no-separate-passage-encoder"):
        assert name in result.stdout
    assert "<bool>" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 80


def test_version():
    result = CliRunner().invoke(app, ["--version"], prog_name="infembed")
    assert result.exit_code == 0, result.output
    for package in ("infembed", "torch", "transformers", "sentence-transformers"):
        name = "sentence_transformers" if package == "sentence-transformers" else package
        assert f"{package} {version(name)}" in result.output, result.output
