"""The LLM instruction splitter (infembed.instructions.llm_splitter) through the real openai client against the
test server on 127.0.0.1: answers are parsed, cached (a second splitter on the same cache sends no request),
and a malformed answer falls back to the rules for that instruction only."""

from __future__ import annotations

from fake_openai_server import FakeOpenAIServer

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
