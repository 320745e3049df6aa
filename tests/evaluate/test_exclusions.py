"""Exclusion-aware scoring (infembed.exclusions) for every retriever.

Invariants: an instruction that excludes nothing gives exactly the plain scores; the penalty equals a direct
per-document computation of the documented formula; a document that matches an excluded aspect moves down
for BM25 and for a dense model; a document that matches the positive requirement stated beside the exclusion
at least as well is spared; fitted settings never score below exclusion-off on their own training rows; on the
adversarial dev benchmark BM25 with the rules splitter follows exclusions (p-MRR >= +40) at unchanged og MAP.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from test_eval_cli import infembed
from tiny_benchmark import write_benchmark

from infembed.data.benchmarks import load_benchmark
from infembed.data.inf_ir import read_triplets
from infembed.data.records import Document
from infembed.evaluate.retrievers import BM25Retriever, DenseRetriever
from infembed.evaluate.runner import evaluate
from infembed.exclusions import ExclusionPlan, ExclusionSettings, apply, fit, penalised_scores
from infembed.instructions import Instruction


def _reference(keep, aspects, guards, settings, pool):
    """The module doc's formula, one document at a time (range scale: (s - median) / (max - median))."""

    def scaled(values):
        sample = sorted(values[i] for i in pool)
        n = len(sample)
        median = sample[n // 2] if n % 2 else (sample[n // 2 - 1] + sample[n // 2]) / 2
        spread = max(sample) - median
        return None if spread <= 1e-12 else [(v - median) / spread for v in values], spread

    _, keep_spread = scaled(keep)
    out = []
    for d in range(len(keep)):
        worst = 0.0
        for j, aspect in enumerate(aspects):
            z, _ = scaled(aspect)
            if z is None:
                continue
            floor = settings.threshold
            if guards[j] is not None:
                zg, _ = scaled(guards[j])
                if zg is not None:
                    floor = max(settings.threshold, zg[d] + settings.margin)
            worst = max(worst, z[d] - floor)
        out.append(keep[d] - settings.alpha * keep_spread * worst)
    return np.array(out)


@pytest.mark.parametrize("seed", range(20))
def test_penalty_equals_the_formula_document_by_document(seed):
    rng = np.random.default_rng(seed)
    n_docs = int(rng.integers(5, 40))
    keep = rng.normal(size=n_docs)
    aspects = rng.normal(size=(int(rng.integers(1, 4)), n_docs))
    guards = [rng.normal(size=n_docs) if rng.random() < 0.5 else None for _ in aspects]
    settings = ExclusionSettings(alpha=float(rng.uniform(0, 5)), threshold=float(rng.uniform(0, 1)),
                                 margin=float(rng.uniform(0, 1)), pool=int(rng.integers(2, 60)))
    pool = np.argsort(-keep, kind="stable")[: min(settings.pool, n_docs)]
    got = penalised_scores(keep, aspects, settings, pool, guards)
    want = _reference(list(keep), [list(a) for a in aspects], [None if g is None else list(g) for g in guards],
                      settings, list(pool))
    scale = float(np.abs(want).max()) + 1.0
    assert np.abs(got - want).max() <= 1e-9 * scale


def test_no_exclusion_gives_the_plain_scores_exactly():
    keep = np.array([3.0, 1.0, 2.0])
    assert penalised_scores(keep, np.zeros((0, 3)), ExclusionSettings()) is keep
    plan = ExclusionPlan([Instruction("Find X.")], [], [])
    assert np.array_equal(apply(keep[None], np.zeros((0, 3)), plan, ExclusionSettings()), keep[None])


def test_a_document_matching_the_positive_requirement_is_spared():
    # d0 matches the excluded aspect best, d1 matches it nearly as well but matches the guard (the positive
    # requirement of the same sentence) even better: only d0 is pushed down
    keep = np.array([1.0, 1.0, 0.5, 0.2, 0.1])
    aspect = np.array([[1.0, 0.9, 0.0, 0.0, 0.0]])
    guard = np.array([0.0, 1.0, 0.0, 0.0, 0.0])
    settings = ExclusionSettings(alpha=2.0, threshold=0.5, margin=0.0)
    scores = penalised_scores(keep, aspect, settings, guards=[guard])
    assert scores[0] < keep[0] and scores[1] == keep[1]
    assert list(np.argsort(-scores, kind="stable"))[0] == 1


def test_bad_settings_are_refused():
    for bad in (dict(alpha=-1.0), dict(threshold=float("nan")), dict(pool=1), dict(splitter="regex"), dict(scale="x")):
        with pytest.raises(ValueError):
            ExclusionSettings(**bad)


CORPUS = {
    "d1": Document("Electric cars", "Battery electric cars and their charging networks."),
    "d2": Document("Hybrid cars", "Hybrid cars combine a petrol engine with an electric motor."),
    "d3": Document("Diesel cars", "Diesel cars and their fuel economy on long trips."),
    "d4": Document("Bicycles", "Commuting by bicycle in cities."),
    "d5": Document("Electric car batteries", "How long electric car batteries last and what they cost."),
}


@pytest.mark.parametrize("kind", ["bm25", "dense"])
def test_excluded_documents_move_down_and_plain_instructions_do_not_change(kind, minilm):
    retriever = BM25Retriever(exclusions="rules") if kind == "bm25" else DenseRetriever(minilm, cache=False, show_progress=False, exclusions="rules")
    plain = BM25Retriever(exclusions="off") if kind == "bm25" else DenseRetriever(minilm, cache=False, show_progress=False)
    for r in (retriever, plain):
        r.index(CORPUS)
    qids, queries = ["q1", "q2"], ["cars and their fuel", "cars and their fuel"]
    instructions = ["Documents about electric cars are not relevant.", "Any kind of car is relevant."]
    on = retriever.retrieve(qids, queries, instructions, top_k=5)
    off = plain.retrieve(qids, queries, instructions, top_k=5)
    # nothing excluded: the plain scores. Up to float noise: the exclusion-aware retriever may encode q2 in a
    # batch of other lengths, and a cosine's last bits then depend on the CPU's kernels (never exact equality)
    assert on["q2"].keys() == off["q2"].keys()
    assert max(abs(on["q2"][d] - off["q2"][d]) for d in off["q2"]) <= 1e-5

    def rank(run, doc):
        return sorted(run, key=lambda d: -run[d]).index(doc) + 1

    for doc in ("d1", "d5"):
        assert rank(on["q1"], doc) >= rank(off["q1"], doc)
    assert rank(on["q1"], "d1") > 2 and rank(on["q1"], "d5") > 2


def test_reranking_standardises_over_each_querys_candidates():
    retriever = BM25Retriever(exclusions="rules")
    retriever.index(CORPUS)
    run = retriever.retrieve(["q"], ["cars"], ["Electric cars are not relevant."], candidates={"q": ["d1", "d2", "d3"]})
    assert set(run["q"]) == {"d1", "d2", "d3"}
    assert max(run["q"], key=run["q"].get) != "d1"


def test_bm25_on_the_adversarial_dev_benchmark(data_dir):
    results = {}
    for name in ("followir-cranfield", "followir-cranfield-excl"):
        bench = load_benchmark(data_dir / name)
        for mode in ("off", "rules"):
            results[name, mode] = evaluate(bench, BM25Retriever(exclusions=mode))
    excl_off, excl_on = results["followir-cranfield-excl", "off"], results["followir-cranfield-excl", "rules"]
    assert excl_off["p-MRR"] < -0.3 and excl_on["p-MRR"] >= 0.40
    assert abs(excl_on["score"] - excl_off["score"]) <= 0.005
    assert excl_on["changed"]["ndcg_at_10"] > excl_off["changed"]["ndcg_at_10"]
    base_off, base_on = results["followir-cranfield", "off"], results["followir-cranfield", "rules"]
    assert base_on["p-MRR"] >= base_off["p-MRR"] - 0.005
    assert base_on["score"] >= base_off["score"] - 0.005
    assert base_on["changed"]["ndcg_at_10"] >= base_off["changed"]["ndcg_at_10"] - 0.005
    assert excl_on["exclusions"]["splitter"] == "rules" and excl_off["exclusions"] == "off"
    split = excl_on["per_query"]["62"]["split_changed"]
    assert any("cylinder" in aspect for aspect in split["exclude"])


def test_fit_on_negation_rows_is_no_worse_than_off(data_dir):
    rows = read_triplets(data_dir / "inf-ir-msmarco-negation" / "train.jsonl")[:80]
    report = fit(BM25Retriever(), rows, alphas=(1.0, 3.0), thresholds=(0.5, 0.75), margins=(0.0, 0.5))
    assert report.n_scenarios == 160 and len(report.grid) == 8
    assert report.objective >= report.objective_off
    assert report.settings.alpha in (1.0, 3.0) and report.settings.threshold in (0.5, 0.75)
    assert math.isfinite(report.objective)


def test_eval_cli_records_exclusions_and_refuses_bad_flags(tmp_path):
    bench = write_benchmark(tmp_path / "bench")
    out = tmp_path / "r.json"
    done = infembed("eval", "-b", bench, "-r", "bm25", "--exclusions", "rules", "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["exclusions"]["splitter"] == "rules" and "exclusions" in done.stdout
    bad = infembed("eval", "-b", bench, "-r", "bm25", "--exclusions", "regex", cwd=tmp_path)
    assert bad.returncode == 2 and "--exclusions must be one of" in bad.stderr and "Traceback" not in bad.stderr
    llm = infembed("eval", "-b", bench, "-r", "bm25", "--exclusions", "llm", cwd=tmp_path)
    assert llm.returncode == 2 and "--exclusion-llm-url" in llm.stderr


def test_fit_exclusions_cli_saves_into_the_model_dir(data_dir, tmp_path, minilm):
    model_dir = tmp_path / "model"
    minilm.save(model_dir)
    rows = tmp_path / "rows.jsonl"
    lines = (data_dir / "inf-ir-msmarco-negation" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:12]
    rows.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = infembed("fit-exclusions", "--data", rows, "--model", model_dir, "--save", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    saved = json.loads((model_dir / "infembed.json").read_text())["exclusions"]
    assert set(saved) >= {"alpha", "threshold", "margin", "pool", "scale", "aspect_scorer"}
    assert saved["aspect_scorer"] in ("self", "bm25")
    from infembed.model import InFEmbed

    retriever = DenseRetriever(InFEmbed.load(str(model_dir)), cache=False, exclusions="rules")
    assert retriever.exclusions.alpha == saved["alpha"] and retriever.exclusions.threshold == saved["threshold"]
    assert retriever.exclusions.aspect_scorer == saved["aspect_scorer"]
    both = infembed("fit-exclusions", "--data", rows, "--model", model_dir, "-r", "bm25", cwd=tmp_path)
    assert both.returncode == 2 and "exactly one of" in both.stderr


def test_model_score_is_exclusion_aware_and_plain_when_off(minilm):
    passages = [f"{d.title}. {d.text}" for d in CORPUS.values()]
    query, instruction = ["cars and their fuel"], ["Documents about electric cars are not relevant."]
    off = minilm.score(query, instruction, passages, exclusions="off")
    plain = minilm.encode_queries(query, instruction) @ minilm.encode_passages(passages).T
    assert np.abs(off - plain).max() <= 1e-5
    on = minilm.score(query, instruction, passages)
    ids = list(CORPUS)
    order_on = [ids[i] for i in np.argsort(-on[0])]
    assert order_on.index("d1") > 1 and order_on.index("d5") > 1


def test_a_dense_retriever_can_match_excluded_aspects_with_bm25(minilm):
    """aspect_scorer="bm25": the keep part is scored by the model, the excluded aspects (and guards) by BM25 over
    the same documents; the result is exactly the penalty formula applied to those two score matrices."""
    from infembed.exclusions import ExclusionSettings, apply, plan
    from infembed.search.bm25 import BM25

    settings = ExclusionSettings(alpha=3.0, threshold=0.5, margin=0.25, aspect_scorer="bm25")
    retriever = DenseRetriever(minilm, cache=False, show_progress=False, exclusions=settings)
    retriever.index(CORPUS)
    queries = ["cars and their fuel", "cars and their fuel"]
    instructions = ["Documents about electric cars are not relevant.", "Any kind of car is relevant."]
    got = retriever._scores(retriever.score_pairs, ["q1", "q2"], queries, instructions, None)
    exclusion_plan = plan(instructions, "rules")
    keep = retriever.score_pairs(queries, exclusion_plan.keep_instructions())
    lexical = BM25().index([doc.full_text() for doc in CORPUS.values()])
    extra = lexical.scores(exclusion_plan.aspects + exclusion_plan.guard_texts)
    m = len(exclusion_plan.aspects)
    expected = apply(keep, extra[:m], exclusion_plan, settings, guard_scores=extra[m:])
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()
    # the electric-car documents go down, below the diesel one; the plain instruction is untouched
    order = [list(CORPUS)[i] for i in np.argsort(-got[0])]
    assert order.index("d3") < order.index("d1") and order.index("d3") < order.index("d5")
    assert np.abs(got[1] - retriever.score_pairs(queries[1:], instructions[1:])[0]).max() <= 1e-5


def test_fit_chooses_the_aspect_scorer_on_the_training_rows(data_dir, minilm):
    rows = read_triplets(data_dir / "inf-ir-msmarco-negation" / "train.jsonl")[:60]
    retriever = DenseRetriever(minilm, cache=False, show_progress=False)
    report = fit(retriever, rows, alphas=(3.0,), thresholds=(0.5,), margins=(0.25,), aspect_scorers=("self", "bm25"))
    assert {g["aspect_scorer"] for g in report.grid} == {"self", "bm25"} and len(report.grid) == 2
    best = max(report.grid, key=lambda g: g["objective"])
    assert report.settings.aspect_scorer == best["aspect_scorer"] or best["objective"] - report.objective <= 0.002
    assert report.settings.to_json()["aspect_scorer"] == report.settings.aspect_scorer
    with pytest.raises(ValueError, match="aspect scorer"):
        fit(retriever, rows, aspect_scorers=("tfidf",))


def test_a_guard_that_names_an_excluded_item_does_not_spare_it():
    """A changed FollowIR-style instruction keeps the original text, which lists what is later excluded: the
    guard of 'hypersonic flow' is what its sentence keeps, minus the excluded items, so a document on hypersonic
    flow is not spared by a guard that names it."""
    from infembed.exclusions import plan

    split = Instruction(
        "Relevant documents discuss supersonic and hypersonic flow over wings.",
        ["hypersonic flow"],
        ["Relevant documents discuss supersonic and hypersonic flow over wings."],
    )
    exclusion_plan = plan(["x"], lambda text: split)
    assert exclusion_plan.aspects == ["hypersonic flow"]
    (guard,) = exclusion_plan.guard_texts
    assert "hypersonic" not in guard.lower() and "supersonic" in guard
    only_excluded = Instruction("Find papers.", ["Hypersonic Flow"], ["hypersonic flow"])
    assert plan(["x"], lambda text: only_excluded).aspect_guard == [-1]  # nothing searchable left: no guard


def test_the_pool_median_is_numpys_exactly():
    """The range scale's median is computed without np.median's overhead, to the same value (odd and even
    pools, float32 BM25 scores and float64)."""
    from infembed.exclusions import _median

    rng = np.random.default_rng(0)
    for size in (1, 2, 3, 4, 99, 100):
        for dtype in (np.float32, np.float64):
            for _ in range(50):
                sample = (rng.standard_normal(size) * rng.uniform(0.1, 100)).astype(dtype)
                assert _median(sample) == float(np.median(sample))
    assert _median(np.array([3.0, 3.0, 1.0, 1.0])) == 2.0
