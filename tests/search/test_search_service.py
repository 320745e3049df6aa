"""Tests of the HTTP service, started for real: uvicorn on 127.0.0.1 (a free port, on a thread), httpx clients.

Invariants: /search and /embed give what the Python API gives; bad bodies get 422, oversized ones 413, an
/embed on a BM25 index 400, each with a clear ``detail`` and without harming later requests; with an API key,
/search and /embed answer 401 unless the key comes as a Bearer token or an X-API-Key header; a burst of
concurrent requests all succeed with the right results and share encoder calls (micro-batching).
"""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest
from background_server import BackgroundServer
from conftest import EXPECTED

from infembed.search.service import create_app

MAX_TEXT_CHARS = 500
MAX_BATCH = 16
MAX_K = 20
KEY = "test-key-0123456789"


@pytest.fixture(scope="module")
def url(flat_index):
    app = create_app(
        flat_index, max_batch=MAX_BATCH, max_text_chars=MAX_TEXT_CHARS, max_k=MAX_K, max_wait_ms=20
    )
    with BackgroundServer(app) as base:
        yield base


@pytest.fixture(scope="module")
def client(url):
    with httpx.Client(base_url=url, timeout=60) as c:
        yield c


def _still_serving(client: httpx.Client) -> None:
    assert client.get("/health").status_code == 200
    response = client.post("/search", json={"query": "how do bees make honey", "k": 1})
    assert response.status_code == 200 and response.json()["hits"][0]["id"] == "bees"


def test_binds_loopback_and_reports_health(client, url, flat_index):
    assert url.startswith("http://127.0.0.1:")
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["count"] == 30 and health["kind"] == "flat"
    assert health["model_fingerprint"] == flat_index.fingerprint == health["model"]["fingerprint"]
    assert health["limits"]["max_k"] == MAX_K
    spec = client.get("/openapi.json").json()
    assert {"/search", "/embed", "/health"} <= set(spec["paths"])
    assert client.get("/docs").status_code == 200


def test_search_equals_python_api(client, flat_index):
    for query, instruction, expected in EXPECTED:
        body = client.post("/search", json={"query": query, "instruction": instruction, "k": 5}).json()
        want = flat_index.search([query], [instruction], k=5)[0]
        assert body["query"] == query and body["instruction"] == instruction and body["k"] == 5
        assert [h["id"] for h in body["hits"]] == [h.id for h in want]
        assert [h["rank"] for h in body["hits"]] == [1, 2, 3, 4, 5]
        assert body["hits"][0]["id"] == expected
        for got, hit in zip(body["hits"], want):
            assert got["score"] == pytest.approx(hit.score, abs=1e-5)
            assert (got["title"], got["text"]) == (hit.title, hit.text)


def test_batch_search(client, flat_index):
    items = [{"query": q, "instruction": i} for q, i, _ in EXPECTED]
    body = client.post("/search", json={"queries": items, "k": 3}).json()
    want = flat_index.search([q for q, _, _ in EXPECTED], [i for _, i, _ in EXPECTED], k=3)
    assert [[h["id"] for h in r["hits"]] for r in body["results"]] == [[h.id for h in hits] for hits in want]


def test_embed_equals_python_api(client, model):
    texts, instructions = ["heat transfer in hypersonic flow", "bees"], ["Only experiments.", None]
    body = client.post("/embed", json={"texts": texts, "kind": "query", "instructions": instructions}).json()
    assert body["dim"] == 384 and body["kind"] == "query" and body["model"] == model.fingerprint()
    np.testing.assert_allclose(
        np.array(body["embeddings"]), model.encode_queries(texts, instructions), atol=1e-5
    )
    body = client.post("/embed", json={"texts": texts, "kind": "passage"}).json()
    np.testing.assert_allclose(np.array(body["embeddings"]), model.encode_passages(texts), atol=1e-5)


