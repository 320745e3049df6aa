"""A damaged index dir is one line naming the file, never a traceback (issue 23, item 7).

Invariants: ``Index.load`` (and so ``search`` and ``serve``) refuses an index whose files cannot be what
index.json says: index.json that is not JSON (file and line), not an object, of an unknown kind or missing a
field; docs.jsonl cut short or damaged; docs.offsets.npy that is not an offset table; vectors.faiss missing or
cut short; the bm25/ dir of a BM25 index missing; ``-i`` naming a file. Each is a DataError, printed by the CLI
as one line with exit status 2. A model other than the index's is refused the same way (one line, exit 2).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from infembed.cli.search import register
from infembed.data.errors import DataError, SettingsError
from infembed.search import Index, IndexModelMismatch


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _copy(index: Index, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(index.path, target)
    return target


def _write(text: str | bytes):
    def corrupt(root: Path, name: str) -> None:
        path = root / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return corrupt


def _truncate(root: Path, name: str) -> None:
    path = root / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _remove(root: Path, name: str) -> None:
    path = root / name
    shutil.rmtree(path) if path.is_dir() else path.unlink()


def _meta(change):
    def corrupt(root: Path, name: str) -> None:
        meta = json.loads((root / name).read_text())
        change(meta)
        (root / name).write_text(json.dumps(meta))

    return corrupt


def _damage_a_line(root: Path, name: str) -> None:  # same size, so the offsets still add up
    data = bytearray((root / name).read_bytes())
    data[1] = ord("#")
    (root / name).write_bytes(bytes(data))


CASES = [
    # (index fixture, file, corruption, words the one line must hold)
    ("flat_index", "index.json", _write("[]"), ["index.json", "expected a JSON object, got list"]),
    (
        "flat_index",
        "index.json",
        _write('{"format": 1,\n "kind": '),
        ["index.json", "line 2", "not valid JSON"],
    ),
    ("flat_index", "index.json", _write(b"\xff\xfe{}"), ["index.json", "not valid UTF-8"]),
    ("flat_index", "index.json", _meta(lambda m: m.update(kind="annoy")), ["index.json", "kind", "annoy"]),
    ("flat_index", "index.json", _meta(lambda m: m.pop("model")), ["index.json", "model"]),
    ("flat_index", "index.json", _meta(lambda m: m.update(count="many")), ["index.json", "count"]),
    ("bm25_index", "index.json", _meta(lambda m: m.pop("bm25")), ["index.json", "bm25"]),
    ("flat_index", "docs.jsonl", _truncate, ["docs.jsonl"]),
    ("bm25_index", "docs.jsonl", _truncate, ["docs.jsonl"]),
    ("flat_index", "docs.jsonl", _remove, ["docs.jsonl"]),
    ("flat_index", "docs.offsets.npy", _write(b"junk junk junk"), ["docs.offsets.npy"]),
    ("flat_index", "docs.offsets.npy", _truncate, ["docs.offsets.npy"]),
    ("bm25_index", "docs.offsets.npy", _write(b"\x93NUMPY junk"), ["docs.offsets.npy"]),
    ("flat_index", "vectors.faiss", _remove, ["vectors.faiss", "missing"]),
    ("flat_index", "vectors.faiss", _truncate, ["vectors.faiss"]),
    ("flat_index", "vectors.faiss", _write(b""), ["vectors.faiss"]),
    ("bm25_index", "bm25", _remove, ["bm25"]),
]


@pytest.mark.parametrize(("which", "name", "corrupt", "words"), CASES)
def test_a_damaged_index_is_one_line(cli, request, tmp_path, which, name, corrupt, words):
    root = _copy(request.getfixturevalue(which), tmp_path)
    corrupt(root, name)
    with pytest.raises(DataError) as error:
        Index.load(root).search("how do bees make honey", k=30)
    for word in words:
        assert word in str(error.value)
    result = CliRunner().invoke(cli, ["search", "-i", str(root), "-q", "how do bees make honey", "-k", "30"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output


def test_a_damaged_document_line_names_it(flat_index, tmp_path):
    root = _copy(flat_index, tmp_path)
    _damage_a_line(root, "docs.jsonl")
    index = Index.load(root)
    with pytest.raises(DataError, match=r"docs.jsonl, line 1: not valid JSON"):
        index.search("anything at all", k=30)


def test_an_index_path_that_is_a_file_is_one_line(cli, tmp_path):
    path = tmp_path / "index.json"
    path.write_text("{}")
    with pytest.raises(DataError, match="is a file, not an index directory"):
        Index.load(path)
    result = CliRunner().invoke(cli, ["search", "-i", str(path), "-q", "x"])
    assert result.exit_code == 2 and "is a file, not an index directory" in result.stderr, result.output


def test_another_model_is_one_line_exit_2(cli, model, flat_index, tmp_path):
    other = copy.deepcopy(model)
    with torch.no_grad():
        next(other.encoder.backbone.parameters())[0, 0] += 0.01
    other.save(tmp_path / "perturbed")
    # still an IndexModelMismatch for library callers, and a SettingsError (a ValueError) for the CLI
    assert issubclass(IndexModelMismatch, SettingsError) and issubclass(IndexModelMismatch, ValueError)
    for command in (["search", "-q", "x"], ["serve", "--port", "1"]):
        result = CliRunner().invoke(
            cli, [command[0], "-i", str(flat_index.path), "-m", str(tmp_path / "perturbed"), *command[1:]]
        )
        assert result.exit_code == 2, result.output
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith("error: ") and "was built with model default" in last, result.output
        assert "Traceback" not in result.output


def test_offsets_that_do_not_match_index_json_are_refused(flat_index, tmp_path):
    root = _copy(flat_index, tmp_path)
    offsets = np.load(root / "docs.offsets.npy")
    np.save(root / "docs.offsets.npy", offsets[:-3])
    with pytest.raises(DataError, match="docs.offsets.npy"):
        Index.load(root)
