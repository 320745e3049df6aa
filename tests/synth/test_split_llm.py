"""The LLM instruction splitter (infembed.instructions.llm_splitter) through the real openai client against the
test server on 127.0.0.1: answers are parsed, cached (a second splitter on the same cache sends no request),
and a malformed answer falls back to the rules for that instruction only."""

from __future__ import annotations

import socket
import time

import pytest
from fake_openai_server import FakeOpenAIServer
from typer.testing import CliRunner

from infembed.cli import app as cli_app
from infembed.cli import evaluate as _evaluate  # noqa: F401  (registers "eval" on the app)
from infembed.data.errors import DataError
from infembed.instructions import Instruction, llm_splitter, split_instruction, split_instructions

TEXTS = [
    "Find reviews of hybrid cars. Documents about electric cars are not relevant.",
    "Only peer-reviewed studies are relevant.",
    "Guides to nginx. Ignore anything about Apache.",
]


def test_llm_splitter_parses_caches_and_falls_back(tmp_path):
    cache = str(tmp_path / "splits.sqlite")
    with FakeOpenAIServer() as server:
        url = f"http://127.0.0.1:{server.port}/v1"
        splitter = llm_splitter(url, "fake-model", cache=cache)
        splits = split_instructions(TEXTS, splitter)
        assert splits[0].exclude == ["electric cars"] and splits[2].exclude == ["Apache"]
        assert splits[1] == Instruction("Only peer-reviewed studies are relevant.")
        assert split_instruction(TEXTS[0], splitter) == splits[0]  # memoised: no new request
        sent = server.stats()["requests"]
        assert sent == len(TEXTS)

        again = llm_splitter(url, "fake-model", cache=cache)
        assert split_instructions(TEXTS, again) == splits
        assert server.stats()["requests"] == sent  # answered from the cache

        server.configure({"rules": [{"task": "split", "contains": "nginx", "reply": "garbage", "times": -1}]})
        fresh = llm_splitter(url, "fake-model", cache=str(tmp_path / "other.sqlite"))
        fallback = split_instructions(TEXTS, fresh)
        assert fallback[2] == split_instruction(TEXTS[2], "rules")  # garbage -> the rules for that one
        assert fallback[0].exclude == ["electric cars"]


def test_split_answers_are_cached_per_endpoint(tmp_path):
    """Splits cached from one endpoint are not served for another (a closed port is noticed, not skipped)."""
    cache = str(tmp_path / "splits.sqlite")
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        split_instructions(TEXTS, llm_splitter(a.base_url, "fake-model", cache=cache))
        assert a.stats()["requests"] == len(TEXTS)
        split_instructions(TEXTS, llm_splitter(b.base_url, "fake-model", cache=cache))
        assert b.stats()["requests"] == len(TEXTS)  # asked, not read from A's entries
        # the same name serving another model (llama.cpp serves its file under any name): asked again
        b.configure({"models": [{"id": "/models/other.gguf", "owned_by": "llamacpp"}]})
        b.reset()
        split_instructions(TEXTS, llm_splitter(b.base_url, "fake-model", cache=cache))
        assert b.stats()["requests"] == len(TEXTS)
        a.reset()
        split_instructions(TEXTS, llm_splitter(a.base_url, "fake-model", cache=cache))
        assert a.stats()["requests"] == 0  # its own entries still serve it
        closed = a.base_url
    started = time.monotonic()
    with pytest.raises(DataError, match=f"cannot connect to {closed}"):
        llm_splitter(closed, "fake-model", cache=cache)  # checked when built, before any model loads
    assert time.monotonic() - started < 3.0


def test_eval_with_an_unreachable_split_endpoint_is_one_line_and_fast(data_dir, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    started = time.monotonic()
    result = CliRunner().invoke(
        cli_app,
        ["eval", "-b", str(data_dir / "followir-cranfield-excl"), "-r", "bm25", "--exclusions", "llm"]
        + ["--exclusion-llm-url", url, "--exclusion-llm-model", "m", "-o", str(tmp_path / "r.json")],
    )
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and f"cannot connect to {url}" in lines[0] and "Traceback" not in result.output
    assert time.monotonic() - started < 5.0


def test_endpoint_errors_are_printed_as_one_line():
    """The CLI prints DataErrors as one line (exit 2): every error of an endpoint that fails is one."""
    from infembed.synth.llm import EndpointError, EndpointUnreachable, FatalEndpointError

    for error in (EndpointError, FatalEndpointError, EndpointUnreachable):
        assert issubclass(error, DataError), error
