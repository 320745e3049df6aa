"""``infembed report --html`` (:mod:`infembed.evaluate.html`) on real runs of BM25 over a tiny benchmark.

Invariants: the page is self-contained (no URL it would fetch: styles, script and the figure inline); it holds
one summary row per run and one explorer entry per (benchmark, query); every per-query number it shows (each
run's p-MRR, each changed document's og and new rank) equals the results.json entry it came from; each run's
top 10 agrees with the changed documents' ranks; the split of exclusion-aware runs is shown; results.json files
written before the explorer existed (no texts, no top 10) still render. In headless Chromium (slow) the
page's script runs without error and the screenshot is not blank.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infembed.data.benchmarks import load_benchmark
from infembed.evaluate.html import page_data, report_html, write_html
from infembed.evaluate.report import model_labels
from infembed.evaluate.retrievers import BM25Retriever
from infembed.evaluate.runner import evaluate


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[dict]:
    """BM25 plain and exclusion-aware on one benchmark, plain only on a second (a missing run)."""
    from tiny_benchmark import write_benchmark

    root = tmp_path_factory.mktemp("benchmarks")
    bench = write_benchmark(root / "tiny")
    # changed instructions that exclude what lost relevance, so the exclusion-aware run records its splits
    rows = [json.loads(line) for line in (bench / "queries.jsonl").read_text().splitlines()]
    exclusions = {
        "q1": "Theoretical analyses are not relevant.",
        "q2": "Documents on hypersonic flow are not relevant.",
    }
    for row in rows:
        row["instruction_changed"] = f"{row['instruction_og']} {exclusions[row['_id']]}"
    (bench / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    first = load_benchmark(bench)
    second = load_benchmark(write_benchmark(root / "tiny-two"))
    results = [
        evaluate(first, BM25Retriever(), model_name="bm25"),
        evaluate(first, BM25Retriever(exclusions="rules"), model_name="bm25"),
        evaluate(second, BM25Retriever(), model_name="bm25"),
    ]
    # through JSON, as `infembed report` reads them
    return json.loads(json.dumps(results))


def test_page_numbers_equal_results_json(runs):
    page = report_html(runs)
    labels = model_labels(runs)
    shown = page_data(page)
    # one entry per (benchmark, query)
    expected = [(r["benchmark"], q) for r in (runs[0], runs[2]) for q in r["per_query"]]
    assert [(e["benchmark"], e["qid"]) for e in shown] == expected
    for entry in shown:
        for r, label in zip(runs, labels):
            if r["benchmark"] != entry["benchmark"]:
                continue
            per_query = r["per_query"][entry["qid"]]
            assert entry["pmrr"][label] == per_query.get("p-MRR")
            for doc, ranks in per_query.get("changed_documents", {}).items():
                assert entry["ranks"][(label, doc)] == (ranks["og_rank"], ranks["new_rank"])
    ranked = sum(len(e["ranks"]) for e in shown)
    assert (
        ranked == sum(len(q.get("changed_documents", {})) for r in runs for q in r["per_query"].values()) > 0
    )
    assert page.count('<tr class="run"') == len(runs)


def test_the_page_is_self_contained(runs):
    page = report_html(runs)
    assert '<img class="plot"' in page and 'src="data:image/png;base64,' in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "@import" not in page and "url(" not in page


def test_top_10_and_splits_are_recorded_and_shown(runs):
    for r in runs:
        for qid, entry in r["per_query"].items():
            assert entry["text"] and entry["instruction_og"] and entry["instruction_changed"]
            for field, rank_key in (("top_og", "og_rank"), ("top_changed", "new_rank")):
                top = [doc for doc, _ in entry[field]]
                assert 0 < len(top) <= 10 and len(set(top)) == len(top)
                # the top lists and the changed documents' ranks come from the same run
                for doc, ranks in entry.get("changed_documents", {}).items():
                    if ranks[rank_key] <= len(top):
                        assert top[ranks[rank_key] - 1] == doc, (qid, field, doc)
            assert set(entry["titles"]) >= {doc for doc, _ in entry["top_og"]}
    split_runs = [r for r in runs if any("split_changed" in q for q in r["per_query"].values())]
    assert split_runs, "the rules splitter should find the tiny benchmark's exclusion"
    page = report_html(runs)
    assert page.count("split used by BM25 + exclusions (rules)") == sum(
        1 for q in split_runs[0]["per_query"].values() if "split_og" in q or "split_changed" in q
    )
    assert "hypersonic" in page


def test_results_from_before_the_explorer_still_render(runs, tmp_path):
    old = json.loads(json.dumps(runs[0]))
    for entry in old["per_query"].values():
        for key in ("text", "instruction_og", "instruction_changed", "top_og", "top_changed", "titles"):
            entry.pop(key, None)
    path = write_html([old], tmp_path / "old.html")
    page = path.read_text(encoding="utf-8")
    assert "Top 10 not recorded" in page and "query text not recorded" in page
    assert [e["pmrr"] for e in page_data(page)] == [
        {"BM25": q.get("p-MRR")} for q in old["per_query"].values()
    ]


def test_report_cli_writes_the_page(runs, tmp_path):
    infembed = Path(sys.executable).with_name("infembed")
    if not infembed.exists():
        pytest.skip(f"{infembed} not installed")
    paths = []
    for index, r in enumerate(runs):
        paths.append(tmp_path / f"r{index}.json")
        paths[-1].write_text(json.dumps(r))
    out = tmp_path / "site" / "report.html"
    done = subprocess.run([str(infembed), "report", *map(str, paths), "--html", str(out)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(page_data(out.read_text(encoding="utf-8"))) == 4


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no headless browser: install Debian's chromium (apt-get install -y chromium; .ci/run does)")


def _headless(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-extensions", f"--user-data-dir={profile}"]  # fmt: skip
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_page_in_headless_chromium(runs, tmp_path):
    browser = _chromium()
    page = write_html(runs, tmp_path / "report.html")
    url = page.resolve().as_uri()
    done = _headless(browser, tmp_path / "profile", "--dump-dom", url)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    # the script ran to its end (it marks <body>) and counted one entry per (benchmark, query)
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-ready="ok"' in body and "data-error" not in body, body
    entries = sum(len(r["per_query"]) for r in (runs[0], runs[2]))
    assert f'data-queries="{entries}"' in body
    assert dom.count('<tr class="run"') == len(runs)
    assert dom.count('<details class="query"') == entries
    # the script sorts: by the mean p-MRR over runs, highest first (in the first benchmark, not the file order)
    done = _headless(browser, tmp_path / "profile", "--dump-dom", url + "#sort=mean:desc")
    sections = done.stdout.split('<section class="benchmark"')[1:]
    assert len(sections) == 2
    means = [
        float(v) for v in re.findall(r'<details class="query"[^>]*data-pmrr-mean="([^"]+)"', sections[0])
    ]
    assert means == sorted(means, reverse=True) and len(set(means)) == len(means) == 2
    expected = sorted(
        runs[0]["per_query"],
        key=lambda q: -(runs[0]["per_query"][q]["p-MRR"] + runs[1]["per_query"][q]["p-MRR"]),
    )
    assert (
        re.findall(r'<details class="query" data-qid="([^"]+)"', sections[0])
        == expected
        != list(runs[0]["per_query"])
    )
    shot = tmp_path / "shot.png"
    done = _headless(
        browser, tmp_path / "profile", "--window-size=1280,1600", f"--screenshot={shot}", url + "#open-all"
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (1600, 1280)
    assert float(np.std(pixels)) > 0.05  # not one flat colour: text, table lines and the figure were drawn
    assert float((pixels.mean(axis=2) < 0.5).mean()) > 0.005  # dark pixels (text) cover part of the page
