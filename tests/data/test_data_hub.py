"""Hub benchmarks and training data (infembed.data.benchmarks, infembed.data.inf_ir), offline.

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

from infembed.data import benchmarks, hub, inf_ir
from infembed.data.benchmarks import bright, followir, local, mair, registry
from infembed.data.errors import DataError
from infembed.data.rows import Rows

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
        (repo, config): {split: FIXTURES / "followir_mteb" / f"{file}.jsonl"}
        for short in ("robust04", "core17", "news21")
        for repo in (f"jhu-clsp/{short}-instructions-mteb", f"mteb/{short.title()}InstructionRetrieval")
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
    # MAIR's real split names: one query split per CQADupStack forum, each with its doc split
    ("MAIR-Bench/MAIR-Queries", "CQADupStack"): {
        f"CQADupStack_{forum}_queries": FIXTURES / f"mair/CQADupStack.CQADupStack_{forum}_queries.jsonl"
        for forum in ("Android", "Gaming")
    },
    ("MAIR-Bench/MAIR-Docs", "CQADupStack"): {
        f"CQADupStack_{forum}_docs": FIXTURES / f"mair/CQADupStack.CQADupStack_{forum}_docs.jsonl"
        for forum in ("Android", "Gaming")
    },
    # as on the hub: no `train` split; `msmarco` is the one the reference code reads
    ("InF-IR/InF-IR", None): {
        "msmarco": FIXTURES / "inf_ir_hub/msmarco.jsonl",
        "other": FIXTURES / "inf_ir_hub/other.jsonl",
    },
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
    return followir.followir_from_rows(
        Rows.from_jsonl(root / "corpus.jsonl"),
        Rows.from_jsonl(root / "queries.jsonl"),
        Rows.from_jsonl(root / "qrels_og/test.jsonl"),
        Rows.from_jsonl(root / "qrels_changed/test.jsonl"),
        Rows.from_jsonl(root / "top_ranked.jsonl"),
        name="followir/test",
    )


# ------------------------------------------------------------------------------------------ registry


def test_registry_declares_sources_scores_and_citations():
    assert len(registry.list_benchmarks("bright")) == len(registry.BRIGHT_DOMAINS) == 12
    assert len(registry.list_benchmarks("mair")) == len(registry.MAIR_TASKS) == 126
    scores = {name: registry.get_spec(name).main_score for name in ("followir/robust04", "followir/core17")}
    assert scores == {"followir/robust04": "map_at_1000", "followir/core17": "map_at_1000"}
    assert registry.get_spec("followir/news21").main_score == "ndcg_at_5"
    assert registry.get_spec("bright/biology").main_score == "ndcg_at_10"
    assert registry.get_spec("mair/SciFact").main_score == "ndcg_at_10"
    robust = registry.get_spec("FollowIR/Robust04")  # names are case-insensitive
    assert robust.repo == "jhu-clsp/robust04-instructions" and len(robust.revision) == 40
    # mteb 2 reads mteb/<Task> now; the older jhu-clsp -mteb copy stays readable by name
    assert robust.mteb_repo == "mteb/Robust04InstructionRetrieval" and len(robust.mteb_revision) == 40
    assert [repo for repo, _ in robust.mteb_copies] == [
        "mteb/Robust04InstructionRetrieval",
        "jhu-clsp/robust04-instructions-mteb",
    ]
    assert all(spec.citation.startswith("@") for spec in registry.REGISTRY.values())
    # FollowIR's headline metric is its paper's choice, not mteb's main score (p-MRR)
    assert {
        registry.get_spec(f"followir/{s}").main_score_source for s in ("robust04", "core17", "news21")
    } == {"FollowIR paper (mteb's main score is p-MRR)"}
    assert all(spec.main_score_source for spec in registry.REGISTRY.values())


def test_unknown_name_lists_known_names_and_suggests():
    with pytest.raises(DataError) as caught:
        benchmarks.load_named_benchmark("followir/robust4")
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
        benchmarks.load_benchmark("no/such/benchmark-or-dir")


def test_unknown_option_is_named(fake_hub):
    with pytest.raises(
        DataError, match=r"unknown option\(s\) split for followir/core17.*known: cache_dir, layout"
    ):
        benchmarks.load_named_benchmark("followir/core17", split="dev")


# ------------------------------------------------------------------------------------------ FollowIR


def test_followir_rows_keep_og_and_changed_apart():
    bench = followir_fixture()
    assert set(bench.queries) == {"301", "302"}  # 399 has no og judgments and is dropped, as in mteb
    assert bench.qrels_og["301"] == {"FBIS3-1": 2, "FBIS3-2": 1, "LA-3": 0}
    assert bench.qrels_changed["301"] == {"FBIS3-1": 1, "FBIS3-2": 0, "LA-3": 0}  # not swapped
    assert bench.changed_documents is None  # the original layout has no qrel_diff: p-MRR recomputes
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
    mteb = followir.followir_from_mteb_rows(
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


def test_mteb_layout_keeps_the_data_sets_own_changed_documents():
    """mteb 2 scores p-MRR over the data set's qrel_diff; recomputing "relevant under og, not under changed"
    leaves out FBIS3-1 (judged 2, then 1: still relevant). The loader keeps qrel_diff and p-MRR uses it."""
    from infembed.evaluate.metrics import changed_documents, p_mrr
    from infembed.evaluate.retrievers import BM25Retriever
    from infembed.evaluate.runner import evaluate

    root = FIXTURES / "followir_mteb"
    bench = followir.followir_from_mteb_rows(
        *(Rows.from_jsonl(root / f"{t}.jsonl") for t in ("corpus", "queries", "default", "instruction")),
        Rows.from_jsonl(root / "top_ranked.jsonl"),
        Rows.from_jsonl(root / "qrel_diff.jsonl"),
    )
    assert bench.changed_documents == {"301": ["FBIS3-1", "FBIS3-2"], "302": ["FT-5"]}
    assert changed_documents(bench.qrels_og, bench.qrels_changed)["301"] == ["FBIS3-2"]
    result = evaluate(bench, BM25Retriever())
    assert set(result["per_query"]["301"]["changed_documents"]) == {"FBIS3-1", "FBIS3-2"}
    run_og = {"301": {"FBIS3-1": 3.0, "FBIS3-2": 2.0, "LA-3": 1.0}}
    run_changed = {"301": {"FBIS3-1": 2.0, "FBIS3-2": 1.0, "LA-3": 3.0}}
    recomputed = p_mrr(run_og, run_changed, bench.qrels_og, bench.qrels_changed)
    given = p_mrr(run_og, run_changed, bench.qrels_og, bench.qrels_changed, bench.changed_documents)
    assert recomputed.value == pytest.approx(1 - 2 / 3, abs=1e-12)  # FBIS3-2 alone: rank 2 -> 3
    assert given.value == pytest.approx(((1 - 1 / 2) + (1 - 2 / 3)) / 2, abs=1e-12)  # and FBIS3-1: 1 -> 2


def test_saved_benchmark_keeps_changed_documents_and_score_source(fake_hub, tmp_path):
    bench = benchmarks.load_named_benchmark("followir/core17", layout="mteb")
    assert bench.changed_documents is not None and bench.main_score_source.startswith("FollowIR paper")
    local.save_benchmark(bench, tmp_path / "core17")
    again = benchmarks.load_benchmark(tmp_path / "core17")
    assert again.changed_documents == bench.changed_documents
    assert again.main_score_source == bench.main_score_source
    bench.changed_documents = None  # saving one without its own list removes a stale one
    local.save_benchmark(bench, tmp_path / "core17")
    assert benchmarks.load_benchmark(tmp_path / "core17").changed_documents is None


def test_followir_hub_repo_names_are_names_too(fake_hub):
    """mteb's copies moved from jhu-clsp/<x>-instructions-mteb to mteb/<X>InstructionRetrieval: both names,
    and the original repo's, read that repo at the revision mteb pins for it."""
    spec = registry.get_spec("followir/core17")
    for name, (repo, revision) in [
        ("mteb/Core17InstructionRetrieval", spec.mteb_copies[0]),
        ("jhu-clsp/core17-instructions-mteb", spec.mteb_copies[1]),
        ("jhu-clsp/core17-instructions", (spec.repo, spec.revision)),
    ]:
        fake_hub.clear()
        bench = benchmarks.load_benchmark(name)
        assert {call[0] for call in fake_hub} == {repo} and {call[3] for call in fake_hub} == {revision}
        assert bench.name == "followir/core17" and bench.main_score == "map_at_1000"
        assert bench.main_score_source == "FollowIR paper (mteb's main score is p-MRR)"
    fake_hub.clear()
    # the layout's default is mteb's copy now
    benchmarks.load_named_benchmark("followir/core17", layout="mteb")
    assert {call[0] for call in fake_hub} == {"mteb/Core17InstructionRetrieval"}
    with pytest.raises(DataError, match="is in the 'mteb' layout"):
        benchmarks.load_named_benchmark("mteb/Core17InstructionRetrieval", layout="original")


