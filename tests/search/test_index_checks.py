"""``infembed index`` checks before it encodes, and what it writes (issue 23, items 6, 8, 10 and 12).

Invariants: settings that cannot build (an IVF with more lists than documents) and an output that cannot be
written are refused in one line before the model loads and before any progress bar is drawn; a Milvus Lite
file inside a new --output dir (the docs' pattern) works; the index dir, which holds the whole corpus, is
readable by its owner only (0700, files 0600); ``Index.search`` of one query string gives its hits, of a list
one list of hits per query.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import typer
from conftest import SHARD_SIZE
from typer.testing import CliRunner

from infembed.cli.search import register
from infembed.data.errors import DataError, SettingsError
from infembed.search import Hit, Index


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_ivf_with_more_lists_than_documents_is_refused_before_the_model_loads(cli, corpus_path, tmp_path):
    # a model that does not exist: the refusal must come first, before any model is loaded
    with pytest.raises(SettingsError, match="nlist 100000 is more than the 30 documents"):
        Index.build(str(tmp_path / "no-model"), corpus_path, tmp_path / "ivf", kind="ivf", nlist=100000)
    assert not (tmp_path / "ivf").exists()
    result = CliRunner().invoke(
        cli,
        ["index", "-c", str(corpus_path), "-o", str(tmp_path / "ivf"), "--kind", "ivf", "--nlist", "100000"],
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "error: nlist 100000 is more than the 30 documents: IVF needs at least one document per list "
        "(faiss asks for 39); give --nlist 30 or less, or leave it out"
    ]


def test_no_progress_bar_is_drawn_before_a_refusal(cli, corpus_path, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["index", "-c", str(corpus_path), "-o", str(out), "--device", "cpu"])
    assert result.exit_code == 2 and "is not an infembed index" in result.stderr, result.output
    assert "encoding" not in result.output
    assert result.stderr.strip().splitlines()[0].startswith("error: ")


def test_the_progress_bar_counts_the_documents(cli, corpus_path, tmp_path):
    out = tmp_path / "idx"
    result = CliRunner().invoke(
        cli,
        ["index", "-c", str(corpus_path), "-o", str(out), "--device", "cpu", "--shard-size", str(SHARD_SIZE)],
    )
    assert result.exit_code == 0, result.output
    assert "encoding" in result.stderr and "30/30" in result.stderr and "0/?" not in result.stderr


def test_a_milvus_lite_file_inside_a_new_output_dir(model, corpus_path, tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    root = tmp_path / "idx-milvus"  # does not exist yet: --uri idx-milvus/milvus.db --output idx-milvus
    index = Index.build(model, corpus_path, root, store="milvus", uri=str(root / "milvus.db"))
    assert index.count == 30 and (root / "milvus.db").exists()
    assert index.search("how do bees make honey", k=1)[0].id == "bees"


def _modes(root: Path) -> set[tuple[str, int]]:
    out = {("dir", stat.S_IMODE(root.stat().st_mode))}
    for path in root.rglob("*"):
        if not path.is_symlink():
            out.add(("dir" if path.is_dir() else "file", stat.S_IMODE(path.stat().st_mode)))
    return out


def test_index_files_are_readable_by_the_owner_only(flat_index, bm25_index):
    for index in (flat_index, bm25_index):
        assert _modes(index.path) <= {("dir", 0o700), ("file", 0o600)}, index.path
        assert (index.path / "docs.jsonl").exists()


def test_one_query_string_gives_its_hits_and_a_list_gives_a_list_per_query(flat_index, bm25_index):
    for index in (flat_index, bm25_index):
        hits = index.search("how do bees make honey", "Only biology.", k=2)
        assert isinstance(hits, list) and all(isinstance(h, Hit) for h in hits) and hits[0].id == "bees"
        listed = index.search(["how do bees make honey"], "Only biology.", k=2)
        assert len(listed) == 1 and [h.id for h in listed[0]] == [h.id for h in hits]
        assert index.search(("how do bees make honey", "cryptocurrency mining"), k=1)[1][0].id == "bitcoin"


def _denied() -> Path | None:
    """A directory this process may not create, even as root: sysfs refuses new entries (EPERM)."""
    probe = Path("/sys/infembed-permission-probe")
    try:
        os.mkdir(probe)
    except PermissionError:
        return probe
    except OSError:
        return None
    os.rmdir(probe)
    return None


def test_an_output_that_cannot_be_written_is_one_line_before_the_model_loads(cli, corpus_path, tmp_path):
    denied = _denied()
    if denied is None:
        pytest.skip("no path here raises PermissionError for this user")
    # (the wording is data/jsonl.py's ensure_dir or the index's own probe: "cannot write the index here")
    with pytest.raises(DataError, match=r"cannot (write the index here|be created|be written)") as error:
        Index.build(str(tmp_path / "no-model"), corpus_path, denied / "idx")
    assert str(denied) in str(error.value)
    result = CliRunner().invoke(
        cli, ["index", "-c", str(corpus_path), "-o", str(denied / "idx"), "--kind", "bm25"]
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(denied) in lines[0], lines
    assert "Traceback" not in result.output
