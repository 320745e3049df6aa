"""The service under hostile or unlucky input, started for real (uvicorn on 127.0.0.1, httpx and raw sockets).

Invariants: a request the encoder cannot take fails alone (422 when it is caught before batching, its own 500
otherwise), never the requests batched with it; a non-ASCII API key sent as UTF-8 matches; clients that connect
and stall (half a request line, or headers then half a body) are dropped within a bounded time, so they cannot
lock others out of the ``limit_concurrency`` slots.
"""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest
from background_server import BackgroundServer
from conftest import EXPECTED

from infembed.search.service import create_app

SURROGATE_BODY = b'{"query": "x \\ud800", "k": 1}'  # raw JSON: the escape decodes to a lone surrogate


def _burst(url: str, bodies: list[bytes]) -> list[httpx.Response]:
    async def run() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=len(bodies))
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
            headers = {"content-type": "application/json"}
            return await asyncio.gather(*(client.post("/search", content=b, headers=headers) for b in bodies))

    return asyncio.run(run())


def test_one_bad_text_fails_only_its_own_request(flat_index):
    """A lone surrogate used to make the tokenizer raise inside the shared encoder call: every request batched
    with it got 500 (76 of 80 over 5 rounds)."""
    n, rounds = 80, 3
    valid = [
        httpx.Request("POST", "/", json={"query": EXPECTED[i % len(EXPECTED)][0], "k": 1}).content
        for i in range(n)
    ]
    app = create_app(flat_index, max_wait_ms=50)
    with BackgroundServer(app) as url:
        for round_ in range(rounds):
            bad_at = (17 * round_ + 40) % (n + 1)
            responses = _burst(url, [*valid[:bad_at], SURROGATE_BODY, *valid[bad_at:]])
            bad = responses.pop(bad_at)
            assert bad.status_code == 422 and "lone UTF-16 surrogate" in bad.json()["detail"], bad.text
            assert [r.status_code for r in responses] == [200] * n, f"round {round_}"
            assert [r.json()["hits"][0]["id"] for r in responses] == [
                EXPECTED[i % len(EXPECTED)][2] for i in range(n)
            ]
        with httpx.Client(base_url=url, timeout=60) as client:
            stats = client.get("/health").json()["batching"]["search"]
    assert stats["encoder_calls"] < rounds * n / 4, "the requests were not batched together"


def test_a_failure_inside_the_batch_goes_to_its_request_only(flat_index):
    """What validation cannot foresee (here the exclusion splitter failing on one instruction, as an LLM
    splitter may) fails only that request, with a JSON 500; the others in its batch are answered."""
    from infembed.instructions import split_instruction

    def splitter(text: str):
        if "boom" in text:
            raise RuntimeError("the splitter failed")
        return split_instruction(text, "rules")

    app = create_app(flat_index, max_wait_ms=50, exclusions="llm", exclusion_splitter=splitter)
    n = 24
    bodies = [
        httpx.Request("POST", "/", json={"query": EXPECTED[i % len(EXPECTED)][0], "k": 1}).content
        for i in range(n)
    ]
    bodies.insert(5, httpx.Request("POST", "/", json={"query": "bees", "instruction": "boom"}).content)
    with BackgroundServer(app) as url:
        responses = _burst(url, bodies)
        with httpx.Client(base_url=url, timeout=60) as client:
            stats = client.get("/health").json()["batching"]["search"]
    bad = responses.pop(5)
    assert bad.status_code == 500 and "RuntimeError" in bad.json()["detail"]
    assert [r.status_code for r in responses] == [200] * n
    assert [r.json()["hits"][0]["id"] for r in responses] == [
        EXPECTED[i % len(EXPECTED)][2] for i in range(n)
    ]
    assert stats["failed_batches"] >= 1


