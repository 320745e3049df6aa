"""APS, INGF and Cohen's kappa on hand-computed cases; annotation files; the 2-D map; diversity tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infembed.data.errors import DataError
from infembed.data.jsonl import write_jsonl
from infembed.synth import stats


def test_ingf_hand_computed():
    texts = ["a b c", "a b d", "e f g"]
    # unigrams: df a=2 b=2 c=d=e=f=g=1; per text mean df 5/3, 5/3, 1; INGF = 3 / (13/9) = 27/13
    assert stats.ingf(texts, 1) == pytest.approx(27 / 13)
    # bigrams: "a b" in two texts; the others once: 3/2, 3/2, 1 -> 3 / (4/3) = 9/4
    assert stats.ingf(texts, 2) == pytest.approx(9 / 4)
    # trigrams: none shared -> N
    assert stats.ingf(texts, 3) == pytest.approx(3.0)
    assert stats.ingf_mean(texts) == pytest.approx((27 / 13 + 9 / 4 + 3) / 3)


def test_ingf_bounds_and_edge_cases():
    assert stats.ingf(["the same words here"] * 5, 2) == pytest.approx(1.0)  # all shared: 1
    assert stats.ingf(["one two", "three four", "five six"], 1) == pytest.approx(3.0)  # none shared: N
    assert stats.ingf(["Cat, cat!", "CAT"], 1) == pytest.approx(1.0)  # lower-cased word tokens
    assert math.isnan(stats.ingf(["single", "words"], 2))  # no bigram anywhere
    assert stats.ingf(["single", "two words"], 2) == pytest.approx(
        1.0
    )  # texts without an n-gram are left out
    with pytest.raises(ValueError):
        stats.ingf(["a"], 0)


def test_aps_hand_computed():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert stats.aps(vectors) == pytest.approx((0 + 2 * math.sqrt(0.5)) / 3)
    assert stats.aps(np.array([[2.0, 0.0], [5.0, 0.0]])) == pytest.approx(1.0)  # scale does not matter
    assert stats.aps(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(-1.0)
    assert math.isnan(stats.aps(np.array([[1.0, 0.0]])))


def test_cohen_kappa_hand_computed():
    assert stats.cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)
    a = ["y"] * 5 + ["n"] * 5
    b = ["y", "y", "y", "y", "n", "y", "y", "n", "n", "n"]
    assert stats.cohen_kappa(a, b) == pytest.approx(0.4)  # p_o = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5
    b3 = ["y", "y", "y", "y", "n", "n", "n", "n", "n", "y"]
    assert stats.cohen_kappa(a, b3) == pytest.approx(0.6)  # p_o = 0.8, p_e = 0.5
    b2 = ["y", "y", "y", "n", "n", "y", "y", "n", "n", "n"]
    assert stats.cohen_kappa(a, b2) == pytest.approx(0.2)  # p_o = 0.6, p_e = 0.5
    assert stats.cohen_kappa(["P+", "P1-", "D2"], ["P+", "P1-", "D2"]) == pytest.approx(1.0)
    assert stats.cohen_kappa(["x", "x"], ["x", "x"]) == 1.0  # constant and equal
    assert math.isnan(stats.cohen_kappa([], []))
    with pytest.raises(ValueError):
        stats.cohen_kappa([1], [1, 2])


def test_annotation_files_and_kappa_against_humans(tmp_path):
    long = tmp_path / "long.jsonl"
    write_jsonl(
        long,
        [{"item": f"i{k}", "rater": "alice", "label": lab} for k, lab in enumerate([1, 1, 0, 0])]
        + [{"id": f"i{k}", "annotator": "o3-mini", "choice": lab} for k, lab in enumerate([1, 0, 0, 0])],
    )
    wide = tmp_path / "wide.tsv"
    wide.write_text("item\tbob\tgpt-4o\ni0\t1\t0\ni1\t1\t1\ni2\t0\t0\ni3\t0\t\n")
    merged = stats.merge_annotations([stats.read_annotations(long), stats.read_annotations(wide)])
    assert sorted(merged) == ["alice", "bob", "gpt-4o", "o3-mini"]
    assert merged["gpt-4o"] == {"i0": "0", "i1": "1", "i2": "0"}  # the empty cell is skipped
    matrix = stats.kappa_matrix(merged)
    assert matrix["alice"]["o3-mini"] == {"kappa": pytest.approx(0.5), "n": 4.0}
    assert matrix["alice"]["bob"]["kappa"] == pytest.approx(1.0)
    vs = stats.kappa_vs_humans(merged, ["alice", "bob"])
    assert vs["o3-mini"] == pytest.approx(0.5)  # 0.5 against each human
    assert vs["alice"] == pytest.approx(1.0)  # against bob only
    with pytest.raises(DataError, match="no labels from carol"):
        stats.kappa_vs_humans(merged, ["carol"])
    clash = tmp_path / "clash.jsonl"
    write_jsonl(clash, [{"item": "a", "rater": "r", "label": 1}, {"item": "a", "rater": "r", "label": 2}])
    with pytest.raises(DataError, match="clash.jsonl, line 2: rater 'r' labels item 'a' twice"):
        stats.read_annotations(clash)


def test_pca_finds_the_main_direction():
    rng = np.random.default_rng(0)
    x = np.outer(rng.normal(size=200), [3.0, 0.0, 4.0]) + 0.01 * rng.normal(size=(200, 3))
    coords = stats.pca_2d(x)
    assert coords.shape == (200, 2)
    assert np.var(coords[:, 0]) > 1000 * np.var(coords[:, 1])


def _rows(prefix, n):
    return [
        {
            "query_positive": f"{prefix} query {i}",
            "instruction_positive": f"{prefix} instruction about topic {i % 3}",
            "document_positive": f"{prefix} passage {i} text",
            "instruction_negative": f"{prefix} other instruction {i}",
            "query_negative": f"{prefix} other query {i}",
            "hard_negative_document_1": f"{prefix} negative one {i}",
            "hard_negative_document_2": f"{prefix} negative two {i}",
        }
        for i in range(n)
    ]


class _HashEmbedder:
    name = "hash"

    def __call__(self, texts):
        return np.array([[len(t), sum(map(ord, t)) % 7, 1.0] for t in texts], dtype=float)


def test_diversity_uses_the_same_n_for_every_data_set_and_draws_a_map(tmp_path):
    write_jsonl(tmp_path / "a" / "train.jsonl", _rows("alpha", 10))
    write_jsonl(
        tmp_path / "b.jsonl", [{**r, "document": r.pop("document_positive")} for r in _rows("beta", 4)]
    )
    sets = [stats.load_dataset(tmp_path / "a" / "train.jsonl"), stats.load_dataset(tmp_path / "b.jsonl")]
    assert [d.name for d in sets] == ["a", "b"]
    result, samples = stats.diversity(sets, embedder=_HashEmbedder(), max_samples=50)
    assert result.samples == {"instruction": 8, "query": 8, "passage": 12}  # the smaller set's counts
    for group in ("instruction", "query", "passage"):
        for name in ("a", "b"):
            entry = result.table[group][name]
            assert entry["n"] == result.samples[group] and 1.0 <= entry["ingf"] <= entry["n"]
            assert -1.0 <= entry["aps"] <= 1.0
    png = stats.plot_map(samples, tmp_path / "map.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    only_ingf, _ = stats.diversity(sets, with_aps=False)
    assert "aps" not in only_ingf.table["query"]["a"]


def test_aps_with_the_packaged_minilm():
    embedder = stats.Embedder()
    same = stats.aps(embedder(["how to cook rice", "how to cook rice", "how to cook rice"]))
    mixed = stats.aps(
        embedder(["how to cook rice", "tax rules for freelancers in france", "black hole radiation"])
    )
    assert same == pytest.approx(1.0, abs=1e-5)
    assert mixed < 0.3


def _inf_rows(n: int) -> list[dict[str, str]]:
    return [
        {
            "query_positive": f"query number {i}",
            "instruction_positive": f"an instruction about thing {i}",
            "document_positive": f"a passage about thing {i}",
            "instruction_negative": f"another instruction {i}",
            "query_negative": f"other query {i}",
            "hard_negative_document_1": f"negative passage one {i}",
            "hard_negative_document_2": f"negative passage two {i}",
        }
        for i in range(n)
    ]


def test_stats_names_an_input_without_rows(tmp_path):
    """A run dir that kept no row is not dropped silently: alone it is one line (exit 2), beside other inputs
    a warning naming it."""
    from typer.testing import CliRunner

    from infembed.cli.synth import app

    empty = tmp_path / "empty-run"
    empty.mkdir()
    (empty / "train.jsonl").write_text("")
    result = CliRunner().invoke(app, ["stats", str(empty), "--no-aps"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "holds no rows" in lines[0] and "empty-run" in lines[0], result.output

    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows, _inf_rows(4))
    result = CliRunner().invoke(app, ["stats", str(empty), str(rows), "--no-aps"])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "empty-run" in result.output and "holds no rows" in result.output


def test_stats_shows_progress_while_it_embeds(tmp_path):
    """Loading the embedding model and embedding the samples take minutes on real data: both show progress."""
    from typer.testing import CliRunner

    from infembed.cli.synth import app

    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows, _inf_rows(6))
    result = CliRunner().invoke(app, ["stats", str(rows), "--max-samples", "4"])
    assert result.exit_code == 0, result.output
    assert "loading the embedding model" in result.output
    assert "embedding" in result.output and "12/12" in result.output  # 4 texts x 3 groups
