"""The project's own errors: bad input (:class:`DataError`, with file, line and field) and bad settings
(:class:`SettingsError`). The CLI prints these as one line and exits 2; any other exception is a bug and keeps
its traceback."""

from __future__ import annotations

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


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (DataError, SettingsError, FileNotFoundError)
"""What the CLI reports as one line (exit 2). Everything else shows its traceback: it is a bug to report."""
