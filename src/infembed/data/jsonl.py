"""JSONL and TSV primitives: line-numbered errors on read, atomic whole-file writes, durable appends."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from infembed.data.errors import DataError


def open_text(path: str | Path) -> TextIO:
    """Open a text file for reading, transparently gunzipping ``*.gz``."""
    path = Path(path)
    if not path.exists():
        raise DataError("file not found", path=path)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line. A line that is not a JSON object raises a
    :class:`DataError` naming the file and line; nothing is skipped silently."""
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as error:
                raise DataError(f"not valid JSON ({error.msg} at column {error.colno})", path, number) from None
            if not isinstance(obj, dict):
                raise DataError(f"expected a JSON object, got {type(obj).__name__}", path, number)
            yield number, obj


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [obj for _, obj in iter_jsonl(path)]


def require_str(obj: dict[str, Any], key: str, path: str | Path, line: int, *, allow_empty: bool = False) -> str:
    """``obj[key]`` as a string, or a DataError naming file, line and field. Numbers are accepted as ids."""
    if key not in obj:
        raise DataError("missing", path, line, key)
    value = obj[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise DataError(f"expected a string, got {type(value).__name__}", path, line, key)
    if not allow_empty and not value.strip():
        raise DataError("is empty", path, line, key)
    return value


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[TextIO]:
    """Write to a temporary file beside ``path`` and rename it over ``path`` only when the block succeeds,
    so a crash never leaves a half-written file and never destroys the previous one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Atomically write ``rows`` as JSONL; returns the number of rows."""
    count = 0
    with atomic_write(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_json(path: str | Path, obj: Any) -> None:
    with atomic_write(path) as handle:
        json.dump(obj, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


class JsonlAppender:
    """Append rows durably (flush + fsync per batch) for resumable jobs. On open, a torn last line left by a
    killed process is cut off, so the file always holds whole rows only."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._handle = open(self.path, "a", encoding="utf-8")

    def _repair(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            with open(self.path, "r+b") as handle:
                handle.truncate(keep)

    def write(self, row: dict[str, Any], *, sync: bool = True) -> None:
        self._handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        if sync:
            self.sync()

    def sync(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if not self._handle.closed:
            self.sync()
            self._handle.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