@pytest.mark.parametrize("how", ["bearer", "x-api-key"])
def test_a_non_ascii_api_key_matches_when_sent_as_utf8(flat_index, how):
    key = "clé-schlüssel-🔑"
    raw = key.encode("utf-8")
    headers = {"authorization": b"Bearer " + raw} if how == "bearer" else {"x-api-key": raw}
    with (
        BackgroundServer(create_app(flat_index, api_key=key)) as url,
        httpx.Client(base_url=url, timeout=60) as c,
    ):
        ok = c.post("/search", json={"query": "how do bees make honey", "k": 1}, headers=headers)
        assert ok.status_code == 200 and ok.json()["hits"][0]["id"] == "bees"
        wrong = {"x-api-key": "clé-schlüssel-x".encode()}
        assert c.post("/search", json={"query": "bees"}, headers=wrong).status_code == 401
        latin1 = {"x-api-key": "clé".encode("latin-1")}  # not valid UTF-8 at all: refused, no crash
        assert c.post("/search", json={"query": "bees"}, headers=latin1).status_code == 401


def _closed_by_server(sock: socket.socket, within: float) -> bytes | None:
    """Read until the server closes the socket; what it sent, or None if still open after ``within`` s."""
    sock.settimeout(within)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return data


def test_stalled_clients_are_dropped_and_cannot_lock_others_out(flat_index):
    """Clients that open a connection and send half a request used to hold their slot for as long as they
    liked: ``limit_concurrency`` of them answered every other client with 503."""
    limit, header_timeout, body_timeout = 4, 1.0, 1.0
    app = create_app(flat_index, body_timeout_s=body_timeout)
    with BackgroundServer(app, limit_concurrency=limit, header_timeout_s=header_timeout) as url:
        address = (url.removeprefix("http://").split(":")[0], int(url.rsplit(":", 1)[1]))
        stalled = [socket.create_connection(address, timeout=5) for _ in range(limit)]
        try:
            for sock in stalled:
                sock.sendall(b"GET /hea")  # half a request line, then nothing
            start = time.monotonic()
            statuses = []
            with httpx.Client(base_url=url, timeout=10) as client:
                while time.monotonic() - start < 10 * header_timeout:  # bounded
                    statuses.append(client.get("/health", headers={"connection": "close"}).status_code)
                    if statuses[-1] == 200:
                        break
                    time.sleep(0.1)
            waited = time.monotonic() - start
            assert statuses[-1] == 200, f"still locked out after {waited:.1f} s: {statuses[-5:]}"
            assert statuses[0] == 503, statuses  # the slots were really taken
            assert waited < 5 * header_timeout
            assert [_closed_by_server(sock, 5 * header_timeout) for sock in stalled] == [b""] * limit

            # the headers, then half the body, then nothing: 408 once body_timeout has passed, and closed
            with socket.create_connection(address, timeout=5) as sock:
                sock.sendall(
                    b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b'Content-Length: 100\r\n\r\n{"query"'
                )
                reply = _closed_by_server(sock, 5 * body_timeout)
        finally:
            for sock in stalled:
                sock.close()
    assert reply is not None, "a stalled request body was not dropped"
    assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive within 1 s" in reply, reply


def test_health_answers_head_and_errors_are_json(flat_index):
    with BackgroundServer(create_app(flat_index)) as url, httpx.Client(base_url=url, timeout=60) as client:
        assert client.head("/health").status_code == 200
        response = client.put("/health")
        assert response.status_code == 405 and "detail" in response.json()


@pytest.mark.parametrize("flag", ["--header-timeout", "--body-timeout"])
def test_serve_refuses_a_timeout_that_is_not_positive(flat_index, flag):
    import typer
    from typer.testing import CliRunner

    from infembed.cli.search import register

    cli = typer.Typer()
    register(cli)
    result = CliRunner().invoke(cli, ["serve", "--index", str(flat_index.path), "--port", "1", flag, "0"])
    assert result.exit_code == 2, result.output
    setting = flag.removeprefix("--").replace("-", "_")  # the ServeSettings field behind the flag
    assert f"{setting} must be a number > 0 (seconds); got 0" in result.output
    assert "Traceback" not in result.output
