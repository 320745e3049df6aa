"""Hub benchmarks and training data (infembed.data.hub), offline.

Invariant: each hub schema (FollowIR original and mteb layouts, BRIGHT, MAIR, InF-IR) converts to the same
records a local dir would give, with og qrels from the og table (never swapped), and the registry names map to
the right tables, revisions and main scores. The network is replaced by fixtures written in the exact hub
schemas (tests/data/fixtures); one test reads a fixture dir through the real ``datasets`` library, using the
same dataset-card configs as the hub repo.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from infembed.data import formats, hub
from infembed.data.errors import DataError
from infembed.data.hub import Rows

FIXTURES = Path(__file__).parent / "fixtures"
DATA_DIR = Path(os.environ.get("INFEMBED_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))

# (repo, config) -> {split: fixture file}, mirroring the hub repos' configs and split names
HUB_FILES: dict[tuple[str, str | None], dict[str, Path]] = {
    **{
        (f"jhu-clsp/{short}-instructions", config): {split: FIXTURES / "followir_hub" / file}
        for short in ("robust04", "core17", "news21")
        for config, split, file in [
            ("corpus", "corpus", "corpus.jsonl"),
            ("queries", "queries", "queries.jsonl"),
            ("qrels_og", "test", "qrels_og/test.jsonl"),
            ("qrels_changed", "test", "qrels_changed/test.jsonl"),
            ("top_ranked", "top_ranked", "top_ranked.jsonl"),
        ]
    },
    **{
        (f"jhu-clsp/{short}-instructions-mteb", config): {split: FIXTURES / "followir_mteb" / f"{file}.jsonl"}
        for short in ("robust04", "core17", "news21")
        for config, split, file in [
            ("corpus", "corpus", "corpus"),
            ("queries", "queries", "queries"),
            ("instruction", "instruction", "instruction"),
            ("default", "test", "default"),
            ("top_ranked", "top_ranked", "top_ranked"),
            ("qrel_diff", "qrel_diff", "qrel_diff"),
        ]
    },
    ("xlangai/BRIGHT", "documents"): {"biology": FIXTURES / "bright/documents.jsonl"},
    ("xlangai/BRIGHT", "long_documents"): {"biology": FIXTURES / "bright/long_documents.jsonl"},
    ("xlangai/BRIGHT", "examples"): {"biology": FIXTURES / "bright/examples.jsonl"},
    ("xlangai/BRIGHT", "gpt4_reason"): {"biology": FIXTURES / "bright/examples.jsonl"},
    ("MAIR-Bench/MAIR-Queries", "SciFact"): {"queries": FIXTURES / "mair/SciFact.queries.jsonl"},
    ("MAIR-Bench/MAIR-Docs", "SciFact"): {"docs": FIXTURES / "mair/SciFact.docs.jsonl"},
    ("MAIR-Bench/MAIR-Queries", "CQADupStack"): {
        "android_queries": FIXTURES / "mair/CQADupStack.android_queries.jsonl",
        "gaming_queries": FIXTURES / "mair/CQADupStack.gaming_queries.jsonl",
    },
    ("MAIR-Bench/MAIR-Docs", "CQADupStack"): {
        "android_docs": FIXTURES / "mair/CQADupStack.android_docs.jsonl",
        "gaming_docs": FIXTURES / "mair/CQADupStack.gaming_docs.jsonl",
    },
    ("InF-IR/InF-IR", None): {"train": FIXTURES / "inf_ir_rows.jsonl"},
}


@pytest.fixture
def fake_hub(monkeypatch):
    """Replace the network seam with the fixtures; returns the list of calls made."""
    calls = []

    def fetch(repo, config, split=None, *, revision=None, cache_dir=None):
        calls.append((repo, config, split, revision))
        files = HUB_FILES.get((repo, config))
        if files is None:
            raise DataError(f"no config {config!r}", f"hf://datasets/{repo}")
        if split is None:
            return {name: Rows.from_jsonl(path) for name, path in files.items()}
        name, _, cut = split.partition("[:")
        if name not in files:
            raise DataError(f"no split {name!r}", f"hf://datasets/{repo}/{config}")
        rows = Rows.from_jsonl(files[name])
        if cut:
            rows = Rows(rows.source, rows.rows[: int(cut.rstrip("]"))], rows.lines)
        return {split: rows}

    monkeypatch.setattr(hub, "fetch_hub_rows", fetch)
    return calls


def followir_fixture():
    root = FIXTURES / "followir_hub"
    return hub.followir_from_rows(
        Rows.from_jsonl(root / "corpus.jsonl"),
        Rows.from_jsonl(root / "queries.jsonl"),
        Rows.from_jsonl(root / "qrels_og/test.jsonl"),
        Rows.from_jsonl(root / "qrels_changed/test.jsonl"),
        Rows.from_jsonl(root / "top_ranked.jsonl"),
        name="followir/test",
    )


# ------------------------------------------------------------------------------------------ registry


def test_registry_declares_sources_scores_and_citations():
    assert len(hub.list_benchmarks("bright")) == len(hub.BRIGHT_DOMAINS) == 12
    assert len(hub.list_benchmarks("mair")) == len(hub.MAIR_TASKS) == 126
    scores = {name: hub.get_spec(name).main_score for name in ("followir/robust04", "followir/core17")}
    assert scores == {"followir/robust04": "map_at_1000", "followir/core17": "map_at_1000"}
    assert hub.get_spec("followir/news21").main_score == "ndcg_at_5"
    assert hub.get_spec("bright/biology").main_score == "ndcg_at_10"
    assert hub.get_spec("mair/SciFact").main_score == "ndcg_at_10"
    robust = hub.get_spec("FollowIR/Robust04")  # names are case-insensitive
    assert robust.repo == "jhu-clsp/robust04-instructions" and len(robust.revision) == 40
    assert robust.mteb_repo == "jhu-clsp/robust04-instructions-mteb"
    assert all(spec.citation.startswith("@") for spec in hub.REGISTRY.values())


def test_unknown_name_lists_known_names_and_suggests():
    with pytest.raises(DataError) as caught:
        hub.load_named_benchmark("followir/robust4")
    message = str(caught.value)
    assert "'followir/robust4' is neither an existing path nor a registered benchmark name" in message
    for known in (
        "followir/robust04",
        "followir/core17",
        "followir/news21",
        "bright/<domain>",
        "theoremqa_questions",
    ):
        assert known in message
    assert "mair/<task>" in message and "126" in message
    assert "Did you mean followir/robust04" in message
    with pytest.raises(DataError, match="neither an existing path"):
        formats.load_benchmark("no/such/benchmark-or-dir")


def test_unknown_option_is_named(fake_hub):
    with pytest.raises(
        DataError, match=r"unknown option\(s\) split for followir/core17.*known: cache_dir, layout"
    ):
        hub.load_named_benchmark("followir/core17", split="dev")


# ------------------------------------------------------------------------------------------ FollowIR


def test_followir_rows_keep_og_and_changed_apart():
    bench = followir_fixture()
    assert set(bench.queries) == {"301", "302"}  # 399 has no og judgments and is dropped, as in mteb
    assert bench.qrels_og["301"] == {"FBIS3-1": 2, "FBIS3-2": 1, "LA-3": 0}
    assert bench.qrels_changed["301"] == {"FBIS3-1": 2, "FBIS3-2": 0, "LA-3": 0}  # not swapped
    assert all(isinstance(score, int) for docs in bench.qrels_og.values() for score in docs.values())
    q = bench.queries["301"]
    assert q.text == "ferry disasters"
    assert q.instruction_og.startswith("Relevant documents report ferry accidents or rules")
    assert q.instruction_changed.endswith("rules adopted after them are not relevant.")
    # candidates keep the table's order; the one missing from the corpus is dropped
    assert bench.top_ranked == {"301": ["FBIS3-1", "LA-3", "FBIS3-2"], "302": ["FT-5", "FT-4", "FBIS3-1"]}
    assert bench.has_changed and bench.corpus["FBIS3-2"].title == "Ferry safety"


def test_followir_mteb_layout_gives_the_same_benchmark():
    root = FIXTURES / "followir_mteb"
    mteb = hub.followir_from_mteb_rows(
        Rows.from_jsonl(root / "corpus.jsonl"),
        Rows.from_jsonl(root / "queries.jsonl"),
        Rows.from_jsonl(root / "default.jsonl"),
        Rows.from_jsonl(root / "instruction.jsonl"),
        Rows.from_jsonl(root / "top_ranked.jsonl"),
        name="followir/test",
    )
    original = followir_fixture()
    assert mteb.corpus == original.corpus
    assert mteb.queries == original.queries
    assert mteb.qrels_og == original.qrels_og and mteb.qrels_changed == original.qrels_changed
    assert mteb.top_ranked == original.top_ranked


def test_named_followir_reads_the_registered_tables(fake_hub):
    bench = hub.load_named_benchmark("followir/news21")
    assert bench.name == "followir/news21" and bench.main_score == "ndcg_at_5"
    spec = hub.get_spec("followir/news21")
    assert {call[:2] for call in fake_hub} == {
        (spec.repo, c) for c in ("corpus", "queries", "qrels_og", "qrels_changed", "top_ranked")
    }
    assert {call[3] for call in fake_hub} == {spec.revision}
    assert bench.source == f"hf://datasets/{spec.repo}@{spec.revision}"
    fake_hub.clear()
    mteb = formats.load_benchmark("followir/robust04", layout="mteb")
    assert {call[0] for call in fake_hub} == {"jhu-clsp/robust04-instructions-mteb"}
    assert {call[3] for call in fake_hub} == {hub.get_spec("followir/robust04").mteb_revision}
    assert mteb.qrels_og == bench.qrels_og and mteb.main_score == "map_at_1000"


def test_followir_dir_through_the_datasets_library(tmp_path):
    """The fixture dir carries the hub repo's dataset card (configs, splits, file paths), so reading it with
    ``datasets.load_dataset`` exercises the real download path, column types (float64 scores) included."""
    pytest.importorskip("datasets")
    spec = replace(hub.get_spec("followir/robust04"), repo=str(FIXTURES / "followir_hub"), revision=None)
    bench = hub._load_followir(spec, "original", None, str(tmp_path / "cache"))
    expected = followir_fixture()
    assert bench.queries == expected.queries and bench.corpus == expected.corpus
    assert bench.qrels_og == expected.qrels_og and bench.qrels_changed == expected.qrels_changed
    assert bench.top_ranked == expected.top_ranked


def test_fetch_hub_rows_converts_and_wraps_errors(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def fake_load(repo, config, split=None, revision=None, cache_dir=None):
        if repo == "offline/repo":
            raise ConnectionError("Couldn't reach 'offline/repo' on the Hub")
        table = datasets.Dataset.from_list([{"_id": "1", "text": "a"}, {"_id": "2", "text": "b"}])
        return table if split else datasets.DatasetDict({"corpus": table})

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    tables = hub.fetch_hub_rows("some/repo", "corpus")
    assert list(tables) == ["corpus"] and tables["corpus"].rows[1] == {"_id": "2", "text": "b"}
    assert tables["corpus"].source == "hf://datasets/some/repo/corpus/corpus"
    with pytest.raises(DataError) as caught:
        hub.fetch_hub_rows("offline/repo", "queries", revision="abc")
    assert "hf://datasets/offline/repo/queries" in str(caught.value)
    assert "ConnectionError" in str(caught.value) and "HF_HUB_OFFLINE" in str(caught.value)


# ------------------------------------------------------------------------------------------ BRIGHT


def test_bright_rows_gold_ids_excluded_ids_and_instruction():
    docs = Rows.from_jsonl(FIXTURES / "bright/documents.jsonl")
    examples = Rows.from_jsonl(FIXTURES / "bright/examples.jsonl")
    bench = hub.bright_from_rows(docs, examples, domain="biology")
    assert bench.name == "bright/biology" and bench.main_score == "ndcg_at_10"
    assert bench.qrels_og == {
        "0": {"insects_light/Phototaxis_0.txt": 1, "insects_light/Phototaxis_1.txt": 1},
        "1": {"plants_green/Chlorophyll_0.txt": 1, "plants_green/Chlorophyll_1.txt": 1},
    }
    assert bench.excluded == {"1": ["plants_green/Answer_copy.txt"]}  # "N/A" means none
    assert bench.qrels_changed is None and not bench.has_changed
    assert (
        bench.queries["0"].instruction_og
        == "Given a biology post, retrieve relevant passages that help answer the post"
    )
    assert bench.corpus["plants_green/Chlorophyll_0.txt"].text.startswith("Chlorophyll absorbs")
    plain = hub.bright_from_rows(docs, examples, domain="biology", instruction="")
    assert plain.queries["0"].instruction_og == ""
    long = hub.bright_from_rows(
        Rows.from_jsonl(FIXTURES / "bright/long_documents.jsonl"),
        examples,
        domain="biology",
        long_context=True,
    )
    assert long.qrels_og["1"] == {"plants_green/Chlorophyll.txt": 1} and long.main_score == "recall_at_1"
    assert "relevant documents" in long.queries["1"].instruction_og
    assert hub.bright_instruction("theoremqa_theorems").endswith(
        "relevant theorems that help answer the problem"
    )


def test_named_bright_reads_the_domain_split(fake_hub):
    bench = hub.load_named_benchmark("bright/biology")
    revision = hub.get_spec("bright/biology").revision
    assert ("xlangai/BRIGHT", "documents", "biology", revision) in fake_hub
    assert ("xlangai/BRIGHT", "examples", "biology", revision) in fake_hub
    assert len(bench.corpus) == 6 and bench.excluded == {"1": ["plants_green/Answer_copy.txt"]}
    long = hub.load_named_benchmark("bright/biology", long_context=True, instruction="Find the answer.")
    assert long.name == "bright/biology-long" and len(long.corpus) == 3
    assert long.queries["0"].instruction_og == "Find the answer."
    reasoned = hub.load_named_benchmark("bright/biology", reasoning="gpt4")
    assert (
        reasoned.name == "bright/biology-gpt4"
        and ("xlangai/BRIGHT", "gpt4_reason", "biology", revision) in fake_hub
    )
    with pytest.raises(DataError, match="BRIGHT leetcode has no long documents"):
        hub.load_named_benchmark("bright/leetcode", long_context=True)


def test_bright_topics_file_with_trec_qrels():
    bench = hub.load_bright_topics(
        FIXTURES / "bright/topics.bright-biology-original.jsonl.gz",
        qrels=FIXTURES / "bright/qrels.bright-biology.txt",
    )
    assert bench.name == "bright/biology" and bench.corpus == {}
    assert bench.queries["1"].instruction_og.startswith("Given a biology post")
    assert bench.qrels_og["1"] == {"plants_green/Chlorophyll_0.txt": 1, "plants_green/Chlorophyll_1.txt": 1}
    assert bench.excluded == {"1": ["plants_green/Answer_copy.txt"]}
    with_docs = hub.load_bright_topics(
        FIXTURES / "bright/topics.bright-biology-original.jsonl.gz",
        documents=FIXTURES / "bright/documents.jsonl",
    )
    assert len(with_docs.corpus) == 6 and with_docs.qrels_og == bench.qrels_og


def test_bright_topics_real_sample():
    root = DATA_DIR / "raw" / "bright-topics"
    if not root.exists():
        pytest.skip(f"shared data not found at {root} (set INFEMBED_DATA_DIR)")
    topics = root / "topics.bright-biology-original.jsonl.gz"
    bench = hub.load_bright_topics(topics, qrels=root / "qrels.bright-biology.txt")
    assert len(bench.queries) == 103
    assert sum(len(d) for d in bench.qrels_og.values()) == 372
    assert bench.qrels_og == hub.load_bright_topics(topics).qrels_og  # TREC qrels agree with gold_ids
    assert bench.excluded == {}  # biology lists no exclusions ("N/A")


# ------------------------------------------------------------------------------------------ MAIR


def test_mair_rows_keep_per_query_instructions_and_graded_labels():
    bench = hub.mair_from_rows(
        Rows.from_jsonl(FIXTURES / "mair/SciFact.queries.jsonl"),
        Rows.from_jsonl(FIXTURES / "mair/SciFact.docs.jsonl"),
        name="mair/SciFact",
    )
    assert bench.main_score == "ndcg_at_10" and bench.qrels_changed is None
    assert bench.qrels_og == {"sf-1": {"doc-10": 1}, "sf-2": {"doc-11": 1, "doc-12": 2}}
    assert bench.queries["sf-1"].instruction_og.startswith("Given a scientific claim")
    assert bench.queries["sf-1"].text == "Vitamin D deficiency raises the risk of fractures."
    assert len(bench.corpus) == 4 and bench.corpus["doc-13"].title == ""


def test_named_mair_single_and_multi_split(fake_hub):
    bench = hub.load_named_benchmark("mair/SciFact")
    assert ("MAIR-Bench/MAIR-Docs", "SciFact", "docs", None) in fake_hub
    assert bench.name == "mair/SciFact" and len(bench.queries) == 2
    with pytest.raises(DataError) as caught:
        hub.load_named_benchmark("mair/CQADupStack")
    assert "mair/CQADupStack/android_queries, mair/CQADupStack/gaming_queries" in str(caught.value)
    gaming = hub.load_named_benchmark("mair/CQADupStack/gaming_queries")
    assert ("MAIR-Bench/MAIR-Docs", "CQADupStack", "gaming_docs", None) in fake_hub
    assert gaming.qrels_og == {"201": {"9": 1}, "202": {"10": 1}}  # integer ids become strings
    assert set(gaming.corpus) == {"9", "10", "11"}
    assert hub.load_named_benchmark("mair/CQADupStack", split="android_queries").queries["101"].text == (
        "How do I root my phone?"
    )
    splits = hub.load_mair_task("CQADupStack")
    assert {s: len(b.queries) for s, b in splits.items()} == {"android_queries": 1, "gaming_queries": 2}


# ------------------------------------------------------------------------------------------ InF-IR


def test_inf_ir_rows_from_the_hub(fake_hub):
    rows = hub.load_inf_ir("InF-IR/InF-IR")
    assert ("InF-IR/InF-IR", None, "train", None) in fake_hub
    assert len(rows) == 2 and rows[0].id == "r1" and rows[0].doc_id == "p1"
    assert rows[1].document_positive == "Adult house cats sleep about 15 hours a day."  # from `document`
    assert [p.role for p in rows[1].pairs()] == ["pos", "inst_neg", "query_neg"]
    first = hub.load_inf_ir("InF-IR/InF-IR", limit=1)
    assert ("InF-IR/InF-IR", None, "train[:1]", None) in fake_hub and len(first) == 1


def test_inf_ir_older_field_names_and_local_paths():
    (row,) = hub.triplets_from_rows(Rows.from_jsonl(FIXTURES / "inf_ir_fewshot_rows.jsonl"))
    assert row.query_positive == "how tall is mount everest" and row.query_negative == "how tall is k2"
    assert row.document_positive.startswith("Mount Everest is 8,849")
    local = hub.load_inf_ir(FIXTURES / "inf_ir_rows.jsonl")
    assert [r.query_positive for r in local] == ["what do bees eat", "how long do cats sleep"]
    with pytest.raises(DataError, match="no such file or directory"):
        hub.load_inf_ir(FIXTURES / "missing.jsonl")


def test_inf_ir_real_sample():
    path = DATA_DIR / "inf-ir-msmarco-sample" / "train.jsonl"
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (set INFEMBED_DATA_DIR)")
    rows = hub.load_inf_ir(path)
    assert len(rows) == 471
    assert all(r.document_positive and r.hard_negative_document_2 for r in rows)
    assert len(hub.load_inf_ir(path, limit=5)) == 5


# ------------------------------------------------------------------------------------------ FlagEmbedding


def test_flagembedding_rows_become_positive_pairs():
    pairs = hub.read_flagembedding_pairs(FIXTURES / "flagembedding_rows.jsonl")
    assert [(p.query, p.role) for p in pairs] == [
        ("what is the capital of australia", "pos"),
        ("boiling point of water", "pos"),
        ("boiling point of water", "pos"),
    ]
    assert (
        pairs[0].instruction == "Given a web search query, retrieve relevant passages that answer the query."
    )
    assert (
        pairs[2].passage == "At 1 atm, water boils at 212 F."
        and pairs[2].row_id == "flagembedding_rows.jsonl:2"
    )
    real = DATA_DIR / "raw" / "flagembedding-example-msmarco.jsonl"
    if real.exists():
        assert len(hub.read_flagembedding_pairs(real)) >= 10
