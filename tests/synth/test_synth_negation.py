"""``infembed synth run --style negation``: negation-aware InF-IR rows from seed pairs, through our test server
(fake_negation_answers.py answers the new prompts): kept rows have the InF-IR schema plus ``"style":
"negation"`` and mirrored instructions (one shared general statement, then I+ excludes P1-'s aspect in P1-'s
words and I- excludes P+'s); rows whose exclusion does not decide alone are rejected with the reason; a run
killed with SIGKILL and started again loses and duplicates nothing; the rows train; the settings and the docs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from fake_negation_answers import ASPECT_WORDS
from typer.testing import CliRunner

from infembed.cli.synth import app
from infembed.data.jsonl import read_jsonl
from infembed.data.records import TRIPLET_FIELDS
from infembed.synth import negation_prompts
from infembed.synth.inputs import load_seed
from infembed.synth.llm import LLMClient, OpenAIBackend, ResponseCache
from infembed.synth.negation import NEGATION_STAGES, STAGE_FILES, NegationPipeline, exclusion_words
from infembed.synth.pipeline import SynthConfig, make_pipeline, run_sync

runner = CliRunner()
N_PAIRS = 6
#: requests a row: general statement, E-, P1-, Q-, E+, P2-, 3 judge scenarios, 2 pair judgments, 2 checks
PER_ROW = 13
ALL_RIGHT = {"pos": "P+", "inst_neg": "P1-", "query_neg": "P2-", "pos_pair": "P+", "inst_neg_pair": "P1-"}


def _run(server, seed_dir, out, *extra, limit=N_PAIRS):
    args = ["run", str(seed_dir), "--output", str(out), "--limit", str(limit), "--style", "negation"]
    args += ["--base-url", server.base_url, "--model", "fake-gen", "--retry-base", "0.01", "--quiet"]
    return runner.invoke(app, [*args, *extra])


def _by_id(path):
    return {r["id"]: r for r in read_jsonl(path)}


def test_kept_rows_have_the_schema_the_style_and_mirrored_exclusions(server, seed_dir, tmp_path, data_dir):
    out = tmp_path / "run"
    result = _run(server, seed_dir, out)
    assert result.exit_code == 0, result.output
    assert f"rows: {N_PAIRS} in, {N_PAIRS} kept, 0 rejected, 0 unfinished" in result.output
    assert f"this run: {PER_ROW * N_PAIRS} requests, 0 cache hits" in result.output
    seed = load_seed(str(seed_dir), limit=N_PAIRS)
    rows = read_jsonl(out / "train.jsonl")
    assert [r["id"] for r in rows] == [p.id for p in seed.pairs]
    shared = json.loads((data_dir / "inf-ir-msmarco-negation" / "train.jsonl").read_text().splitlines()[0])
    general, exclusion = _by_id(out / "general.jsonl"), _by_id(out / "exclusion.jsonl")
    contrast, judged = _by_id(out / "contrast.jsonl"), _by_id(out / "judged.jsonl")
    for row, pair in zip(rows, seed.pairs, strict=True):
        assert set(row) == set(TRIPLET_FIELDS) | {"id", "query_id", "doc_id", "style"} == set(shared)
        assert row["style"] == "negation"
        assert all(isinstance(row[f], str) and row[f].strip() and "\n" not in row[f] for f in TRIPLET_FIELDS)
        assert (row["query_positive"], row["document_positive"]) == (pair.query, pair.passage)
        # one general statement, then the mirrored exclusions
        g = general[pair.id]["general"]
        e_neg, e_pos = general[pair.id]["exclusion_negative"], exclusion[pair.id]["exclusion_positive"]
        assert row["instruction_positive"] == f"{g} {e_pos}" and row["instruction_negative"] == f"{g} {e_neg}"
        assert contrast[pair.id]["hard_negative_document_1"] == row["hard_negative_document_1"]
        # I+ names P1-'s aspect in P1-'s words (which P+ lacks); I- names P+'s (which P1- lacks)
        p_plus, p1 = row["document_positive"], row["hard_negative_document_1"]
        assert exclusion_words(e_pos, p1, p_plus, row["query_positive"], g)
        assert exclusion_words(e_neg, p_plus, p1, row["query_positive"], g)
        assert any(w in e_pos and w in p1 and w not in p_plus for w in ASPECT_WORDS)
        assert row["query_negative"] != row["query_positive"]
        assert judged[pair.id]["judge"] == ALL_RIGHT
        assert judged[pair.id]["general"] == {"P+": True, "P1-": True}
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["stages"]) == list(NEGATION_STAGES)
    assert all(s["keep_rate"] == 1.0 for s in summary["stages"].values())
    assert set(summary["tokens"]["per_stage"]) == set(STAGE_FILES)
    assert server.stats()["by_task"] == {
        "negation_general": N_PAIRS,
        "negation_exclusion": 2 * N_PAIRS,
        "negation_passage": N_PAIRS,
        "poison_query": N_PAIRS,
        "negative_passage": N_PAIRS,
        "judge": 5 * N_PAIRS,
        "negation_check": 2 * N_PAIRS,
    }
    assert json.loads((out / "run.json").read_text())["config"]["style"] == "negation"

    # training reads them as it reads the shared negation rows (the style kept as an extra field)
    from infembed.train.inputs import load_rows

    triplets = load_rows([str(out / "train.jsonl")])
    assert len(triplets) == N_PAIRS and all(t.extra == {"style": "negation"} for t in triplets)
    assert [p.role for p in triplets[0].pairs()] == ["pos", "inst_neg", "query_neg"]


def test_rejects_carry_their_reasons(server, seed_dir, tmp_path):
    seed = load_seed(str(seed_dir), limit=N_PAIRS)
    q = [f"Query: {p.query}\n" for p in seed.pairs]
    server.configure(
        {
            "rules": [
                {"task": "negation_general", "contains": q[0], "reply": "empty", "times": -1},
                # E+ (its prompt shows the passage to keep) names nothing of P1-
                {"task": "negation_exclusion", "contains": [q[1], "Passage to keep:"], "reply": "vague", "times": -1},
                # both exclusions restate the general statement before excluding
                {"task": "negation_exclusion", "contains": q[2], "reply": "echo", "times": -1},
                # the judge prefers P1- for (I+, Q+) when shown only P+ and P1- (I+ holds the fake's "ref")
                {"task": "judge", "contains": [q[3], "(1-2)", "ref "], "reply": "wrong", "times": -1},
                # the general statement alone already rules P1- out: the exclusion does not decide alone
                {"task": "negation_check", "contains": [q[4], ASPECT_WORDS[0]], "reply": "wrong", "times": -1},
            ]
        }
    )  # fmt: skip
    out = tmp_path / "run"
    result = _run(server, seed_dir, out)
    assert result.exit_code == 0, result.output
    rejects = _by_id(out / "rejects.jsonl")
    ids = [p.id for p in seed.pairs]
    assert [r["id"] for r in read_jsonl(out / "train.jsonl")] == ids[5:]
    assert {i: (r["stage"], r["reason"]) for i, r in rejects.items()} == {
        ids[0]: ("general", "general statement: empty answer (3 tries)"),
        ids[1]: ("rules", "the exclusion of I+ names no word of P1- that P+ lacks (it must name P1-'s aspect)"),
        ids[2]: ("rules", "the exclusion of I+ repeats the general statement"),
        ids[3]: ("judge", "judge chose P1- for (I+, Q+) over {P+, P1-}"),
        ids[4]: ("judge", "judge: the general statement alone rules out P1- (the exclusion must decide alone)"),
    }  # fmt: skip
    assert rejects[ids[0]]["detail"] == {"answers": ["empty answer"] * 3}
    assert rejects[ids[3]]["detail"]["judge"] == {**ALL_RIGHT, "pos_pair": "P1-"}
    assert rejects[ids[4]]["detail"]["general"] == {"P+": True, "P1-": False}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == {"input": 6, "kept": 1, "rejected": 5, "unfinished": 0, "deferred_to_batch": 0}
    assert summary["stages"]["general"]["reasons"] == {"general statement: empty answer": 1}
    assert summary["stages"]["rules"]["reasons"] == {
        "the exclusion of I+ names no word of P1- that P+ lacks": 1,
        "the exclusion of I+ repeats the general statement": 1,
    }
    assert summary["stages"]["judge"]["reasons"] == {
        "judge wrong on (I+, Q+) over {P+, P1-}": 1,
        "the general statement alone rules out P1-": 1,
    }
    assert summary["stages"]["judge"]["in"] == 3 and summary["stages"]["judge"]["kept"] == 1


def _lines(path):
    return path.read_text().count("\n") if path.exists() else 0


def _command(seed_dir, out, base_url, n):
    return [
        sys.executable, "-m", "infembed.cli.synth", "run", str(seed_dir), "--output", str(out), "--limit",
        str(n), "--style", "negation", "--base-url", base_url, "--model", "fake-gen", "--concurrency", "2",
        "--retry-base", "0.01", "--quiet",
    ]  # fmt: skip


def test_sigkill_in_the_middle_then_rerun_loses_and_duplicates_nothing(server, seed_dir, tmp_path):
    n = 8
    server.configure({"latency": 0.03})
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = _command(seed_dir, out, server.base_url, n)
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None and _lines(out / "judged.jsonl") < 2:
        time.sleep(0.02)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert 2 <= _lines(out / "judged.jsonl") < n
    assert not (out / "train.jsonl").exists()
    answered_before = server.stats()["answered"]

    server.configure({})
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    seed = load_seed(str(seed_dir), limit=n)
    rows = read_jsonl(out / "train.jsonl")
    assert [r["id"] for r in rows] == [p.id for p in seed.pairs]
    for name in STAGE_FILES.values():
        counts = Counter(r["id"] for r in read_jsonl(out / name))
        assert set(counts) == {p.id for p in seed.pairs} and max(counts.values()) == 1, name
    assert not (out / "rejects.jsonl").exists() or not read_jsonl(out / "rejects.jsonl")
    assert server.stats()["answered"] - answered_before < PER_ROW * n  # answers before the kill were cached
    assert server.stats()["answered"] <= PER_ROW * n + 9 * 4  # at most the judging of rows in flight twice

    # the same rows as a run never interrupted
    reference = tmp_path / "reference"
    client = LLMClient(OpenAIBackend(base_url=server.base_url), ResponseCache(reference / "cache.sqlite"))
    pipeline = make_pipeline(seed, reference, client, SynthConfig(model="fake-gen", style="negation"))
    assert isinstance(pipeline, NegationPipeline)
    run_sync(pipeline)
    assert (out / "train.jsonl").read_text() == (reference / "train.jsonl").read_text()
    server.reset()
    assert _run(server, seed_dir, out, limit=n).exit_code == 0
    assert server.stats()["requests"] == 0  # a rerun of a finished run asks nothing


def test_json_output_and_the_settings(server, seed_dir, tmp_path):
    out = tmp_path / "run"
    result = _run(server, seed_dir, out, "--json-output", "json_object", limit=2)
    assert result.exit_code == 0, result.output
    assert len(read_jsonl(out / "train.jsonl")) == 2
    assert server.stats()["response_format"] == server.stats()["answered"] == 2 * PER_ROW
    # a resume with the other style is refused in one line; so are an unknown style and other domains
    refused = runner.invoke(
        app, ["run", str(seed_dir), "-o", str(out), "--limit", "2", "--base-url", server.base_url, "--quiet",
              "--model", "fake-gen", "--json-output", "json_object"],
    )  # fmt: skip
    assert refused.exit_code == 2 and "style='negation' (now 'inf-ir')" in refused.output
    bad = _run(server, seed_dir, tmp_path / "bad", "--style", "negated")
    assert bad.exit_code == 2 and "style must be one of inf-ir, negation; got 'negated'" in bad.output
    code = _run(server, seed_dir, tmp_path / "code", "--domain", "code", "--language", "Python")
    assert code.exit_code == 2 and "--style negation is written for --domain web" in code.output
    assert len(bad.output.strip().splitlines()) == 1 and len(code.output.strip().splitlines()) == 1


def test_export_batch_asks_for_the_first_stage(seed_dir, tmp_path):
    result = runner.invoke(
        app, ["export-batch", str(seed_dir), "-o", str(tmp_path / "b"), "--limit", "3", "--style", "negation",
              "--batch-file", str(tmp_path / "round1.jsonl")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "3 requests (general 3)" in result.output
    bodies = [json.loads(line)["body"] for line in (tmp_path / "round1.jsonl").read_text().splitlines()]
    assert all(
        b["messages"][0]["content"].startswith(negation_prompts.TASKS["negation_general"]) for b in bodies
    )


def test_help_and_docs_hold_the_style_and_the_prompts_verbatim():
    shown = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0 and "--style" in shown.output and "negation" in shown.output
    docs = (Path(__file__).parents[2] / "docs" / "synthesis.md").read_text()
    for text in negation_prompts.documented():
        assert text in docs, text[:80]
    for cue in negation_prompts.EXCLUSION_CUES:
        assert f"`{cue}`" in docs
    arch = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text()
    assert "negation.py" in arch


@pytest.mark.parametrize("style", ["inf-ir", "negation"])
def test_the_saved_config_reads_back(style):
    config = SynthConfig(style=style)
    assert SynthConfig.from_dict(json.loads(json.dumps(config.__dict__))) == config