def test_named_followir_reads_the_registered_tables(fake_hub):
    bench = benchmarks.load_named_benchmark("followir/news21")
    assert bench.name == "followir/news21" and bench.main_score == "ndcg_at_5"
    spec = registry.get_spec("followir/news21")
    assert {call[:2] for call in fake_hub} == {
        (spec.repo, c) for c in ("corpus", "queries", "qrels_og", "qrels_changed", "top_ranked")
    }
    assert {call[3] for call in fake_hub} == {spec.revision}
    assert bench.source == f"hf://datasets/{spec.repo}@{spec.revision}"
    fake_hub.clear()
    mteb = benchmarks.load_benchmark("followir/robust04", layout="mteb")
    assert {call[0] for call in fake_hub} == {"mteb/Robust04InstructionRetrieval"}
    assert {call[3] for call in fake_hub} == {registry.get_spec("followir/robust04").mteb_revision}
    assert mteb.qrels_og == bench.qrels_og and mteb.main_score == "map_at_1000"


def test_followir_dir_through_the_datasets_library(tmp_path):
    """The fixture dir carries the hub repo's dataset card (configs, splits, file paths), so reading it with
    ``datasets.load_dataset`` exercises the real download path, column types (float64 scores) included."""
    pytest.importorskip("datasets")
    spec = replace(registry.get_spec("followir/robust04"), repo=str(FIXTURES / "followir_hub"), revision=None)
    bench = followir.from_hub(spec, "original", None, str(tmp_path / "cache"))
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
    bench = bright.bright_from_rows(docs, examples, domain="biology")
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
    plain = bright.bright_from_rows(docs, examples, domain="biology", instruction="")
    assert plain.queries["0"].instruction_og == ""
    long = bright.bright_from_rows(
        Rows.from_jsonl(FIXTURES / "bright/long_documents.jsonl"),
        examples,
        domain="biology",
        long_context=True,
    )
    assert long.qrels_og["1"] == {"plants_green/Chlorophyll.txt": 1} and long.main_score == "recall_at_1"
    assert "relevant documents" in long.queries["1"].instruction_og
    assert bright.bright_instruction("theoremqa_theorems").endswith(
        "relevant theorems that help answer the problem"
    )


