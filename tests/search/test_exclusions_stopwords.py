"""An excluded aspect made only of stop words (issue 23, item 1).

"Documents about the are not relevant." excludes the aspect "the": a text with no searchable word. bm25s cannot
score a text with no tokens (an IndexError), which crashed ``search`` on BM25 and dense indexes, ``serve`` (500)
and ``eval --exclusions rules``. Invariants: the BM25 wrapper scores a text without terms as zeros against every
document; the splitter drops an aspect with no searchable word and says so (``dropped``), and an instruction left
with nothing searchable to exclude is searched as a plain instruction; search, serve and eval all answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import typer
from background_server import BackgroundServer
from typer.testing import CliRunner

from infembed.instructions import Instruction, split_instruction
from infembed.search.bm25 import BM25
from infembed.search.service import create_app

ONLY_STOPWORDS = ["Documents about the are not relevant.", "not not not not"]
MIXED = (
    "Documents about rockets are relevant. Documents about the are not relevant. "
    "Documents about bread are not relevant."
)
LONG = ("Documents about the are not relevant. Documents about it are not relevant. " * 60)[:4096]


def test_bm25_scores_a_text_without_terms_as_zeros():
    bm25 = BM25().index(["wing lift theory", "the boundary layer", "sourdough bread"])
    scores = bm25.scores(["the", "", "wing", "not not not"])
    assert scores.shape == (4, 3)
    assert not scores[0].any() and not scores[1].any() and not scores[3].any()
    assert scores[2, 0] > 0
    top_scores, rows = bm25.top_k(["the"], 2)
    assert (rows == -1).all() and not top_scores.any()


def test_bm25_scores_equal_bm25s_own_scores():
    # one bincount per text over bm25s's sparse index, instead of bm25s's get_scores per text: the same numbers
    docs = ["wing lift theory", "the boundary layer of a wing", "sourdough bread", "lift and drag of a wing wing"]
    bm25 = BM25().index(docs)
    texts = ["wing lift", "wing wing boundary", "bread and butter", "unknown words", "lift drag layer sourdough"]
    ours = bm25.scores(texts)
    for row, tokens in enumerate(bm25._tokenize(texts, return_ids=False)):
        theirs = bm25._model.get_scores(tokens) if bm25._model.get_tokens_ids(tokens) else 0 * ours[row]
        assert abs(ours[row] - theirs).max() <= 1e-6 * max(1.0, abs(theirs).max())


@pytest.mark.parametrize("text", ONLY_STOPWORDS)
def test_an_aspect_without_searchable_words_is_dropped_and_said(text):
    # auto (the learned decomposer) excludes nothing searchable-less either: the text is kept whole
    auto = split_instruction(text, "auto")
    assert auto.exclude == [] and auto.keep == text.strip()
    split = split_instruction(text, "rules")  # the rules find the empty aspect, then drop it and say so
    assert split.exclude == [] and split.dropped
    # nothing searchable is excluded: searched as a plain instruction (the whole text is kept)
    assert split.keep == text.strip()
    assert split.to_json()["dropped"] == split.dropped


def test_only_the_empty_aspect_is_dropped_with_its_guard():
    split = split_instruction(MIXED, "rules")
    assert split.exclude == ["bread"] and split.dropped == ["the"]
    assert split.keep == "Documents about rockets are relevant."
    assert len(split.guards) in (0, 1)
    assert split.to_json() == {"keep": split.keep, "exclude": ["bread"], "dropped": ["the"]}
    # a callable splitter (the LLM one) goes through the same check
    llm_like = split_instruction("x", lambda _text: Instruction("kept", ["the", "bread"], ["", "g"]))
    assert (llm_like.keep, llm_like.exclude, llm_like.guards, llm_like.dropped) == (
        "kept",
        ["bread"],
        ["g"],
        ["the"],
    )


@pytest.fixture(scope="module")
def cli() -> typer.Typer:
    from infembed.cli.search import register

    app = typer.Typer()
    register(app)
    return app


@pytest.mark.parametrize("which", ["bm25_index", "flat_index"])
@pytest.mark.parametrize("instruction", [*ONLY_STOPWORDS, MIXED, LONG])
def test_search_answers_an_exclusion_of_stop_words(cli, request, which, instruction):
    index = request.getfixturevalue(which)
    args = ["search", "-i", str(index.path), "-q", "sourdough bread", "-I", instruction, "--json", "-k", "3"]
    plain = index.search(["sourdough bread"], [instruction], k=3, exclusions="off")[0]
    # the rules find the stop-word aspect, drop it and say so
    result = CliRunner().invoke(cli, [*args, "--exclusions", "rules"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["hits"], body
    assert body["split"]["dropped"] in (["the"], ["not not not"])
    if instruction == MIXED:
        assert body["split"]["exclude"] == ["bread"]
    if instruction in ONLY_STOPWORDS:  # nothing left to exclude: exactly the plain search
        assert [h["id"] for h in body["hits"]] == [h.id for h in plain]
    # the default splitter (auto) answers the same instruction too
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["exclusions"] == "auto" and body["hits"], body
    excluded = body.get("split", {}).get("exclude", [])  # "split" is left out where nothing is split off
    assert "the" not in excluded and "not not not" not in excluded
    if instruction in ONLY_STOPWORDS:  # auto excludes nothing here either: exactly the plain search
        assert [h["id"] for h in body["hits"]] == [h.id for h in plain]


def test_serve_answers_an_exclusion_of_stop_words(bm25_index, flat_index):
    for index in (bm25_index, flat_index):
        with BackgroundServer(create_app(index)) as url, httpx.Client(base_url=url, timeout=60) as client:
            for instruction in [*ONLY_STOPWORDS, MIXED, LONG]:
                # the rules find the stop-word aspect, drop it and say so
                response = client.post(
                    "/search",
                    json={"query": "sourdough bread", "instruction": instruction, "exclusions": "rules"},
                )
                assert response.status_code == 200, response.text
                assert response.json()["split"]["dropped"] in (["the"], ["not not not"])
                # the default splitter (auto) answers the same instruction too
                response = client.post(
                    "/search", json={"query": "sourdough bread", "instruction": instruction}
                )
                assert response.status_code == 200, response.text
                assert response.json()["exclusions"] == "auto" and response.json()["hits"], response.text
            batch = client.post(
                "/search", json={"queries": [{"query": "bees", "instruction": LONG}, {"query": "tides"}]}
            )
            assert batch.status_code == 200, batch.text


QUERIES = {
    "q1": ("heat conduction in slabs", "Experimental and theoretical studies are relevant.",
           "Experimental studies are relevant. Documents about the are not relevant."),
    "q2": ("flow past a cylinder", "Supersonic and hypersonic flow are relevant.",
           "Only supersonic flow is relevant; hypersonic flow is not. not not not not"),
}  # fmt: skip
CORPUS = {
    "d1": "An experimental study of heat conduction through layered slabs.",
    "d2": "A theoretical analysis of transient heat conduction in a slab.",
    "d3": "Measurements of supersonic flow past a circular cylinder.",
    "d4": "Hypersonic flow past a cylinder at very high Mach number.",
    "d5": "Transition of the boundary layer on a flat plate at low speed.",
}


def _benchmark(root: Path) -> Path:
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n" for d, t in CORPUS.items())
    )
    (root / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": q, "text": t, "instruction_og": og, "instruction_changed": ch}) + "\n"
            for q, (t, og, ch) in QUERIES.items()
        )
    )
    header = "query-id\tcorpus-id\tscore\n"
    (root / "qrels_og.tsv").write_text(header + "q1\td1\t1\nq1\td2\t1\nq2\td3\t1\nq2\td4\t1\n")
    (root / "qrels_changed.tsv").write_text(header + "q1\td1\t1\nq1\td2\t0\nq2\td3\t1\nq2\td4\t0\n")
    return root


@pytest.mark.parametrize("retriever", [["-r", "bm25"], ["-m", "default"]])
def test_eval_with_exclusions_answers_an_exclusion_of_stop_words(tmp_path, retriever):
    infembed = Path(sys.executable).with_name("infembed")
    if not infembed.exists():
        pytest.skip(f"{infembed} not installed")
    bench = _benchmark(tmp_path / "bench")
    out = tmp_path / "out.json"
    done = subprocess.run(
        [str(infembed), "eval", "-b", str(bench), *retriever, "--exclusions", "rules", "-o", str(out),
         "--device", "cpu"] if retriever[0] == "-m" else
        [str(infembed), "eval", "-b", str(bench), *retriever, "--exclusions", "rules", "-o", str(out)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result = json.loads(out.read_text())
    assert np.isfinite(result["p-MRR"])
    # q2's changed instruction still excludes hypersonic flow
    assert result["per_query"]["q2"]["split_changed"]["exclude"] == ["hypersonic flow"]
    # q1's only exclusion had no searchable word: results.json says it was dropped (it said nothing before)
    assert result["per_query"]["q1"]["split_changed"] == {
        "keep": "Experimental studies are relevant. Documents about the are not relevant.",
        "exclude": [],
        "dropped": ["the"],
    }
