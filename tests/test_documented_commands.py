"""The commands in the README and docs/ run as written.

Every ``infembed ...`` line of a fenced bash block in README.md and docs/*.md (read when the tests run, so a
command added to the docs is covered at once) is either run, with its paths as written, or listed in
:data:`SKIP` with the reason it cannot run here (the hub, an LLM server, several GPUs, a long-running server);
a skipped command must still use only flags its verb has. A command that is neither runs, and fails if it
cannot: add it to SKIP with a reason, or fix it.

The commands run on small data: a ``../shared/data`` beside each document's working directory holds a few
queries of the shared Cranfield benchmarks and a few InF-IR rows (``$INFEMBED_DATA_DIR`` points there too), so a
documented path such as ``../shared/data/followir-cranfield`` resolves as it does for a user. What a document
uses but does not make (a model dir such as ``runs/my-model``, ``corpus.jsonl``, ``train.yaml``, an index) is
made first (:data:`SETUP`); within a document, ``train`` commands run first, since the others use their models.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from infembed.cli import _register, app

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell|console)[^\n]*\n(.*?)^```", re.S | re.M)

# Commands that cannot run here, by their text (comments and line continuations removed), with the reason.
HUB = "needs the Hugging Face hub (offline here)"
LLM = "needs an LLM endpoint (OpenAI-compatible server)"
GPUS = "needs torchrun on several GPUs/processes"
SERVER = "starts a long-running HTTP server"
SKIP: dict[str, str] = {
    "infembed eval --benchmark followir/core17 --model intfloat/e5-base-v2": HUB,
    "infembed eval --benchmark bright/biology --model my-model/": HUB,
    "infembed train --config train.yaml": "runs in docs/training.md (with --seed 1), on the train.yaml shown there",
    "torchrun --nproc_per_node 8 -m infembed.cli train --data InF-IR/InF-IR --model Qwen/Qwen2.5-1.5B "
    "--pooling last --lora --output runs/qwen": GPUS + "; " + HUB,
    "infembed synth benchmark ../shared/data/raw/cranfield -o bench/cran-llm --limit 40 --exclusions": LLM,
    "infembed eval -b bench/cran-llm -r bm25": "scores the benchmark the LLM command above writes",
    "infembed synth instructions --base-url http://127.0.0.1:8080/v1 --model local -o runs/instr --rows 300": LLM,
    "infembed serve --index idx/ --port 8000": SERVER,
    "infembed eval -b DIR -m my-model --exclusions llm --exclusion-llm-url http://127.0.0.1:8080/v1 "
    "--exclusion-llm-model smollm2": LLM + "; DIR and my-model stand for the user's own",
    "infembed serve -i idx/ --exclusions auto": SERVER,
    "INFEMBED_API_KEY=... infembed serve --index my-index --port 8000": SERVER,
    "torchrun --standalone --nproc_per_node 4 $(which infembed) index --model runs/my-model --corpus corpus.jsonl "
    "--output my-index": GPUS,
    "infembed index --model runs/my-model --corpus corpus.jsonl --output my-index --store milvus "
    "--uri http://milvus:19530 --collection my_corpus": "needs a Milvus server",
    "infembed serve --index my-index --port 8000": SERVER,
    "infembed synth run path/to/msmarco-seed --output runs/inf-ir --limit 1000 --model gpt-4o-mini "
    "--judge-model o3-mini --concurrency 32": LLM,
    "infembed synth run pairs.jsonl --output runs/qwen --base-url http://localhost:8000/v1 "
    "--model Qwen/Qwen2.5-7B-Instruct --concurrency 64": LLM,
    "infembed synth run ../shared/data/raw/msmarco-instructir-seed --output runs/negation --limit 20 "
    "--style negation --base-url http://localhost:8080/v1 --model local --json-output json_object": LLM,
    "infembed synth export-batch seed-dir --output runs/b --limit 10000 --batch-file round1.jsonl": "needs a seed dir of the user's own and the batch API's answers",
    "infembed synth import-batch round1-output.jsonl --cache runs/b/cache.sqlite": "needs the batch API's answers",
    "infembed synth export-batch seed-dir --output runs/b --limit 10000 --batch-file round2.jsonl": "needs the batch API's answers to round 1",
    "infembed synth stats runs/inf-ir other-set.jsonl --map map.png --json stats.json": "reads the rows of the LLM run above",
    "infembed synth benchmark ../shared/data/raw/cranfield --output bench/cranfield-llm --limit 40 "
    "--model gpt-4o-mini --exclusions": LLM,
    "infembed eval -b bench/cranfield-llm -r bm25": "scores the benchmark the LLM command above writes",
    "infembed synth instructions --output runs/instructions --rows 3000 --model gpt-4o-mini "
    "--json-output json_schema --concurrency 16": LLM,
    "infembed decomposer train --data runs/instructions/instructions.jsonl --output runs/decomposer": "trains on the instructions the LLM command above writes (minutes)",
    "infembed train --data InF-IR/InF-IR:msmarco --model Qwen/Qwen2.5-1.5B --pooling last --lora "
    "--output runs/qwen": HUB + "; a 1.5B model",
    "torchrun --nproc_per_node 8 -m infembed.cli train --data InF-IR/InF-IR --model intfloat/e5-base-v2 "
    "--output runs/e5": GPUS + "; " + HUB,
}

# What each document uses without making it: model dirs (a saved copy of the packaged MiniLM), the small corpus,
# the train.yaml of docs/training.md, an index built from the corpus.
SETUP: dict[str, list[str]] = {
    "README.md": ["corpus.jsonl"],
    "evaluation.md": ["runs/minilm-inf"],
    "instructions.md": ["runs/my-model", "corpus.jsonl", "idx/"],
    "search.md": ["runs/my-model", "corpus.jsonl"],
    "training.md": ["train.yaml"],
}


@dataclass
class Command:
    doc: str
    text: str  # as written, one line, without its comment
    tokens: list[str]

    @property
    def argv(self) -> list[str]:
        """The arguments after ``infembed`` (or ``-m infembed.cli``, ``$(which infembed)``)."""
        for i, token in enumerate(self.tokens):
            if token in ("infembed", "infembed)", "infembed.cli") or token.endswith("/infembed"):
                return self.tokens[i + 1 :]
        raise AssertionError(f"no infembed in {self.text!r}")


def documented_commands() -> list[Command]:
    found = []
    for doc in DOCS:
        for block in SHELL_BLOCK.findall(doc.read_text(encoding="utf-8")):
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                tokens = shlex.split(line, comments=True)
                if not any(re.fullmatch(r"(.*/)?infembed\)?|infembed\.cli", t) for t in tokens):
                    continue
                found.append(
                    Command(doc.name, " ".join(shlex.quote(t) if " " in t else t for t in tokens), tokens)
                )
    return found


COMMANDS = documented_commands()


def _root() -> Any:
    _register()
    return typer.main.get_command(app)


def _verb(argv: list[str]) -> tuple[Any, list[str]]:
    """The click command that ``argv`` calls, and the rest of ``argv``."""
    command, rest = _root(), list(argv)
    while rest and hasattr(command, "commands") and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    return command, rest


def _needs_missing_openvino(command: Command) -> bool:
    """``--backend openvino`` runs only with the openvino extra (part of `make test`); without it the command
    is one clear error line, tested in tests/model/test_backend_cli.py."""
    import importlib.util

    return "openvino" in command.argv and importlib.util.find_spec("openvino") is None


def test_commands_are_found():
    assert len(COMMANDS) >= 20, [c.text for c in COMMANDS]
    assert any(c.doc == "README.md" and c.argv[:1] == ["train"] for c in COMMANDS)


def test_every_skip_is_still_documented():
    texts = {c.text for c in COMMANDS}
    stale = sorted(set(SKIP) - texts)
    assert not stale, f"SKIP lists commands that the docs no longer have: {stale}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.text in SKIP], ids=lambda c: c.text[:60])
def test_a_skipped_command_uses_only_real_flags(command):
    verb, rest = _verb(command.argv)
    assert not hasattr(verb, "commands"), f"{command.text}: no such verb"
    names = {
        name for p in verb.params for name in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]
    }
    flags = [t.split("=", 1)[0] for t in rest if t.startswith("-") and not re.fullmatch(r"-\d+(\.\d+)?", t)]
    unknown = [f for f in flags if f not in names]
    assert not unknown, f"{command.doc}: {command.text}: {verb.name} has no {unknown}"


# ------------------------------------------------------------------------------------------ running them


def _subset_benchmark(source: Path, target: Path, queries: int = 4, extra_docs: int = 20) -> None:
    target.mkdir(parents=True)
    rows = [json.loads(line) for line in (source / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    keep = {row["_id"] for row in rows[:queries]}
    (target / "queries.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows[:queries]), encoding="utf-8"
    )
    docs: set[str] = set()
    for name in ("qrels_og.tsv", "qrels_changed.tsv"):
        lines = (source / name).read_text(encoding="utf-8").splitlines()
        kept = [lines[0]] + [line for line in lines[1:] if line.split("\t")[0] in keep]
        docs |= {line.split("\t")[1] for line in kept[1:]}
        (target / name).write_text("\n".join(kept) + "\n", encoding="utf-8")
    corpus = (source / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    chosen = [line for i, line in enumerate(corpus) if i < extra_docs or json.loads(line)["_id"] in docs]
    (target / "corpus.jsonl").write_text("\n".join(chosen) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def sandbox(data_dir, tmp_path_factory):
    """``ROOT/shared/data`` (small copies of the shared data) and a saved copy of the packaged MiniLM."""
    from infembed.model import InFEmbed

    root = tmp_path_factory.mktemp("documented")
    small = root / "shared" / "data"
    for name in ("followir-cranfield", "followir-cranfield-excl"):
        _subset_benchmark(data_dir / name, small / name)
    for name, rows in (("inf-ir-msmarco-sample", 4), ("inf-ir-msmarco-negation", 8)):
        lines = (data_dir / name / "train.jsonl").read_text(encoding="utf-8").splitlines()[:rows]
        (small / name).mkdir()
        (small / name / "train.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    InFEmbed.load(device="cpu").save(root / "model")
    return root


def _yaml_of_training_md() -> str:
    text = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    found = re.search(r"^```yaml\n(.*?)^```", text, re.S | re.M)
    assert found, "docs/training.md has no train.yaml example"
    return found.group(1)


def _invoke(argv: list[str], env: dict[str, str]) -> Any:
    _register()
    return CliRunner().invoke(app, argv, env=env, prog_name="infembed")


def _provide(what: str, cwd: Path, sandbox: Path, env: dict[str, str]) -> None:
    if what.startswith("runs/"):
        shutil.copytree(sandbox / "model", cwd / what, copy_function=os.link)
    elif what == "corpus.jsonl":
        shutil.copy(sandbox / "shared" / "data" / "followir-cranfield" / "corpus.jsonl", cwd / what)
    elif what == "train.yaml":
        (cwd / what).write_text(_yaml_of_training_md(), encoding="utf-8")
    elif what == "idx/":
        result = _invoke(
            ["index", "--model", str(sandbox / "model"), "--corpus", "corpus.jsonl", "-o", "idx/"], env
        )
        assert result.exit_code == 0, result.output
    else:  # pragma: no cover - a SETUP entry without a recipe
        raise AssertionError(f"no recipe to make {what}")


def _expand(tokens: list[str], cwd: Path) -> list[str]:
    """What the shell would do: a glob such as ``results/*.json`` becomes the files it matches."""
    out = []
    for token in tokens:
        matches = sorted(glob.glob(token, root_dir=cwd)) if any(c in token for c in "*?[") else []
        out.extend(matches or [token])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("doc", [d.name for d in DOCS if any(c.doc == d.name for c in COMMANDS)])
def test_documented_commands_run(doc, sandbox, monkeypatch):
    commands = [c for c in COMMANDS if c.doc == doc and c.text not in SKIP and not _needs_missing_openvino(c)]
    commands.sort(key=lambda c: c.argv[:1] != ["train"])  # stable: train first, then as written
    cwd = sandbox / Path(doc).stem
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    env = {"INFEMBED_DATA_DIR": str(sandbox / "shared" / "data"), "HF_HUB_OFFLINE": "1", "COLUMNS": "120"}
    for what in SETUP.get(doc, []):
        _provide(what, cwd, sandbox, env)
    failed = []
    for command in commands:
        result = _invoke(_expand(command.argv, cwd), env)
        if result.exit_code != 0:
            error = (
                repr(result.exception)
                if result.exception and not isinstance(result.exception, SystemExit)
                else ""
            )
            tail = " | ".join(line for line in result.output.strip().splitlines()[-3:])
            failed.append(f"{command.text}\n    exit {result.exit_code}: {error} {tail}")
    assert not failed, f"{doc}: documented commands that fail:\n" + "\n".join(failed)