def test_named_bright_reads_the_domain_split(fake_hub):
    bench = benchmarks.load_named_benchmark("bright/biology")
    revision = registry.get_spec("bright/biology").revision
    assert ("xlangai/BRIGHT", "documents", "biology", revision) in fake_hub
    assert ("xlangai/BRIGHT", "examples", "biology", revision) in fake_hub
    assert len(bench.corpus) == 6 and bench.excluded == {"1": ["plants_green/Answer_copy.txt"]}
    long = benchmarks.load_named_benchmark(
        "bright/biology", long_context=True, instruction="Find the answer."
    )
    assert long.name == "bright/biology-long" and len(long.corpus) == 3
    assert long.queries["0"].instruction_og == "Find the answer."
    reasoned = benchmarks.load_named_benchmark("bright/biology", reasoning="gpt4")
    assert (
        reasoned.name == "bright/biology-gpt4"
        and ("xlangai/BRIGHT", "gpt4_reason", "biology", revision) in fake_hub
    )
    with pytest.raises(DataError, match="BRIGHT leetcode has no long documents"):
        benchmarks.load_named_benchmark("bright/leetcode", long_context=True)


def test_bright_topics_file_with_trec_qrels():
    bench = bright.load_bright_topics(
        FIXTURES / "bright/topics.bright-biology-original.jsonl.gz",
        qrels=FIXTURES / "bright/qrels.bright-biology.txt",
    )
    assert bench.name == "bright/biology" and bench.corpus == {}
    assert bench.queries["1"].instruction_og.startswith("Given a biology post")
    assert bench.qrels_og["1"] == {"plants_green/Chlorophyll_0.txt": 1, "plants_green/Chlorophyll_1.txt": 1}
    assert bench.excluded == {"1": ["plants_green/Answer_copy.txt"]}
    assert bench.main_score_source == ""  # a local file says nothing about whose choice the score is
    with_docs = bright.load_bright_topics(
        FIXTURES / "bright/topics.bright-biology-original.jsonl.gz",
        documents=FIXTURES / "bright/documents.jsonl",
    )
    assert len(with_docs.corpus) == 6 and with_docs.qrels_og == bench.qrels_og


