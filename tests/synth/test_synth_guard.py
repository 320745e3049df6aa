"""synth's error guard prints a file the OS refused as 'PATH: reason', one line and exit 2, as every other verb does."""

from __future__ import annotations

import errno

import pytest
import typer

from infembed.cli.synth_common import guard


def _raise(error: BaseException):
    def fn() -> None:
        raise error

    return fn


def test_a_refused_file_is_one_line_naming_it(capsys):
    with pytest.raises(typer.Exit) as exit_info:
        guard(_raise(PermissionError(errno.EACCES, "Permission denied", "/data/rows.jsonl")))
    assert exit_info.value.exit_code == 2
    err = capsys.readouterr().err
    assert "/data/rows.jsonl: permission denied" in err and "Errno" not in err
    with pytest.raises(typer.Exit):
        guard(_raise(IsADirectoryError(errno.EISDIR, "Is a directory", "/data")))


def test_other_os_errors_keep_their_traceback():
    with pytest.raises(ConnectionResetError):
        guard(_raise(ConnectionResetError(errno.ECONNRESET, "reset")))
