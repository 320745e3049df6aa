"""Index settings are declared once (IndexSettings): one default and one check per setting reach the CLI flags,
Index.build's keyword arguments, and both vector stores' parameters."""

from __future__ import annotations

import dataclasses

import pytest
import typer
from typer.testing import CliRunner

from infembed.cli.search import register
from infembed.data.errors import SettingsError
from infembed.search.milvus import milvus_settings
from infembed.search.settings import IndexSettings
from infembed.search.vectors import faiss_settings


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_both_stores_take_their_parameters_from_the_same_fields():
    hnsw = IndexSettings(kind="hnsw", hnsw_m=12, ef_construction=90, ef_search=40)
    assert faiss_settings(hnsw, 10_000) == {
        "factory": "HNSW12,Flat",
        "M": 12,
        "ef_construction": 90,
        "ef_search": 40,
    }
    assert milvus_settings(hnsw, 10_000)["params"] == {"M": 12, "efConstruction": 90}
    assert milvus_settings(hnsw, 10_000)["ef_search"] == 40
    # IVF lists from the corpus size, the same number on both stores: 4 * sqrt(n), at most one list per 39 points
    ivf = IndexSettings(kind="ivf")
    assert faiss_settings(ivf, 10_000)["nlist"] == milvus_settings(ivf, 10_000)["params"]["nlist"] == 256
    assert faiss_settings(ivf, 1_000)["nlist"] == 25 and faiss_settings(ivf, 10)["nlist"] == 1
    assert faiss_settings(ivf, 10_000)["nprobe"] == milvus_settings(ivf, 10_000)["nprobe"] == 32
    given = IndexSettings(kind="ivf", nlist=7, nprobe=3)
    assert faiss_settings(given, 10_000) == {"factory": "IVF7,Flat", "nlist": 7, "nprobe": 3}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"kind": "annoy"}, "kind must be one of flat, hnsw, ivf, bm25, got 'annoy'"),
        ({"hnsw_m": 1}, "hnsw_m must be a whole number >= 2"),
        ({"ef_search": 0}, "ef_search must be a whole number >= 1"),
        ({"nlist": -3}, "nlist must be a whole number >= 1"),
        ({"nprobe": 0}, "nprobe must be a whole number >= 1"),
        ({"shard_size": 2.5}, "shard_size must be a whole number >= 1"),
        ({"batch_size": True}, "batch_size must be a whole number >= 1"),
    ],
)
def test_each_setting_is_checked_once(values, message):
    with pytest.raises(SettingsError, match=message):
        IndexSettings(**values)


def test_keyword_arguments_override_a_settings_object():
    base = IndexSettings(kind="hnsw", hnsw_m=8)
    assert IndexSettings.of(base, ef_search=20, nlist=None) == dataclasses.replace(base, ef_search=20)
    assert IndexSettings.of() == IndexSettings()
    with pytest.raises(SettingsError, match="unknown index setting.*hnsw_M.*known: backend, batch_size, "):
        IndexSettings.of(hnsw_M=8)


def test_every_field_is_a_flag_of_infembed_index_with_its_default(cli):
    result = CliRunner().invoke(cli, ["index", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for field in dataclasses.fields(IndexSettings):
        assert f"--{field.name.replace('_', '-')}" in result.output
    assert "(default: 32)" in result.output and "(default: 4096)" in result.output


def test_a_bad_flag_is_one_line_before_anything_is_read(cli, tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "index",
            "-c",
            str(tmp_path / "absent.jsonl"),
            "-o",
            str(tmp_path / "i"),
            "--kind",
            "hnsw",
            "--hnsw-m",
            "0",
        ],
    )
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "error: hnsw_m must be a whole number >= 2 (an HNSW node needs neighbours); got 0"
    ]
    assert not (tmp_path / "i").exists()
