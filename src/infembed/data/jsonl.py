"""JSONL and TSV primitives: line-numbered errors on read, atomic whole-file writes, durable appends."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from infembed.data.errors import DataError, os_error_reason


def open_text(path: str | Path) -> TextIO:
    """Open a text file for reading, transparently gunzipping ``*.gz``. Prefer :func:`iter_lines`, which names
    the line of a byte that is not UTF-8."""
    path = Path(path)
    if not path.exists():
        raise DataError("file not found", path=path)
    if path.is_dir():
        raise DataError("is a directory, expected a file", path=path)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig")
    return open(path, encoding="utf-8-sig")


def iter_lines(path: str | Path, digest: Any = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every line of a UTF-8 text file (``*.gz`` gunzipped), newline removed.
    ``digest`` (a ``hashlib`` object) is fed the bytes as they are read, so it describes exactly the lines
    yielded, even if the file changes later (a plain file's digest is then the sha256 of the file).

    A leading byte-order mark is dropped (editors on Windows write one). A byte sequence that is not UTF-8 raises
    a :class:`DataError` naming the file, the line and the column, instead of Python's bare codec error."""
    path = Path(path)
    if not path.exists():
        raise DataError("file not found", path=path)
    if path.is_dir():
        raise DataError("is a directory, expected a file", path=path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if digest is not None:
                    digest.update(raw)
                if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise DataError(
                        f"not valid UTF-8 (byte 0x{raw[error.start]:02x} at column {error.start + 1})",
                        path,
                        number,
                        hint="save the file as UTF-8",
                    ) from None
                yield number, text.rstrip("\r\n")
    except (gzip.BadGzipFile, EOFError) as error:
        raise DataError(f"not a readable gzip file ({error})", path) from None


def iter_jsonl(path: str | Path, digest: Any = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line. A line that is not a JSON object raises a
    :class:`DataError` naming the file and line; nothing is skipped silently. ``digest``: as :func:`iter_lines`."""
    for number, line in iter_lines(path, digest):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(json_error_reason(error), path, number) from None
        if not isinstance(obj, dict):
            raise DataError(f"expected a JSON object, got {type(obj).__name__}", path, number)
        if _SURROGATE_ESCAPE.search(line):
            _refuse_lone_surrogates(obj, path, number)
        yield number, obj


# A JSON escape of a UTF-16 surrogate. A pair (``\ud83d\ude00``) decodes to one character; a lone one decodes to a
# string Python can hold but no UTF-8 file can, so it would fail much later, when an index or a result is written.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def lone_surrogate(text: str) -> str | None:
    """Why ``text`` is not Unicode text, or None. JSON's ``"\\ud800"`` and undecodable bytes in a command-line
    argument both reach Python as lone UTF-16 surrogates: a ``str`` that no file, tokenizer or response can take."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"a lone UTF-16 surrogate (\\u{ord(text[error.start]):04x}) at character {error.start + 1}, which is not text"
    return None


def _refuse_lone_surrogates(value: Any, path: str | Path, line: int, field: str | None = None) -> None:
    if isinstance(value, str):
        problem = lone_surrogate(value)
        if problem:
            raise DataError(
                problem,
                path,
                line,
                field,
                hint="re-export the file; a surrogate must come as a high/low pair",
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            _refuse_lone_surrogates(key, path, line, field)
            _refuse_lone_surrogates(item, path, line, key if field is None else f"{field}.{key}")
    elif isinstance(value, list):
        for item in value:
            _refuse_lone_surrogates(item, path, line, field)


def json_error_reason(error: json.JSONDecodeError) -> str:
    """``not valid JSON (Expecting ',' delimiter at column 12)``. Some of the decoder's reasons already end in
    "at" ("Invalid control character at"): it is dropped so the message does not read "at at column"."""
    reason = error.msg[: -len(" at")] if error.msg.endswith(" at") else error.msg
    return f"not valid JSON ({reason} at column {error.colno})"


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [obj for _, obj in iter_jsonl(path)]


def require_str(
    obj: dict[str, Any], key: str, path: str | Path, line: int, *, allow_empty: bool = False
) -> str:
    """``obj[key]`` as a non-empty string, or a DataError naming file, line and field. Text is never taken from a
    number (a query ``42`` or ``NaN`` is a broken export, not text); ids go through :func:`require_id`."""
    if key not in obj:
        raise DataError("missing", path, line, key)
    value = obj[key]
    if not isinstance(value, str):
        shown = "null" if value is None else f"{type(value).__name__} {value!r}"
        raise DataError(f"expected a string, got {shown}", path, line, key)
    if not allow_empty and not value.strip():
        raise DataError("is empty", path, line, key)
    return value


def id_text(value: Any, path: str | Path | None, line: int | None, field: str) -> str:
    """An id as a string. Strings and integers are ids; an integral float (``4.0``, as pandas-backed tools write
    integer ids) is the integer ``"4"``, so it matches the qrels' ``4``; anything else is an error."""
    if value is None:
        raise DataError("missing", path, line, field)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(
            f"expected an id (a string or an integer), got {type(value).__name__} {value!r}",
            path,
            line,
            field,
        )
    text = str(value).strip()
    if not text:
        raise DataError("is empty", path, line, field)
    return text


def require_id(obj: dict[str, Any], key: str, path: str | Path, line: int) -> str:
    """``obj[key]`` as an id (see :func:`id_text`), or a DataError naming file, line and field."""
    if key not in obj:
        raise DataError("missing", path, line, key)
    return id_text(obj[key], path, line, key)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _publishable(path: str | Path, *, directory: bool = False) -> None:
    """Give a temporary file the permissions a plain ``open(path, "w")`` would (mkstemp/mkdtemp make them
    private to the owner, and a renamed result would stay so)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


# What the OS says when an output cannot be written; the user's to fix (choose another place, free space).
_UNWRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG)


@contextlib.contextmanager
def _writing(target: Path, *, directory: bool = False, creating: bool = True) -> Iterator[None]:
    """Turn the OS refusing to write ``target`` (no permission, a read-only or full disk) into a DataError that
    names ``target`` (not a temporary file beside it) and the directory that refused: one line from the CLI.
    ``creating``: the failing call made a new entry, so the refusing directory is the parent of its file name."""
    try:
        yield
    except OSError as error:
        if error.errno not in _UNWRITABLE:
            raise
        detail = os_error_reason(error)
        if creating and error.filename is not None:
            detail += f" in {Path(error.filename).parent}"
        raise DataError(f"cannot be {'created' if directory else 'written'} ({detail})", target) from None


def ensure_dir(path: str | Path) -> Path:
    """Create the directory ``path`` (and its parents) for an output, or say in one line why it cannot be: a file
    stands where a directory must, or the OS refuses (no permission, read-only disk). Every output directory is
    made through here."""
    path = Path(path)
    try:
        with _writing(path, directory=True):
            path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in [*reversed(path.parents), path] if p.exists() and not p.is_dir()), path)
        raise DataError(
            "is a file, so nothing can be written there", blocker, hint=f"writing {path}"
        ) from None
    return path


def check_writable(path: str | Path) -> None:
    """Refuse, before any work, an output path that cannot be written: the nearest existing directory at or
    above ``path`` must be one this process may create entries in (a file there is refused by
    :func:`ensure_dir`). For commands that would otherwise fail only after loading a model or encoding."""
    path = Path(path).absolute()
    existing = next((p for p in [path, *path.parents] if p.exists()), None)
    if existing is None or not existing.is_dir():
        return
    if os.access(existing, os.W_OK | os.X_OK):
        return
    read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    reason = "read-only file system" if read_only else "permission denied"
    what = "created" if existing != path else "written"
    raise DataError(f"cannot be {what} ({reason} in {existing})", path)


def _make_parent(path: Path) -> None:
    ensure_dir(path.parent)


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` for writers that take a file name (faiss, matplotlib, numpy); it is
    renamed over ``path`` only when the block succeeds, so a crash never leaves a half-written file and never
    destroys the previous one. The one place that does atomic replacement of a file (see :func:`atomic_write`).
    An output the OS refuses (no permission, read-only or full disk) is a DataError naming ``path``."""
    path = Path(path)
    _make_parent(path)
    if path.is_dir():
        raise DataError("is a directory, expected a file name", path)
    with _writing(path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        with _writing(path, creating=False):
            _publishable(tmp)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w") -> Iterator[TextIO]:
    """Write to a temporary file beside ``path`` (text as UTF-8, or ``mode="wb"``) and rename it over ``path``
    only when the block succeeds; the data is flushed to disk before the rename."""
    with atomic_path(path) as tmp, open(tmp, mode, encoding=None if "b" in mode else "utf-8") as handle:
        yield handle
        with _writing(Path(path), creating=False):
            handle.flush()
            os.fsync(handle.fileno())


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """A temporary directory beside ``path``, renamed over it (the old one removed) when the block succeeds;
    removed when it fails. For outputs that are a directory (a saved model, a BM25 index)."""
    import shutil

    path = Path(path)
    _make_parent(path)
    with _writing(path, directory=True):
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        with _writing(path, directory=True, creating=False):
            _publishable(tmp, directory=True)
            if path.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
                os.replace(path, old / path.name)
                os.replace(tmp, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
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
        ensure_dir(self.path.parent)
        with _writing(self.path, creating=not self.path.exists()):
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