@pytest.mark.parametrize(
    ("anserini_name", "domain"),
    [
        ("earth-science", "earth_science"),
        ("sustainable-living", "sustainable_living"),
        ("theoremqa-questions", "theoremqa_questions"),
        ("theoremqa-theorems", "theoremqa_theorems"),
        ("biology", "biology"),
        ("earth_science", "earth_science"),  # BRIGHT's own spelling too
    ],
)
def test_bright_topics_domain_from_anserini_file_names(tmp_path, anserini_name, domain):
    """anserini spells multi-word domains with hyphens; each must get its own domain's instruction."""
    path = tmp_path / f"topics.bright-{anserini_name}-original.jsonl.gz"
    path.write_bytes((FIXTURES / "bright/topics.bright-biology-original.jsonl.gz").read_bytes())
    bench = bright.load_bright_topics(path)
    assert bench.name == f"bright/{domain}"
    assert bench.queries["1"].instruction_og == bright.bright_instruction(domain)


def test_bright_topics_unknown_domain_is_an_error(tmp_path):
    sample = (FIXTURES / "bright/topics.bright-biology-original.jsonl.gz").read_bytes()
    for name in ("topics.bright-cooking-original.jsonl.gz", "my-topics.jsonl.gz"):
        (tmp_path / name).write_bytes(sample)
        with pytest.raises(DataError, match="domain") as caught:
            bright.load_bright_topics(tmp_path / name)
        assert name in str(caught.value) and "earth_science" in str(caught.value)
    with pytest.raises(DataError, match="unknown BRIGHT domain 'cooking'"):
        bright.load_bright_topics(tmp_path / "my-topics.jsonl.gz", domain="cooking")
    assert bright.load_bright_topics(tmp_path / "my-topics.jsonl.gz", domain="earth-science").name == (
        "bright/earth_science"
    )


def test_bright_topics_real_sample():
    root = DATA_DIR / "raw" / "bright-topics"
    if not root.exists():
        pytest.skip(f"shared data not found at {root} (set INFEMBED_DATA_DIR)")
    topics = root / "topics.bright-biology-original.jsonl.gz"
    bench = bright.load_bright_topics(topics, qrels=root / "qrels.bright-biology.txt")
    assert len(bench.queries) == 103
    assert sum(len(d) for d in bench.qrels_og.values()) == 372
    assert bench.qrels_og == bright.load_bright_topics(topics).qrels_og  # TREC qrels agree with gold_ids
    assert bench.excluded == {}  # biology lists no exclusions ("N/A")


# ------------------------------------------------------------------------------------------ MAIR


