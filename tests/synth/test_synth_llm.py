"""The LLM layer against our real local HTTP server through the real ``openai`` client: cache keys, the SQLite
cache, retries with backoff on 429/5xx/timeouts/malformed bodies (an empty ``choices`` list included, never
cached), the timeout as a deadline for the whole answer, a server that is not running failing fast,
non-retryable errors, the concurrency bound."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from infembed.synth.llm import (
    ChatRequest,
    ChatResponse,
    EndpointError,
    EndpointUnreachable,
    FatalEndpointError,
    LLMClient,
    MalformedResponse,
    OpenAIBackend,
    RequestRejected,
    ResponseCache,
    Sampling,
)
from infembed.synth.prompts import instruction_prompt

MESSAGES = instruction_prompt(
    "how much is a cost to run disneyland", "Disney's parks cost 571 million dollars a year."
)


def test_cache_key_covers_model_messages_sampling_and_attempt():
    base = ChatRequest.build("m", MESSAGES, Sampling(temperature=0.0, max_tokens=64))
    same = ChatRequest.build("m", MESSAGES, Sampling(temperature=0.0, max_tokens=64), stage="other label")
    assert base.key() == same.key()
    others = [
        ChatRequest.build("m2", MESSAGES, Sampling(temperature=0.0, max_tokens=64)),
        ChatRequest.build("m", MESSAGES[:1], Sampling(temperature=0.0, max_tokens=64)),
        ChatRequest.build("m", MESSAGES, Sampling(temperature=0.5, max_tokens=64)),
        ChatRequest.build("m", MESSAGES, Sampling(temperature=0.0, max_tokens=65)),
        ChatRequest.build("m", MESSAGES, Sampling(temperature=0.0, max_tokens=64), attempt=1),
    ]
    assert len({base.key(), *(o.key() for o in others)}) == 6


def test_retry_attempts_change_sampling_and_reasoning_models_get_their_parameters():
    retry = ChatRequest.build("gpt-4o-mini", MESSAGES, Sampling(temperature=0.0, seed=None), attempt=2)
    assert retry.sampling.temperature == 0.7 and retry.sampling.seed == 2
    body = ChatRequest.build(
        "o3-mini", MESSAGES, Sampling(temperature=0.0, max_tokens=100, reasoning_effort="low")
    ).body()
    assert (
        "temperature" not in body
        and body["max_completion_tokens"] == 100
        and body["reasoning_effort"] == "low"
    )
    body = ChatRequest.build("gpt-4o-mini", MESSAGES, Sampling(temperature=0.0, max_tokens=100)).body()
    assert body["temperature"] == 0.0 and body["max_tokens"] == 100 and "reasoning_effort" not in body


def test_cache_survives_reopening_and_is_shared(tmp_path):
    path = tmp_path / "cache.sqlite"
    first, second = ResponseCache(path), ResponseCache(path)  # two handles, as two processes would have
    first.put("k1", ChatResponse("hello", 10, 2, "stop", "m"))
    second.put("k2", ChatResponse("world", 11, 3, "stop", "m"))
    first.close()
    second.close()
    with ResponseCache(path) as cache:
        assert len(cache) == 2
        hit = cache.get("k1")
        assert (
            hit is not None
            and hit.cached
            and (hit.text, hit.prompt_tokens, hit.completion_tokens) == ("hello", 10, 2)
        )
        assert cache.get("nope") is None


def _client(server, tmp_path, **kwargs):
    timeout = kwargs.pop("timeout", 10.0)
    kwargs.setdefault("backoff_base", 0.01)
    kwargs.setdefault("max_retries", 3)
    return LLMClient(
        OpenAIBackend(base_url=server.base_url, timeout=timeout),
        ResponseCache(tmp_path / "c.sqlite"),
        **kwargs,
    )


def _ask(client, request):
    async def main():
        try:
            return await client.complete(request)
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_retries_429_and_5xx_then_succeeds(server, tmp_path):
    server.configure({"fail_next": [429, 500, 503]})
    client = _client(server, tmp_path)
    response = _ask(client, ChatRequest.build("fake", MESSAGES, stage="instruction"))
    assert response.text.startswith("Instruction: Prefer passages")
    assert response.prompt_tokens > 0 and response.completion_tokens > 0
    assert server.stats()["requests"] == 4
    usage = client.meter["instruction"]
    assert (usage.retries, usage.requests, usage.failures) == (3, 1, 0)


def test_cached_answers_cost_no_request(server, tmp_path):
    request = ChatRequest.build("fake", MESSAGES, stage="instruction")
    first = _ask(_client(server, tmp_path), request)
    client = _client(server, tmp_path)
    again = _ask(client, request)
    assert again.cached and again.text == first.text
    assert server.stats()["requests"] == 1
    assert client.meter["instruction"].cache_hits == 1


def test_gives_up_after_the_retries(server, tmp_path):
    server.configure({"fail_all": 500})
    client = _client(server, tmp_path, max_retries=2)
    with pytest.raises(EndpointError, match="failed after 3 tries: HTTP 500"):
        _ask(client, ChatRequest.build("fake", MESSAGES))
    assert server.stats()["requests"] == 3
    assert client.meter[""].failures == 1


def test_timeouts_and_malformed_bodies_are_retried(server, tmp_path):
    server.configure({"rules": [{"reply": "malformed", "times": 1}]})
    assert _ask(_client(server, tmp_path), ChatRequest.build("fake", MESSAGES)).text
    assert server.stats()["requests"] == 2
    server.configure({"latency": 0.6})
    server.reset()
    with pytest.raises(EndpointError, match="timed out"):
        _ask(
            _client(server, tmp_path, max_retries=1, timeout=0.2),
            ChatRequest.build("fake", MESSAGES, attempt=5),
        )
    assert server.stats()["requests"] == 2


def test_an_empty_choices_list_is_retried_and_never_cached(server, tmp_path):
    server.configure({"rules": [{"reply": "no_choices", "times": 1}]})
    client = _client(server, tmp_path)
    response = _ask(client, ChatRequest.build("fake", MESSAGES, stage="instruction"))
    assert response.text.startswith("Instruction: Prefer passages")
    assert server.stats()["requests"] == 2 and client.meter["instruction"].retries == 1
    # a server that only ever answers with no choices: the request fails, and nothing is cached for it
    server.configure({"rules": [{"reply": "no_choices", "times": -1}]})
    request = ChatRequest.build("fake", MESSAGES, attempt=1)
    with pytest.raises(EndpointError, match="malformed response: no choices"):
        _ask(_client(server, tmp_path, max_retries=1), request)
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        assert request.key() not in cache and len(cache) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"choices": []}, "choices"),
        ({"id": "x"}, "choices"),
        ({"choices": "x"}, "choices"),
        ({"choices": ["x"]}, "choices[0]"),
        ({"choices": [{"message": "oops"}]}, "choices[0].message"),
        ({"choices": [{"message": {"content": 3}}]}, "choices[0].message.content"),
        (["x"], ""),
    ],
)
def test_bodies_without_an_answer_are_malformed(body, field):
    with pytest.raises(MalformedResponse) as info:
        ChatResponse.from_completion(body)
    assert info.value.field == field


def test_a_null_content_is_an_empty_answer_and_bad_usage_is_estimated():
    body = {"choices": [{"message": {"content": None}, "finish_reason": "stop"}], "usage": "n/a"}
    response = ChatResponse.from_completion(body)
    assert (response.text, response.finish_reason, response.completion_tokens) == ("", "stop", 0)
    body = {"choices": [{"message": {"content": "12345678"}}], "usage": {"completion_tokens": "x"}}
    assert ChatResponse.from_completion(body).completion_tokens == 2


def test_the_timeout_is_a_deadline_for_the_whole_answer(server, tmp_path):
    # one byte every 20 ms: no single read waits long, the whole body (~400 bytes) would take 8 s
    server.configure({"rules": [{"trickle": 0.02, "times": -1}]})
    started = time.monotonic()
    with pytest.raises(EndpointError, match="timed out"):
        _ask(_client(server, tmp_path, max_retries=0, timeout=0.5), ChatRequest.build("fake", MESSAGES))
    assert time.monotonic() - started < 3.0


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_that_is_not_running_fails_fast_naming_its_url(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    client = LLMClient(
        OpenAIBackend(base_url=url, timeout=10), ResponseCache(tmp_path / "c.sqlite"), backoff_base=0.1
    )
    started = time.monotonic()
    with pytest.raises(EndpointUnreachable, match=f"cannot connect to {url} "):
        _ask(client, ChatRequest.build("fake", MESSAGES, stage="instruction"))
    # two quick retries (0.15-0.3 s here), not the six of a transient failure (3-6 s here, ~46 s by default)
    assert time.monotonic() - started < 2.0
    assert client.meter["instruction"].retries == 2


def test_client_errors_are_not_retried(server, tmp_path):
    server.configure({"rules": [{"status": 400, "times": 1}]})
    with pytest.raises(RequestRejected, match="400"):
        _ask(_client(server, tmp_path), ChatRequest.build("fake", MESSAGES))
    server.configure({"rules": [{"status": 401, "times": -1}]})
    server.reset()
    with pytest.raises(FatalEndpointError, match="401"):
        _ask(_client(server, tmp_path), ChatRequest.build("fake", MESSAGES))
    assert server.stats()["requests"] == 1


def test_backoff_grows_with_jitter_and_honours_retry_after():
    client = LLMClient(backend=None, backoff_base=1.0, backoff_max=8.0, seed=0)  # type: ignore[arg-type]
    for retry, cap in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 8.0)]:
        delays = [client._delay(retry, None) for _ in range(50)]
        assert all(cap / 2 <= d <= cap for d in delays)
        assert len(set(delays)) > 1
    assert client._delay(0, 5.0) == 5.0
    assert client._delay(0, 100.0) == 8.0


class _CountingBackend:
    def __init__(self):
        self.active = 0
        self.peak = 0

    async def complete(self, request):
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        return ChatResponse(request.messages[-1][1], 1, 1, "stop")

    async def aclose(self):
        return None


def test_concurrency_is_bounded():
    backend = _CountingBackend()
    client = LLMClient(backend, None, concurrency=3)

    async def main():
        requests = [ChatRequest.build("m", [{"role": "user", "content": str(i)}]) for i in range(20)]
        return await asyncio.gather(*(client.complete(r) for r in requests))

    answers = asyncio.run(main())
    assert [a.text for a in answers] == [str(i) for i in range(20)]
    assert backend.peak == 3
    with pytest.raises(ValueError):
        LLMClient(backend, None, concurrency=0)
