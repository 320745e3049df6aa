"""The project's own errors: bad input (:class:`DataError`, with file, line and field) and bad settings
(:class:`SettingsError`). The CLI prints these as one line and exits 2; any other exception is a bug and keeps
its traceback."""

from __future__ import annotations

import errno
from pathlib import Path


class DataError(ValueError):
    """Bad input data. The message names the file, the 1-based line and the field.

    The CLI prints ``str(error)`` without a traceback and exits with status 2.
    """

    def __init__(
        self,
        message: str,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        self.hint = hint
        self.reason = message
        where = []
        if self.path:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if field:
            where.append(f"field '{field}'")
        text = (", ".join(where) + ": " if where else "") + message
        if hint:
            text += f" ({hint})"
        super().__init__(text)


class SettingsError(ValueError):
    """A setting, flag or argument that cannot be used (out of range, unknown choice, contradicting another).

    A ``ValueError``, so library callers that catch ``ValueError`` keep working; the CLI prints it as one line
    and exits with status 2."""


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    DataError,
    SettingsError,
    FileNotFoundError,
    PermissionError,
)
"""What the CLI reports as one line (exit 2). Everything else shows its traceback: it is a bug to report.
(Some other OSErrors about a file are expected too: see :func:`expected_os_error`.)"""

# What the operating system says about a file that is the user's to fix, not a bug: no permission, a read-only
# or full disk, a name that is too long, a file where a directory must be (and the reverse).
_FILE_ERRNOS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENAMETOOLONG: "file name too long",
    errno.EISDIR: "is a directory",
    errno.ENOTDIR: "not a directory",
    errno.ENOENT: "no such file or directory",
}


def expected_os_error(error: BaseException) -> bool:
    """An OSError about a file that the user can fix (see ``_FILE_ERRNOS``): one line, not a traceback. A
    network error (also an OSError) is not one of them."""
    return isinstance(error, OSError) and error.errno in _FILE_ERRNOS and error.filename is not None


def os_error_reason(error: OSError) -> str:
    """``permission denied``, ``read-only file system``, ...: the OS's reason in lower case."""
    return _FILE_ERRNOS.get(error.errno) or (error.strerror or str(error)).lower()


def error_message(error: BaseException) -> str:
    """The one line the CLI prints for an expected error: an OSError about a file as ``PATH: reason``, anything
    else as ``str(error)``."""
    if isinstance(error, OSError) and error.filename is not None and error.errno is not None:
        where = str(error.filename) + (f" -> {error.filename2}" if error.filename2 is not None else "")
        return f"{where}: {os_error_reason(error)}"
    return str(error)
