"""``infembed synth instructions``: labelled search instructions from an LLM (our test server, which answers a
fixed mix of valid and invalid rows: fake_instruction_answers.py), kept when the project's reader of the
format accepts them and they are of the kind the batch asked for, else rejected with the reason; the output
reads with ``tagging.read_labelled``; a run killed with SIGKILL and started again loses and duplicates
nothing; a resume with other settings or against another endpoint is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import fields
from pathlib import Path

import pytest
from fake_instruction_answers import EXCLUDING, EXCLUDING_REASONS, PLAIN, PLAIN_REASONS
from typer.testing import CliRunner

from infembed.cli.synth import app
from infembed.data.jsonl import read_jsonl
from infembed.instructions.tagging import read_labelled
from infembed.synth import instruction_prompts as prompts
from infembed.synth.instruction_prompts import FORMS, response_format
from infembed.synth.instructions import InstructionsConfig, check_row, parse_answer, plan

runner = CliRunner()
KEPT = {False: sum(ok for ok, _ in EXCLUDING), True: sum(ok for ok, _ in PLAIN)}


def _run(server, out, *extra):
    args = ["instructions", "--output", str(out), "--base-url", server.base_url, "--model", "fake-gen"]
    return runner.invoke(app, [*args, "--retry-base", "0.01", "--quiet", *extra])


def _summary(out):
    return json.loads((out / "summary.json").read_text())


def test_keeps_valid_rows_and_rejects_the_others_with_their_reasons(server, tmp_path):
    out = tmp_path / "run"
    result = _run(server, out, "--rows", "30")  # 6 batches of 5: the 3rd and 6th plain
    assert result.exit_code == 0, result.output
    batches = read_jsonl(out / "batches.jsonl")
    assert [b["plain"] for b in sorted(batches, key=lambda b: b["id"])] == [False, False, True] * 2
    assert len({(b["domain"], b["register"], b["form"]) for b in batches}) == 6  # six cells of the grid

    rows = read_jsonl(out / "instructions.jsonl")
    assert len(rows) == 4 * KEPT[False] + 2 * KEPT[True] == 14
    items = read_labelled(out / "instructions.jsonl")  # training data of the decomposer, as it is
    assert [item.text for item in items] == [r["text"] for r in rows]
    assert all(item.source == "synth:fake-gen" for item in items)
    by_id = {b["id"]: b for b in batches}
    for row in rows:
        batch = by_id[row["id"].rsplit("-", 1)[0]]
        assert (row["domain"], row["register"], row["form"]) == (
            batch["domain"],
            batch["register"],
            batch["form"],
        )
        assert bool(row["aspects"]) == (not batch["plain"])
    assert len({r["text"] for r in rows}) == len(rows) and len({r["id"] for r in rows}) == len(rows)

    summary = _summary(out)
    expected = Counter({reason: 4 for reason in EXCLUDING_REASONS}) + Counter(
        {reason: 2 for reason in PLAIN_REASONS}
    )
    assert summary["stages"]["instructions"]["reasons"] == dict(expected)
    assert summary["rows"] == {
        "asked": 30, "answered": 30, "kept": 14, "rejected": 16, "not_written": 0, "unfinished": 0,
        "plain": 6, "excluding": 8,
    }  # fmt: skip
    assert summary["batches"]["done"] == 6 and summary["stages"]["batches"]["rejected"] == 0
    assert summary["tokens"]["per_stage"]["instructions"]["requests"] == 6
    assert sum(summary["kept_by"]["domain"].values()) == 14
    assert "14 kept (8 excluding, 6 plain), 16 rejected" in result.output
    assert "infembed decomposer train --data" in result.output
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["rows"] == 30 and run["endpoint"]["url"] == server.base_url
    assert server.stats()["by_task"] == {"instructions": 6} and server.stats()["response_format"] == 0

    server.reset()  # a rerun asks nothing and writes the same file
    before = (out / "instructions.jsonl").read_text()
    assert _run(server, out, "--rows", "30").exit_code == 0
    assert server.stats()["requests"] == 0 and (out / "instructions.jsonl").read_text() == before


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("garbage", "no JSON list of instructions"), ("cut", "answer cut off by the token limit")],
)
def test_a_batch_without_a_json_list_is_asked_again_then_rejected(server, tmp_path, reply, reason):
    server.configure({"rules": [{"task": "instructions", "reply": reply, "times": 3}]})
    out = tmp_path / "run"
    result = _run(server, out, "--rows", "10", "--concurrency", "1", "--batches-in-flight", "1")
    assert result.exit_code == 0, result.output
    (reject,) = read_jsonl(out / "rejects.jsonl")
    assert reject["id"] == "b000000" and reject["usage"]["requests"] == 3
    assert reject["reason"] == f"instructions: {reason} (3 tries)"
    summary = _summary(out)
    assert summary["stages"]["batches"]["reasons"] == {f"instructions: {reason}": 1}
    assert summary["rows"]["kept"] == KEPT[False] and summary["batches"]["rejected"] == 1


def test_json_output_sends_the_schema_and_reads_the_same_rows(server, tmp_path):
    assert _run(server, tmp_path / "free", "--rows", "10").exit_code == 0
    result = _run(server, tmp_path / "json", "--rows", "10", "--json-output", "json_schema")
    assert result.exit_code == 0, result.output
    assert server.stats()["response_format"] == 2
    free, constrained = (read_jsonl(tmp_path / d / "instructions.jsonl") for d in ("free", "json"))
    assert [r["aspects"] for r in free] == [r["aspects"] for r in constrained] and len(free) == 2 * KEPT[
        False
    ]
    schema = response_format("json_schema")["json_schema"]["schema"]
    assert schema["properties"]["instructions"]["items"]["required"] == ["text", "aspects", "clauses"]
    assert response_format("json_object")["type"] == "json_object" and response_format("off") is None


def test_a_resume_with_other_settings_or_endpoint_is_refused_and_more_rows_add_batches(server, tmp_path):
    out = tmp_path / "run"
    assert _run(server, out, "--rows", "10").exit_code == 0
    first = read_jsonl(out / "instructions.jsonl")
    for flags, said in (
        (("--seed", "1"), "seed=0 (now 1)"),
        (("--batch-size", "4"), "batch_size=5 (now 4)"),
        (("--form", "verdict"), "forms="),
        (("--model", "other"), "model='fake-gen' (now 'other')"),
    ):
        refused = _run(server, out, "--rows", "10", *flags)
        assert refused.exit_code == 2 and said in refused.output, refused.output
        assert "other settings" in refused.output and len(refused.output.strip().splitlines()) == 1
    server.configure({"models": [{"id": "/models/b.gguf", "owned_by": "llamacpp"}]})
    moved = _run(server, out, "--rows", "10")
    assert moved.exit_code == 2 and "another endpoint" in moved.output
    server.configure({})

    server.reset()  # --rows may grow: the same first batches, two more asked for
    assert _run(server, out, "--rows", "20").exit_code == 0
    assert server.stats()["by_task"] == {"instructions": 2}
    assert read_jsonl(out / "instructions.jsonl")[: len(first)] == first


def test_an_endpoint_that_keeps_failing_stops_the_run_in_one_line(server, tmp_path):
    server.configure({"fail_all": 500})
    out = tmp_path / "run"
    result = _run(server, out, "--rows", "20", "--max-retries", "0", "--concurrency", "1")
    assert result.exit_code == 2 and "the endpoint kept failing" in result.output, result.output
    assert "resume" in result.output.strip().splitlines()[-1]
    summary = _summary(out)
    assert summary["batches"]["unfinished"] == 4 and read_jsonl(out / "instructions.jsonl") == []


def _lines(path):
    return path.read_text().count("\n") if path.exists() else 0


def test_sigkill_in_the_middle_then_rerun_loses_and_duplicates_nothing(server, tmp_path):
    server.configure({"latency": 0.15})
    out = tmp_path / "run"
    command = [
        sys.executable, "-m", "infembed.cli.synth", "instructions", "--output", str(out), "--rows", "60",
        "--base-url", server.base_url, "--model", "fake-gen", "--concurrency", "1", "--quiet",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None and _lines(out / "batches.jsonl") < 2:
        time.sleep(0.02)
    assert process.poll() is None, process.communicate()
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert 2 <= _lines(out / "batches.jsonl") < 12
    assert not (out / "instructions.jsonl").exists()  # written at the end only, never half
    answered = server.stats()["answered"]

    server.configure({})
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    counts = Counter(b["id"] for b in read_jsonl(out / "batches.jsonl"))
    assert sorted(counts) == [f"b{i:06d}" for i in range(12)] and max(counts.values()) == 1
    assert server.stats()["answered"] <= 12 + 2  # at most the batches in flight at the kill asked twice
    assert answered < server.stats()["answered"]

    reference = tmp_path / "reference"  # the same rows as a run never interrupted
    assert _run(server, reference, "--rows", "60").exit_code == 0
    assert (out / "instructions.jsonl").read_text() == (reference / "instructions.jsonl").read_text()


# ------------------------------------------------------------------------------------------------ units
def test_the_plan_spreads_the_grid_and_keeps_its_first_batches_when_rows_grow():
    config = InstructionsConfig(rows=5 * 300)
    cells = plan(config).pairs
    plain = [c for c in cells if c.plain]
    assert len(plain) == 100  # 1/3 of the batches, exactly
    excluding = [(c.domain, c.register, c.form) for c in cells if not c.plain]
    assert len(set(excluding)) == len(excluding)  # the first pass of the grid (495 cells) repeats none
    assert Counter(c.form for c in cells if not c.plain).keys() == set(FORMS)
    assert plan(InstructionsConfig(rows=5 * 500)).pairs[:300] == cells
    assert plan(InstructionsConfig(rows=50, seed=1)).pairs != cells[:10]
    assert all(c.plain for c in plan(InstructionsConfig(rows=10, plain_fraction=1)).pairs)


def test_parse_answer_and_check_row():
    row = {"text": "Cats, not dogs.", "aspects": ["dogs"], "clauses": [", not dogs"]}
    for text in (
        json.dumps({"instructions": [row]}),
        "Sure!\n```json\n" + json.dumps([row]) + "\n```",
        "Here: " + json.dumps({"instructions": [row]}) + " Hope it helps.",
    ):
        assert parse_answer(text) == [row]
    assert parse_answer("### ???") is None and parse_answer('{"instructions": []}') is None
    assert parse_answer('{"instr') is None
    cut = json.dumps({"instructions": [row, {**row, "aspects": ["dogs", "cats"]}]})[
        :-40
    ]  # cut off by the limit
    assert parse_answer(cut) is None and parse_answer(json.dumps(row)) is None
    assert check_row(row, plain=False) == (row, None)
    assert check_row(row, plain=True)[1].startswith("kind: marks an exclusion")
    assert check_row({**row, "aspects": ["cats"]}, plain=False)[1] == (
        "aspects: is not a substring of the text inside one of its clauses"
    )
    assert check_row({**row, "clauses": []}, plain=False)[1].startswith(
        "clauses: aspects and clauses are both"
    )
    assert check_row("a string", plain=True)[1] == "expected a JSON object"
    assert check_row({"text": "Films without subtitles."}, plain=True) == (
        {"text": "Films without subtitles.", "aspects": [], "clauses": []},
        None,
    )


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--plain-fraction", "1.5"), "plain_fraction must be a number >= 0 and <= 1"),
        (("--batch-size", "0"), "batch_size must be a whole number >= 1"),
        (("--domain", "law", "--domain", "law"), "domains must be distinct"),
        (("--json-output", "yes"), "unknown JSON output mode"),
    ],
)
def test_bad_settings_are_one_line(flags, said, tmp_path):
    result = runner.invoke(app, ["instructions", "--output", str(tmp_path / "o"), *flags])
    assert result.exit_code == 2 and said in result.output, result.output


def test_settings_from_a_config_file(server, tmp_path):
    config = tmp_path / "instructions.yaml"
    config.write_text("rows: 10\ndomains: [law, news]\nregisters: [casual chat]\nplain_fraction: 0\n")
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["instructions", "-o", str(out), "--config", str(config), "--base-url", server.base_url, "-q"]
    )
    assert result.exit_code == 0, result.output
    rows = read_jsonl(out / "instructions.jsonl")
    assert {r["domain"] for r in rows} <= {"law", "news"} and {r["register"] for r in rows} == {"casual chat"}
    assert json.loads((out / "run.json").read_text())["config"]["domains"] == ["law", "news"]


def test_help_lists_every_setting_and_the_docs_hold_the_prompt_verbatim():
    shown = runner.invoke(app, ["instructions", "--help"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    renamed = {
        "domains": "--domain",
        "registers": "--register",
        "forms": "--form",
        "plain_forms": "--plain-form",
    }
    for f in fields(InstructionsConfig):
        assert f.metadata.get("help") and renamed.get(f.name, "--" + f.name.replace("_", "-")) in shown.output
    docs = (Path(__file__).parents[2] / "docs" / "synthesis.md").read_text()
    for text in (prompts.SYSTEM_PROMPT, prompts.PLAIN_KIND, prompts.EXCLUDING_KIND, prompts.REPLY):
        assert text in docs
    for name, hint in prompts.HINTS.items():
        assert f"| {name} | {hint} |" in docs
    for hint in (*prompts.PLACEMENTS, *prompts.ASPECTS, *prompts.LENGTHS):
        assert hint in docs
