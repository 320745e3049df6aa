"""A benchmark dir that would give silently wrong numbers is refused where it is read; bare names find the data dir.

Invariants:
* ``benchmark.json``'s ``main_score`` must name a metric the evaluation computes (else the headline is NaN):
  refused with the file, the field and the valid names; every metric name the scorer produces is valid.
* ``top_ranked.jsonl`` naming a document that is not in ``corpus.jsonl`` is refused with the file, line and field
  (mteb fails on it too, with a KeyError); candidates that are all in the corpus load as before.
* A bare name (``followir-cranfield-excl``) that is neither a local dir nor a registered name is looked up in the
  data dirs given (the CLI passes ``$INFEMBED_DATA_DIR``); when nothing is found the message says where it looked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from infembed.data import benchmarks
from infembed.data.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"
BENCH = FIXTURES / "instruction_bench"


def copy_bench(root: Path) -> Path:
    target = root / "bench"
    shutil.copytree(BENCH, target)
    return target


@pytest.mark.parametrize("name", ["nosuchmetric", "ndcg_at_0", "ndcg_at_ten", "p-MRR", "map"])
def test_unknown_main_score_is_refused_with_file_field_and_valid_names(tmp_path, name):
    root = copy_bench(tmp_path)
    (root / "benchmark.json").write_text(json.dumps({"name": "bench", "main_score": name}))
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark(root)
    message = str(caught.value)
    for part in (str(root / "benchmark.json"), "field 'main_score'", repr(name), "ndcg_at_10", "map_at_1000"):
        assert part in message, message


@pytest.mark.parametrize("name", ["ndcg_at_10", "map_at_1000", "recall_at_50", "precision_at_5", "mrr_at_10"])
def test_metrics_the_scorer_computes_are_valid_main_scores(tmp_path, name):
    root = copy_bench(tmp_path)
    (root / "benchmark.json").write_text(json.dumps({"main_score": name}))
    assert benchmarks.load_benchmark(root).main_score == name


def test_every_metric_name_the_scorer_produces_is_a_valid_main_score():
    from infembed.data.benchmarks.registry import is_metric_name
    from infembed.evaluate.metrics import trec_scores

    scores = trec_scores({"q": {"a": 1}}, {"q": {"a": 1.0, "b": 0.5}}, (1, 7, 1000))
    assert scores.mean and all(is_metric_name(name) for name in scores.mean)


def test_top_ranked_with_an_unknown_document_is_refused_with_file_line_field(tmp_path):
    root = copy_bench(tmp_path)
    (root / "top_ranked.jsonl").write_text(
        '{"query-id": "q1", "corpus-ids": ["d1", "d2"]}\n{"query-id": "q2", "corpus-ids": ["d3", "nope"]}\n'
    )
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark(root)
    message = str(caught.value)
    for part in (str(root / "top_ranked.jsonl"), "line 2", "field 'corpus-ids'", "'nope'", "corpus.jsonl"):
        assert part in message, message


def test_bare_name_is_found_in_the_data_dir(tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(BENCH, data / "my-bench")
    monkeypatch.chdir(tmp_path)
    bench = benchmarks.load_benchmark("my-bench", data_dirs=[data])
    assert bench.name == "my-bench" and bench.source == str(data / "my-bench")
    # a local dir of that name wins over the data dir
    shutil.copytree(BENCH, tmp_path / "my-bench")
    assert benchmarks.load_benchmark("my-bench", data_dirs=[data]).source == "my-bench"


def test_a_name_found_nowhere_says_where_it_looked(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as caught:
        benchmarks.load_benchmark("no-such-bench", data_dirs=[data])
    message = str(caught.value)
    assert str(tmp_path / "no-such-bench") in message and str(data / "no-such-bench") in message, message
    assert "registered benchmark name" in message  # the known names are still listed