def test_mair_rows_keep_per_query_instructions_and_graded_labels():
    bench = mair.mair_from_rows(
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
    bench = benchmarks.load_named_benchmark("mair/SciFact")
    assert ("MAIR-Bench/MAIR-Docs", "SciFact", "docs", None) in fake_hub
    assert bench.name == "mair/SciFact" and len(bench.queries) == 2
    assert bench.main_score_source == "MAIR paper"
    with pytest.raises(DataError) as caught:
        benchmarks.load_named_benchmark("mair/CQADupStack")
    assert "mair/CQADupStack/CQADupStack_Android_queries, mair/CQADupStack/CQADupStack_Gaming_queries" in str(
        caught.value
    )
    gaming = benchmarks.load_named_benchmark("mair/CQADupStack/CQADupStack_Gaming_queries")
    assert ("MAIR-Bench/MAIR-Docs", "CQADupStack", "CQADupStack_Gaming_docs", None) in fake_hub
    assert gaming.name == "mair/CQADupStack/CQADupStack_Gaming_queries"
    assert gaming.qrels_og == {"201": {"9": 1}, "202": {"10": 1}}  # integer ids become strings
    assert set(gaming.corpus) == {"9", "10", "11"}
    android = benchmarks.load_named_benchmark("mair/cqadupstack/cqadupstack_android_queries")  # any case
    assert android.queries["101"].text == "How do I root my phone?"
    splits = mair.load_mair_task("CQADupStack")
    assert {s: len(b.queries) for s, b in splits.items()} == {
        "CQADupStack_Android_queries": 1,
        "CQADupStack_Gaming_queries": 2,
    }


# ------------------------------------------------------------------------------------------ InF-IR


def test_inf_ir_rows_from_the_hub(fake_hub, caplog):
    """InF-IR/InF-IR has no `train` split: NAME:SPLIT reads one split, a bare name every split (logged)."""
    rows = inf_ir.load_inf_ir("InF-IR/InF-IR:msmarco")
    assert ("InF-IR/InF-IR", None, "msmarco", None) in fake_hub
    assert len(rows) == 2 and rows[0].id == "r1" and rows[0].doc_id == "p1"
    assert rows[1].document_positive == "Adult house cats sleep about 15 hours a day."  # from `document`
    assert [p.role for p in rows[1].pairs()] == ["pos", "inst_neg", "query_neg"]
    first = inf_ir.load_inf_ir("InF-IR/InF-IR:msmarco", limit=1)
    assert ("InF-IR/InF-IR", None, "msmarco[:1]", None) in fake_hub and len(first) == 1
    fake_hub.clear()
    with caplog.at_level("WARNING", logger="infembed.data.inf_ir"):
        every = inf_ir.load_inf_ir("InF-IR/InF-IR")
    assert fake_hub == [("InF-IR/InF-IR", None, None, None)]
    assert [r.id for r in every] == ["r1", None, "o1"]
    assert "msmarco (2 rows), other (1 rows)" in caplog.text
    assert [r.id for r in inf_ir.load_inf_ir("InF-IR/InF-IR", limit=2)] == ["r1", None]
    with pytest.raises(DataError, match="no split 'train'"):
        inf_ir.load_inf_ir("InF-IR/InF-IR:train")


def test_train_data_hub_name_with_and_without_split(fake_hub):
    from infembed.train.inputs import load_rows

    assert [r.id for r in load_rows(["InF-IR/InF-IR:other"])] == ["o1"]
    assert len(load_rows(["InF-IR/InF-IR"])) == 3


def test_inf_ir_splits_through_the_datasets_library(tmp_path, caplog):
    """The fixture dir has the hub repo's layout (no `train` split), read by the real ``datasets``."""
    pytest.importorskip("datasets")
    root = FIXTURES / "inf_ir_hub"
    with caplog.at_level("WARNING", logger="infembed.data.inf_ir"):
        every = inf_ir.triplets_from_hub(str(root), None, None)
    assert [r.id for r in every] == ["r1", None, "o1"] and "msmarco (2 rows), other (1 rows)" in caplog.text
    assert [r.id for r in inf_ir.triplets_from_hub(str(root), "other", None)] == ["o1"]
    assert len(inf_ir.triplets_from_hub(str(root), "msmarco", 1)) == 1


def test_inf_ir_older_field_names_and_local_paths():
    (row,) = inf_ir.triplets_from_rows(Rows.from_jsonl(FIXTURES / "inf_ir_fewshot_rows.jsonl"))
    assert row.query_positive == "how tall is mount everest" and row.query_negative == "how tall is k2"
    assert row.document_positive.startswith("Mount Everest is 8,849")
    local = inf_ir.load_inf_ir(FIXTURES / "inf_ir_rows.jsonl")
    assert [r.query_positive for r in local] == ["what do bees eat", "how long do cats sleep"]
    with pytest.raises(DataError, match="no such file or directory"):
        inf_ir.load_inf_ir(FIXTURES / "missing.jsonl")


def test_inf_ir_real_sample():
    path = DATA_DIR / "inf-ir-msmarco-sample" / "train.jsonl"
    if not path.exists():
        pytest.skip(f"shared data not found at {path} (set INFEMBED_DATA_DIR)")
    rows = inf_ir.load_inf_ir(path)
    assert len(rows) == 471
    assert all(r.document_positive and r.hard_negative_document_2 for r in rows)
    assert len(inf_ir.load_inf_ir(path, limit=5)) == 5
