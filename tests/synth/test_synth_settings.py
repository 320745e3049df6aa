"""Synthesis settings are declared once, in :class:`SynthConfig`, :class:`BenchmarkConfig` and
:class:`ClientConfig`: every field is a flag of the commands that use it (with its help text), a key of a
``--config`` YAML/JSON file, and (the generation settings) the ``config`` saved in ``run.json``, which reads
back into the same SynthConfig. A bad file or value exits 2 with one line naming it."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
import typer
from typer.testing import CliRunner

from infembed.cli.synth import app
from infembed.synth.benchmark import BenchmarkConfig
from infembed.synth.llm import ClientConfig
from infembed.synth.pipeline import SynthConfig

runner = CliRunner()
# flags whose name is not --field-name (kept from before the settings were generated)
RENAMED = {
    "max_passage_chars@benchmark": "--max-document-chars",
    "max_documents_in_prompt": "--max-documents",
}


def _flag(name: str, command: str) -> str:
    return RENAMED.get(f"{name}@{command}") or RENAMED.get(name) or "--" + name.replace("_", "-")


def _options(command: str) -> set[str]:
    click_command = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {o for p in click_command.params for o in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize(
    ("command", "classes", "left_out"),
    [
        ("run", (SynthConfig, ClientConfig), set()),
        (
            "benchmark",
            (BenchmarkConfig, ClientConfig),
            {"domain", "language", "style", "distractors", "judge"},
        ),
        (
            "export-batch",
            (SynthConfig, ClientConfig),
            {f.name for f in fields(ClientConfig)} - {"cache", "price", "allow_endpoint_change"}
            | {"max_consecutive_failures"},
        ),
    ],
)
def test_help_lists_every_setting(command, classes, left_out):
    options = _options(command)
    shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    for cls in classes:
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help text"
            if f.name in left_out:
                assert _flag(f.name, command) not in options, f.name
                continue
            flag = _flag(f.name, command)
            assert flag in options and flag in shown.output, flag
    # the flags of before, by their old names
    if command == "run":
        assert {"--no-cache", "--cache", "--price", "--quiet", "-q", "--judge", "--no-judge"} <= options


def _every_setting(server, tmp_path) -> dict:
    """A value for every field of SynthConfig and ClientConfig (all but the backend and the cache switch not
    their default)."""
    synth = {
        "model": "fake-gen",
        "judge_model": "fake-judge",
        "temperature": 0.5,
        "max_tokens": 300,
        "judge_max_tokens": 40,
        "domain": "web",
        "language": "english",
        "style": "negation",
        "distractors": 2,
        "answer_attempts": 2,
        "max_passage_chars": 1500,
        "seed": 7,
        "judge": False,
        "max_consecutive_failures": 5,
        "rows_in_flight": 2,
        "json_output": "json_object",
    }
    client = {
        "backend": "openai",
        "base_url": server.base_url,
        "api_key_env": "INFEMBED_TEST_KEY",
        "local_model": "smollm2",
        "concurrency": 2,
        "timeout": 30.0,
        "max_retries": 1,
        "retry_base": 0.01,
        "cache": str(tmp_path / "answers.sqlite"),
        "no_cache": False,
        "price": ["fake-gen=1.0,2.0", "fake-judge=3.0,4.0"],
        "batch_prices": True,
        "allow_endpoint_change": False,
    }
    assert set(synth) == {f.name for f in fields(SynthConfig)}
    assert set(client) == {f.name for f in fields(ClientConfig)}
    return {**synth, **client}


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_settings_file_with_every_field_round_trips_through_the_saved_run_config(
    server, seed_dir, tmp_path, suffix
):
    import yaml

    settings = _every_setting(server, tmp_path)
    path = tmp_path / f"synth{suffix}"
    path.write_text(yaml.safe_dump(settings) if suffix == ".yaml" else json.dumps(settings))
    out = tmp_path / "run"
    # a flag overrides the file
    result = runner.invoke(
        app,
        [
            "run",
            str(seed_dir),
            "-o",
            str(out),
            "--limit",
            "2",
            "--config",
            str(path),
            "--max-tokens",
            "256",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "run.json").read_text())["config"]
    expected = {k: v for k, v in settings.items() if k in saved}
    expected["max_tokens"] = 256
    assert SynthConfig.from_dict(saved) == SynthConfig(**expected)
    # the endpoint settings reached the client: its cache file, the prices at batch rates
    assert (tmp_path / "answers.sqlite").exists() and not (out / "cache.sqlite").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["cost_usd"]["batch_prices"] is True and summary["cost_usd"]["all_answers"] > 0
    assert summary["models"] == {"generation": "fake-gen", "judge": "fake-judge"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("concurrency: 2\nmodle: x\n", "unknown setting(s) modle"),
        ("concurrency: 0\n", "concurrency must be a whole number >= 1"),
        ("max_tokens: many\n", "field 'max_tokens': expected int"),
        ("price: [gpt-4o-mini]\n", "price 'gpt-4o-mini' is not MODEL=INPUT,OUTPUT"),
    ],
    ids=["unknown-key", "out-of-range", "wrong-type", "bad-price"],
)
def test_a_bad_settings_file_exits_2_naming_the_file(seed_dir, tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = runner.invoke(
        app, ["run", str(seed_dir), "-o", str(tmp_path / "o"), "--config", str(path), "-q"]
    )
    assert result.exit_code == 2, result.output
    assert "bad.yaml" in result.output and expected in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()  # nothing started


def test_a_bad_flag_value_exits_2_naming_the_setting(seed_dir, tmp_path):
    for args, expected in [
        (["--concurrency", "0"], "concurrency must be a whole number >= 1"),
        (["--backend", "vllm"], "backend must be one of openai, local"),
        (["--max-passage-chars", "10"], "max_passage_chars must be a whole number >= 100"),
    ]:
        result = runner.invoke(app, ["run", str(seed_dir), "-o", str(tmp_path / "o"), "-q", *args])
        assert result.exit_code == 2 and expected in result.output, result.output


def test_the_base_url_is_read_from_openai_base_url(server, seed_dir, tmp_path):
    result = runner.invoke(
        app,
        ["run", str(seed_dir), "-o", str(tmp_path / "o"), "--limit", "1", "--model", "fake-gen", "-q"],
        env={"OPENAI_BASE_URL": server.base_url},
    )
    assert result.exit_code == 0, result.output
    assert server.stats()["requests"] > 0