@pytest.mark.parametrize(
    ("path", "payload", "status", "detail"),
    [
        ("/search", b"{not json", 422, "JSON"),
        ("/search", b"[" * 5000 + b"]" * 5000, 422, "nested too deeply"),
        ("/search", b'{"query": "\xff\xfe"}', 422, "not valid UTF-8 (byte 11)"),
        ("/search", b'{"query": "x \\ud800"}', 422, "query holds a lone UTF-16 surrogate (\\ud800) at character 3"),
        ("/search", {"query": "a", "k": True}, 422, "k: Input should be a valid integer"),
        ("/search", {"query": "a", "k": "3"}, 422, "k: Input should be a valid integer"),
        ("/search", b'{"queries": [{"query": "a"}, {"query": "b", "instruction": "\\udfff"}]}', 422,
         "queries[1].instruction holds a lone UTF-16 surrogate (\\udfff"),
        ("/embed", b'{"texts": ["ok", "\\ud800x"], "kind": "passage"}', 422, "texts[1] holds a lone UTF-16 surrogate"),
        ("/search", {}, 422, "give either 'query'"),
        ("/search", {"query": "a", "queries": [{"query": "b"}]}, 422, "not both"),
        ("/search", {"query": 5}, 422, "query"),
        ("/search", {"query": "a", "k": 0}, 422, "k"),
        ("/search", {"query": "a", "k": MAX_K + 1}, 422, f"at most {MAX_K}"),
        ("/search", {"query": "   "}, 422, "query is empty"),
        ("/search", {"query": "a", "colour": "red"}, 422, "colour"),
        ("/search", {"queries": []}, 422, "empty"),
        ("/search", {"query": "x" * (MAX_TEXT_CHARS + 1)}, 413, f"limit is {MAX_TEXT_CHARS}"),
        ("/search", {"query": "a", "instruction": "y" * (MAX_TEXT_CHARS + 1)}, 413, "instruction is"),
        ("/search", {"queries": [{"query": "a"}] * (MAX_BATCH + 1)}, 413, f"limit is {MAX_BATCH}"),
        ("/search", {"query": "a", "instruction": "z" * 10_000_000}, 413, "request body"),
        ("/embed", {"texts": ["a"]}, 422, "kind"),
        ("/embed", {"texts": ["a"], "kind": "image"}, 422, "kind"),
        ("/embed", {"texts": [], "kind": "query"}, 422, "texts"),
        ("/embed", {"texts": ["a"], "kind": "passage", "instruction": "b"}, 422, "kind 'query' only"),
        (
            "/embed",
            {"texts": ["a", "b"], "kind": "query", "instructions": ["c"]},
            422,
            "2 texts but 1 instructions",
        ),
        ("/embed", {"texts": ["a"] * (MAX_BATCH + 1), "kind": "passage"}, 413, f"limit is {MAX_BATCH}"),
        ("/embed", {"texts": ["x" * (MAX_TEXT_CHARS + 1)], "kind": "passage"}, 413, "texts[0]"),
    ],
)
def test_bad_requests_get_4xx_and_service_keeps_serving(client, path, payload, status, detail):
    if isinstance(payload, bytes):
        response = client.post(path, content=payload, headers={"content-type": "application/json"})
    else:
        response = client.post(path, json=payload)
    assert response.status_code == status, response.text
    assert detail in response.json()["detail"]
    _still_serving(client)


def test_body_without_content_length_is_bounded(client):
    def chunks():
        for _ in range(400):
            yield b" " * 65536  # 25 MiB of whitespace, streamed (chunked transfer encoding)

    response = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    _still_serving(client)


