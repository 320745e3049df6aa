"""The service's ASGI guard: the API key on the protected paths, the body size bound, the body read
deadline and a JSON body's encoding (UTF-8), all checked before a body is parsed."""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Callable
from typing import Any

PROTECTED_PATHS = ("/search", "/embed")


class Guard:
    """Pure ASGI middleware: API key on the protected paths, then the body size bound and the body read
    deadline, all before the body is parsed (so an unauthenticated, oversized or stalled request costs
    nothing)."""

    def __init__(
        self, app: Any, *, api_key: str | None, max_body_bytes: int, body_timeout_s: float | None = None
    ):
        self.app = app
        self.api_key = None if api_key is None else api_key.encode("utf-8")
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw_headers = {k.lower(): v for k, v in scope.get("headers", [])}
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in raw_headers.items()}
        path = scope.get("path", "")
        if self.api_key is not None and path in PROTECTED_PATHS and not _key_ok(raw_headers, self.api_key):
            await _reply(
                send,
                401,
                "missing or wrong API key: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await _reply(
                send, 413, f"the request body is {int(length)} bytes; the limit is {self.max_body_bytes}"
            )
            return
        body = bytearray()
        loop = asyncio.get_running_loop()
        deadline = None if self.body_timeout_s is None else loop.time() + self.body_timeout_s
        while True:
            try:  # a client that stalls mid-body is dropped, or it would hold a connection slot for ever
                wait = None if deadline is None else max(0.0, deadline - loop.time())
                message = await asyncio.wait_for(receive(), wait)
            except (TimeoutError, asyncio.TimeoutError):
                await _reply(
                    send,
                    408,
                    f"the request body did not arrive within {self.body_timeout_s:g} s",
                    [(b"connection", b"close")],
                )
                return
            if message["type"] == "http.disconnect":
                return
            body.extend(message.get("body", b""))
            if len(body) > self.max_body_bytes:
                await _reply(send, 413, f"the request body is over the limit of {self.max_body_bytes} bytes")
                return
            if not message.get("more_body", False):
                break
        problem = _not_utf8_json(headers.get("content-type"), bytes(body))
        if problem:
            await _reply(send, 422, problem)
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def json_typed(content_type: str | None) -> bool:
    """Whether FastAPI parses a body of this Content-Type as JSON: none given, ``application/json`` or
    ``application/*+json``."""
    if not content_type:
        return True
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def _not_utf8_json(content_type: str | None, body: bytes) -> str | None:
    """Why a JSON body is not UTF-8, or None. Python's json.loads takes bytes in UTF-16 and UTF-32 too (it
    guesses the encoding from the zero bytes), so such a body used to be accepted; JSON over HTTP is UTF-8."""
    if not body or not json_typed(content_type):
        return None
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"the request body is not valid UTF-8 (byte {error.start}); send JSON encoded as UTF-8"
    if b"\x00" in body:  # UTF-16/UTF-32 text of ASCII characters is valid UTF-8, but full of NUL bytes
        return (
            f"the request body is not UTF-8 JSON (a NUL byte at byte {body.index(0)}, as in UTF-16 or UTF-32); "
            "send JSON encoded as UTF-8"
        )
    return None


def _key_ok(headers: dict[bytes, bytes], api_key: bytes) -> bool:
    """Compare the header's raw bytes with the key's UTF-8 bytes (clients send a non-ASCII key as UTF-8;
    decoding the header as Latin-1 and re-encoding it as UTF-8 would never match)."""
    given = headers.get(b"x-api-key")
    auth = headers.get(b"authorization", b"")
    if given is None and auth[:7].lower() == b"bearer ":
        given = auth[7:].strip()
    return given is not None and hmac.compare_digest(given, api_key)


async def _reply(send: Callable, status: int, detail: str, extra_headers: list | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})
