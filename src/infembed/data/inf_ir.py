"""InF-IR rows, the training data: from JSONL files, from hub tables, from a name, and back to JSONL.

One row holds the fields of :data:`~infembed.data.records.TRIPLET_FIELDS` (schema in docs/architecture.md).
``document`` is an older name of ``document_positive``; the reference code's releases also suffix every field
with ``_fewshot``. Both are accepted. The hub data set (``InF-IR/InF-IR``) has no ``train`` split (the
reference code reads ``["msmarco"]``): name one as ``NAME:SPLIT``, or every split is read.

Example::

    from infembed.data.inf_ir import load_inf_ir, read_triplets
    rows = read_triplets("inf-ir.jsonl")            # a local file (or every *.jsonl of a dir)
    rows = load_inf_ir("InF-IR/InF-IR:msmarco", limit=1000)   # a local path or a hub name
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path

from infembed.data import hub
from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import iter_jsonl, require_str, write_jsonl
from infembed.data.records import OPTIONAL_TRIPLET_FIELDS, TRIPLET_ALIASES, TRIPLET_FIELDS, Triplet
from infembed.data.rows import Table, as_rows

logger = logging.getLogger(__name__)

INF_IR_REPO = "InF-IR/InF-IR"
_FEWSHOT = "_fewshot"


def parse_triplet(obj: dict, path: str | Path, line: int) -> Triplet:
    """One InF-IR row (a dict) as a :class:`Triplet`; ``path`` and ``line`` name it in errors."""
    obj = dict(obj)
    for alias, name in TRIPLET_ALIASES.items():
        if alias in obj and name not in obj:
            obj[name] = obj.pop(alias)
    values = {key: require_str(obj, key, path, line) for key in TRIPLET_FIELDS}
    optional = {}
    for key in OPTIONAL_TRIPLET_FIELDS:
        if obj.get(key) is not None:
            optional[key] = str(obj[key])
    known = set(TRIPLET_FIELDS) | set(OPTIONAL_TRIPLET_FIELDS)
    extra = {k: v for k, v in obj.items() if k not in known}
    return Triplet(**values, **optional, extra=extra)


def read_triplets(path: str | Path, limit: int | None = None) -> list[Triplet]:
    """Read InF-IR rows from a JSONL file (or every ``*.jsonl`` in a directory, sorted by name)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise SettingsError(f"limit must be a whole number >= 0 (None for all rows), got {limit!r}")
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise DataError("no *.jsonl file in this directory", path)
    rows: list[Triplet] = []
    for file in files:
        for line, obj in iter_jsonl(file):
            if limit is not None and len(rows) >= limit:
                return rows
            rows.append(parse_triplet(obj, file, line))
    if not rows and limit != 0:
        raise DataError("no InF-IR rows found", path)
    return rows


def write_triplets(path: str | Path, rows: Iterable[Triplet]) -> int:
    return write_jsonl(path, (row.to_dict() for row in rows))


def triplets_from_rows(rows: Table, limit: int | None = None) -> list[Triplet]:
    """InF-IR rows (hub schema) as :class:`Triplet`s. Accepts ``document`` for ``document_positive`` and
    the reference code's ``<field>_fewshot`` names; errors name the table, row and field."""
    table = as_rows(rows, "InF-IR rows")
    out: list[Triplet] = []
    for line, row in table:
        if limit is not None and len(out) >= limit:
            break
        # a hub table gives every row every column, None where a row lacks it (e.g. `document` beside
        # `document_positive` in a mixed release): None means absent here
        obj = {key: value for key, value in row.items() if value is not None}
        for key in [k for k in obj if k.endswith(_FEWSHOT)]:
            base = key[: -len(_FEWSHOT)]
            if base in (*TRIPLET_FIELDS, "document") and base not in obj:
                obj[base] = obj.pop(key)
        out.append(parse_triplet(obj, table.source, line))
    if not out and limit != 0:
        raise DataError("no InF-IR rows found", table.source)
    return out


def load_inf_ir(
    name_or_path: str | Path = INF_IR_REPO, split: str | None = None, limit: int | None = None
) -> list[Triplet]:
    """InF-IR training rows from a local JSONL file or dir (:func:`read_triplets`) or a hub dataset
    (``InF-IR/InF-IR`` by default; any dataset with the InF-IR fields works).

    A hub name may name its split, ``NAME:SPLIT`` (``InF-IR/InF-IR:msmarco``; ``split`` does the same). With
    no split every split is read, in the data set's order, and the splits are logged: ``InF-IR/InF-IR`` has no
    ``train`` split (the reference code reads ``load_dataset("InF-IR/InF-IR")["msmarco"]``). ``limit`` reads
    only the first rows (with a split named, only those are downloaded and converted)."""
    path = Path(name_or_path)
    if path.exists():
        return read_triplets(path, limit=limit)
    text = str(name_or_path)
    match = re.fullmatch(r"([\w.-]+/[\w.-]+)(?::([\w.-]+))?", text)
    if match is None or match.group(1).endswith((".jsonl", ".json", ".gz")):
        raise DataError(
            "no such file or directory",
            text,
            hint="give an InF-IR JSONL file or dir, or a hub dataset name such as InF-IR/InF-IR or "
            "InF-IR/InF-IR:msmarco (NAME:SPLIT)",
        )
    repo, named = match.group(1), match.group(2)
    if named is not None and split is not None and named != split:
        raise DataError(f"split {named!r} in the name but split={split!r}", text, field="split")
    return triplets_from_hub(repo, named or split, limit)


def triplets_from_hub(repo: str, split: str | None, limit: int | None) -> list[Triplet]:
    """The InF-IR rows of a hub dataset: one split, or every split in the data set's order (logged)."""
    if split is not None:
        wanted = split if limit is None else f"{split}[:{limit}]"
        tables = hub.fetch_hub_rows(repo, None, wanted)
        return triplets_from_rows(next(iter(tables.values())), limit=limit)
    tables = hub.fetch_hub_rows(repo, None)
    logger.warning(
        "%s: no split named, so every split is read: %s (name one as %s:SPLIT)",
        repo,
        ", ".join(f"{name} ({len(rows)} rows)" for name, rows in tables.items()),
        repo,
    )
    rows: list[Triplet] = []
    for table in tables.values():
        if limit is not None and len(rows) >= limit:
            break
        rows += triplets_from_rows(table, limit=None if limit is None else limit - len(rows))
    return rows