def test_api_key_enforced(flat_index):
    app = create_app(flat_index, api_key=KEY)
    with BackgroundServer(app) as base, httpx.Client(base_url=base, timeout=60) as c:
        body = {"query": "cryptocurrency mining", "k": 1}
        assert c.post("/search", json=body).status_code == 401
        response = c.post("/search", json=body, headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401 and "API key" in response.json()["detail"]
        assert c.post("/embed", json={"texts": ["a"], "kind": "query"}).status_code == 401
        assert (
            c.post("/search", content=b"{bad", headers={"X-API-Key": "wrong"}).status_code == 401
        )  # before parsing
        ok = c.post("/search", json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200 and ok.json()["hits"][0]["id"] == "bitcoin"
        assert c.post("/search", json=body, headers={"X-API-Key": KEY}).status_code == 200
        assert c.get("/health").status_code == 200  # liveness probes need no key
        assert c.get("/health").json()["auth"] is True


def test_concurrent_burst_succeeds_and_is_batched(url, client, flat_index):
    before = client.get("/health").json()["batching"]["search"]
    n = 32

    async def burst() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=n)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as c:
            return await asyncio.gather(
                *(c.post("/search", json={"query": EXPECTED[i % len(EXPECTED)][0], "k": 2}) for i in range(n))
            )

    responses = asyncio.run(burst())
    assert [r.status_code for r in responses] == [200] * n
    assert [r.json()["hits"][0]["id"] for r in responses] == [
        EXPECTED[i % len(EXPECTED)][2] for i in range(n)
    ]
    after = client.get("/health").json()["batching"]["search"]
    assert after["requests"] - before["requests"] == n
    calls = after["encoder_calls"] - before["encoder_calls"]
    assert calls < n / 2, f"{n} concurrent requests took {calls} encoder calls: not batched"


def test_embed_refused_on_bm25_index(bm25_index):
    with BackgroundServer(create_app(bm25_index)) as base, httpx.Client(base_url=base, timeout=60) as c:
        response = c.post("/embed", json={"texts": ["a"], "kind": "query"})
        assert response.status_code == 400 and "BM25" in response.json()["detail"]
        hits = c.post("/search", json={"query": "hypersonic heat", "k": 3}).json()["hits"]
        assert hits[0]["id"] == "hypersonic"


def test_micro_batcher_groups_splits_and_isolates_errors():
    from infembed.search.batcher import MicroBatcher

    seen: list[list[int]] = []

    def process(items: list[int]) -> list[int]:
        seen.append(list(items))
        if -1 in items:
            raise RuntimeError("boom")
        return [x * 10 for x in items]

    async def scenario(enabled: bool, max_batch: int) -> list:
        batcher = MicroBatcher(process, None, max_batch=max_batch, max_wait_ms=50, enabled=enabled)
        await batcher.start()
        try:
            results = await asyncio.gather(*(batcher.submit([i, i + 100]) for i in range(6)))
            failed = await asyncio.gather(batcher.submit([-1]), batcher.submit([7]), return_exceptions=True)
            after = await batcher.submit([8])
        finally:
            await batcher.stop()
        return [results, failed, after, batcher.stats()]

    results, failed, after, stats = asyncio.run(scenario(True, 64))
    assert results == [[i * 10, (i + 100) * 10] for i in range(6)]
    assert seen[0] == [x for i in range(6) for x in (i, i + 100)]  # six requests, one call
    # both shared the failing batch; each was retried alone, so only the culprit got the failure
    assert isinstance(failed[0], RuntimeError) and failed[1] == [70]
    assert seen[1:4] == [[-1, 7], [-1], [7]]
    assert after == [80] and stats["requests"] == 9 and stats["encoder_calls"] == 5
    assert stats["failed_batches"] == 1

    seen.clear()
    results, _, _, stats = asyncio.run(scenario(True, 4))
    assert results == [[i * 10, (i + 100) * 10] for i in range(6)]
    assert all(len(call) <= 4 for call in seen) and len(seen) >= 3 + 2  # 12 items in calls of <= 4

    seen.clear()
    results, _, _, stats = asyncio.run(scenario(False, 64))
    assert results == [[i * 10, (i + 100) * 10] for i in range(6)] and stats["encoder_calls"] == 9
