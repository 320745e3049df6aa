"""The HTTP service: search an index and embed texts over HTTP (FastAPI + uvicorn).

    >>> from infembed.search import Index, create_app
    >>> app = create_app(Index.load("my-index"), api_key="s3cret")
    >>> # or from the shell:  infembed serve --index my-index --port 8000 --api-key s3cret

Endpoints (OpenAPI docs at ``/docs``):

- ``POST /search`` ``{"query", "instruction", "k"}`` -> ``{"query", "instruction", "k", "hits": [{rank, id,
  score, title, text}]}``; or a batch ``{"queries": [{"query", "instruction"}], "k"}`` -> ``{"results": [...]}``.
- ``POST /embed`` ``{"texts": [...], "kind": "query" | "passage", "instructions": [...]?}`` ->
  ``{"embeddings": [[...]], "dim", "kind", "model"}`` (L2-normalised, float32 precision).
- ``GET /health`` -> the index kind, document count, model fingerprint, limits and batching counters.

Why a micro-batcher: one encoder call on 32 texts costs far less than 32 calls on one text (bench/search.py
prints the ratio), so concurrent requests are queued for up to ``max_wait_ms`` (or until ``max_batch`` texts)
and encoded in one call on a single worker thread; each request then gets its own rows back. The worker
thread is also what keeps the model single-threaded: torch modules are not meant to run concurrent forwards.

Every text is checked per request before it joins a batch (empty, too long, lone surrogates), and when an
encoder call still fails on a batch, its requests are retried one by one: a bad request fails alone.

Bounds, so one client cannot exhaust the server: ``max_text_chars`` per query/instruction/text, ``max_batch``
items per request, ``max_k`` results, ``max_body_bytes`` per body (checked before the body is read when a
Content-Length is sent, and while reading otherwise), ``limit_concurrency`` open connections (uvicorn answers
503 beyond), ``header_timeout_s`` to send a request's headers (then the connection is closed) and
``body_timeout_s`` to send its body (408), so stalled clients cannot hold the connection slots. Errors are
JSON ``{"detail": "<one clear sentence>"}``: 401 (API key), 408 (body too slow), 413 (too large), 422 (body
does not match the schema, is not UTF-8, or holds a lone surrogate), 400 (valid but not servable, e.g. /embed
on a BM25 index), 500 (the server failed on this request; the traceback is in its log).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infembed import __version__
from infembed.search.index import Hit, Index

logger = logging.getLogger("infembed.search.service")

LOOPBACK = ("127.0.0.1", "localhost", "::1")
PROTECTED_PATHS = ("/search", "/embed")


# --------------------------------------------------------------------------------------------- batching


class MicroBatcher:
    """Run ``process(items) -> results`` on the items of many concurrent requests at once.

    ``await batcher.submit(items)`` queues a request's items; a background task waits up to ``max_wait_ms``
    for other requests (or until ``max_batch`` items are queued), calls ``process`` once on all of them in
    ``executor`` (None: asyncio's default pool), and hands each request its own slice of the results. When
    ``process`` fails on a batch of several requests, each request is retried on its own, so the failure goes
    only to the request that causes it (one bad text must not fail the others); the batcher keeps running.
    With ``enabled=False`` every request calls ``process`` on its own (same executor): the bench's baseline.
    """

    def __init__(
        self,
        process: Callable[[list[Any]], Sequence[Any]],
        executor: ThreadPoolExecutor | None,
        *,
        max_batch: int = 64,
        max_wait_ms: float = 2.0,
        enabled: bool = True,
    ):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.process = process
        self.executor = executor
        self.max_batch = max_batch
        self.max_wait = max(0.0, max_wait_ms) / 1000.0
        self.enabled = enabled
        self.calls = 0
        self.items = 0
        self.requests = 0
        self.failed_batches = 0
        self._queue: asyncio.Queue | None = None
        self._queued_items = 0
        self._full: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        if self.enabled and self._task is None:
            self._queue = asyncio.Queue()
            self._full = asyncio.Event()
            self._task = asyncio.create_task(self._run(), name="infembed-micro-batcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while self._queue is not None and not self._queue.empty():
            _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(RuntimeError("the service is shutting down"))

    def stats(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "max_batch": self.max_batch,
            "max_wait_ms": self.max_wait * 1000.0,
            "requests": self.requests,
            "encoder_calls": self.calls,
            "items": self.items,
            "failed_batches": self.failed_batches,
        }

    async def submit(self, items: Sequence[Any]) -> list[Any]:
        items = list(items)
        self.requests += 1
        loop = asyncio.get_running_loop()
        if not self.enabled:
            self.calls += 1
            self.items += len(items)
            return list(await loop.run_in_executor(self.executor, self.process, items))
        if self._queue is None:
            raise RuntimeError("MicroBatcher.start() was not called (the app's lifespan did not run)")
        future: asyncio.Future = loop.create_future()
        self._queue.put_nowait((items, future))
        self._queued_items += len(items)
        if self._queued_items >= self.max_batch:
            self._full.set()
        return await future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        carry: tuple[list[Any], asyncio.Future] | None = None
        while True:
            if carry is not None:
                first, carry = carry, None
            else:
                first = await self._queue.get()
                self._queued_items -= len(first[0])
            batch = [first]
            total = len(first[0])
            if total < self.max_batch and self.max_wait > 0 and self._queued_items + total < self.max_batch:
                self._full.clear()
                with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
                    await asyncio.wait_for(self._full.wait(), self.max_wait)
            while total < self.max_batch and not self._queue.empty():
                entry = self._queue.get_nowait()
                self._queued_items -= len(entry[0])
                if total + len(entry[0]) > self.max_batch:
                    carry = entry  # starts the next batch
                    break
                batch.append(entry)
                total += len(entry[0])
            if self._queued_items < self.max_batch:
                self._full.clear()
            batch = [(items, future) for items, future in batch if not future.done()]  # cancelled requests
            if not batch:
                continue
            flat = [item for items, _ in batch for item in items]
            self.calls += 1
            self.items += len(flat)
            try:
                results = await loop.run_in_executor(self.executor, self.process, flat)
            except Exception as error:
                if len(batch) == 1:
                    if not batch[0][1].done():
                        batch[0][1].set_exception(error)
                    continue
                # Retry each request alone: only the one(s) that cause the failure get it.
                self.failed_batches += 1
                for items, future in batch:
                    if future.done():
                        continue
                    self.calls += 1
                    try:
                        alone = await loop.run_in_executor(self.executor, self.process, items)
                    except Exception as own_error:
                        if not future.done():
                            future.set_exception(own_error)
                    else:
                        if not future.done():
                            future.set_result(list(alone))
                continue
            start = 0
            for items, future in batch:
                if not future.done():
                    future.set_result(list(results[start : start + len(items)]))
                start += len(items)


# --------------------------------------------------------------------------------------------- the ASGI guard


class _Guard:
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
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


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


# --------------------------------------------------------------------------------------------- the app


class QueryItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(..., description="The search query.", examples=["heat transfer in hypersonic flow"])
    instruction: str | None = Field(
        None,
        description="What makes a passage relevant (optional).",
        examples=["Only wind-tunnel experiments are relevant."],
    )


class SearchRequest(BaseModel):
    """One search (``query``, ``instruction``) or a batch (``queries``); ``k`` results each."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "heat transfer in hypersonic flow",
                    "instruction": "Only experimental studies.",
                    "k": 5,
                },
                {
                    "queries": [
                        {"query": "protein folding"},
                        {"query": "solar eclipses", "instruction": "history"},
                    ],
                    "k": 3,
                },
            ]
        },
    )
    query: str | None = Field(None, description="One query (or use 'queries' for a batch).")
    instruction: str | None = Field(None, description="The instruction for 'query'.")
    queries: list[QueryItem] | None = Field(
        None, description="A batch of queries (at most max_batch, see /health)."
    )
    k: int = Field(10, ge=1, strict=True, description="Results per query, 1 to max_k (see /health).")
    exclusions: Literal["off", "rules"] | None = Field(
        None,
        description="How instructions that exclude are handled: 'rules' (search with what the instruction keeps, "
        "push down passages matching what it excludes) or 'off'. Default: the server's (see /health).",
    )

    @model_validator(mode="after")
    def _one_form(self) -> SearchRequest:
        if (self.query is None) == (self.queries is None):
            raise ValueError(
                "give either 'query' (one search) or 'queries' (a batch), not both and not neither"
            )
        if self.queries is not None and self.instruction is not None:
            raise ValueError("with 'queries', put each 'instruction' inside its item")
        return self


class HitOut(BaseModel):
    rank: int
    id: str
    score: float
    title: str
    text: str


class InstructionSplit(BaseModel):
    keep: str
    exclude: list[str]
    guards: list[str] | None = None


class SearchResult(BaseModel):
    query: str
    instruction: str | None
    k: int
    exclusions: str
    split: InstructionSplit | None = Field(
        None, description="How the instruction was split (present when it excludes something)."
    )
    hits: list[HitOut]


class BatchSearchResult(BaseModel):
    results: list[SearchResult]


class EmbedRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "texts": ["heat transfer in hypersonic flow"],
                    "kind": "query",
                    "instructions": ["Only experiments."],
                },
                {"texts": ["A wind-tunnel study of ..."], "kind": "passage"},
            ]
        },
    )
    texts: list[str] = Field(..., min_length=1, description="1 to max_batch texts (see /health).")
    kind: Literal["query", "passage"] = Field(
        ..., description="Queries get the instruction template; passages do not."
    )
    instructions: list[str | None] | None = Field(None, description="One per text (kind 'query' only).")
    instruction: str | None = Field(None, description="One instruction for all texts (kind 'query' only).")

    @model_validator(mode="after")
    def _instructions(self) -> EmbedRequest:
        if self.kind == "passage" and (self.instructions is not None or self.instruction is not None):
            raise ValueError("instructions apply to kind 'query' only")
        if self.instructions is not None and self.instruction is not None:
            raise ValueError("give 'instructions' (one per text) or 'instruction' (for all), not both")
        if self.instructions is not None and len(self.instructions) != len(self.texts):
            raise ValueError(f"{len(self.texts)} texts but {len(self.instructions)} instructions")
        return self


class EmbedResult(BaseModel):
    embeddings: list[list[float]]
    dim: int
    kind: str
    model: str | None


def create_app(
    index: Index,
    api_key: str | None = None,
    *,
    max_batch: int = 64,
    max_text_chars: int = 4096,
    max_k: int = 100,
    batching: bool = True,
    max_wait_ms: float = 2.0,
    max_body_bytes: int | None = None,
    encode_batch_size: int = 64,
    exclusions: str = "rules",
    exclusion_splitter: Callable[[str], Any] | None = None,
    body_timeout_s: float | None = 30.0,
) -> Any:
    """A FastAPI app serving ``index``. ``api_key``: required on /search and /embed when set (header
    ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``, compared as UTF-8 bytes). ``batching=False``
    encodes each request on its own (for comparison). ``body_timeout_s``: a request body must arrive within
    this time (else 408). Limits: see the module docstring."""
    from fastapi import Depends, FastAPI, HTTPException, Request
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi.security import APIKeyHeader, HTTPBearer
    from starlette.exceptions import HTTPException as StarletteHTTPException

    if min(max_batch, max_text_chars, max_k) < 1:
        raise ValueError("max_batch, max_text_chars and max_k must be at least 1")
    if api_key is not None and not api_key.strip():
        raise ValueError("the API key is empty")
    if body_timeout_s is not None and not body_timeout_s > 0:
        raise ValueError(f"body_timeout_s must be positive, got {body_timeout_s}")
    if max_body_bytes is None:
        # room for max_batch (query + instruction) pairs of max_text_chars, JSON-escaped (up to 6 bytes a char)
        max_body_bytes = 2 * max_batch * max_text_chars * 6 + 65536

    default_exclusions = index.exclusion_settings(exclusions)
    if default_exclusions.splitter == "llm" and exclusion_splitter is None:
        raise ValueError("exclusions 'llm' needs an exclusion splitter (--exclusion-llm-url/--exclusion-llm-model)")

    def run_searches(items: list[tuple[str, str | None, int, str]]) -> list[list[Hit]]:
        results: list[list[Hit]] = [[] for _ in items]
        for mode in dict.fromkeys(m for *_, m in items):  # one index.search per exclusion mode in the batch
            rows = [n for n, item in enumerate(items) if item[3] == mode]
            top = max(items[n][2] for n in rows)
            found = index.search(
                [items[n][0] for n in rows], [items[n][1] for n in rows], k=top, batch_size=encode_batch_size,
                exclusions=index.exclusion_settings(mode) if mode != default_exclusions.splitter else default_exclusions,
                exclusion_splitter=exclusion_splitter,
            )
            for n, hits in zip(rows, found):
                results[n] = hits[: items[n][2]]
        return results

    def run_query_embeddings(items: list[tuple[str, str | None]]) -> list[Any]:
        return list(
            index.encode_queries([q for q, _ in items], [i for _, i in items], batch_size=encode_batch_size)
        )

    def run_passage_embeddings(items: list[str]) -> list[Any]:
        return list(index.model.encode_passages(items, batch_size=encode_batch_size))

    settings = {"max_batch": max_batch, "max_wait_ms": max_wait_ms, "enabled": batching}
    batchers = {
        "search": MicroBatcher(run_searches, None, **settings),
        "query": MicroBatcher(run_query_embeddings, None, **settings),
        "passage": MicroBatcher(run_passage_embeddings, None, **settings),
    }

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any):
        # One worker thread for all encoder calls (made here, so the app can be started more than once).
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infembed-encoder")
        for batcher in batchers.values():
            batcher.executor = executor
            await batcher.start()
        try:
            yield
        finally:
            for batcher in batchers.values():
                await batcher.stop()
            executor.shutdown(wait=False, cancel_futures=True)

    model_info = dict(index.meta.get("model") or {})
    if model_info.get("path") and os.path.isabs(str(model_info["path"])):
        # a local model dir is named by its folder only: /health and /openapi.json must not reveal server paths
        model_info["path"] = Path(str(model_info["path"])).name
    app = FastAPI(
        title="infembed search",
        version=__version__,
        description=(
            f"Instruction-aware search over `{index.path.name}`: {index.count} documents, kind `{index.kind}`"
            + (
                f", model `{model_info.get('path')}` (fingerprint `{model_info.get('fingerprint')}`)."
                if model_info
                else "."
            )
            + (" Send the API key as `Authorization: Bearer <key>` or `X-API-Key: <key>`." if api_key else "")
        ),
        lifespan=lifespan,
    )
    app.state.index = index
    app.state.batchers = batchers
    app.add_middleware(_Guard, api_key=api_key, max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s)
    # Declared for the OpenAPI docs ("Authorize" button); the _Guard middleware does the enforcing.
    security = (
        []
        if api_key is None
        else [HTTPBearer(auto_error=False), APIKeyHeader(name="X-API-Key", auto_error=False)]
    )
    dependencies = [Depends(s) for s in security]

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, error: RequestValidationError) -> JSONResponse:
        problems = []
        for e in error.errors():
            where = ".".join(str(part) for part in e.get("loc", ()) if part != "body") or "body"
            message = str(e.get("msg", "invalid")).removeprefix("Value error, ")
            problems.append(f"{where}: {message}")
        return JSONResponse(
            status_code=422, content={"detail": "; ".join(problems) or "invalid request body"}
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, error: StarletteHTTPException) -> Any:
        # FastAPI answers 400 "There was an error parsing the body" for a body that is JSON-typed but not
        # UTF-8, or nested past Python's recursion limit: both are bodies that do not fit the schema (422).
        cause = error.__cause__
        if error.status_code == 400 and isinstance(cause, UnicodeDecodeError):
            detail = f"the request body is not valid UTF-8 (byte {cause.start})"
            return JSONResponse(status_code=422, content={"detail": detail})
        if error.status_code == 400 and isinstance(cause, RecursionError):
            return JSONResponse(status_code=422, content={"detail": "the request body is nested too deeply"})
        return await http_exception_handler(request, error)

    @app.exception_handler(Exception)
    async def _server_error(_request: Request, error: Exception) -> JSONResponse:
        # Starlette logs the traceback; the client gets the documented JSON shape instead of plain text.
        return JSONResponse(
            status_code=500,
            content={"detail": f"the server failed on this request ({type(error).__name__}); see its log"},
        )

    def check_text(label: str, text: str | None, *, required: bool = True) -> None:
        # Every text is checked here, per request, before it joins a batch: a text the tokenizer cannot take
        # must get its own request a 422, not fail the requests batched with it.
        if text is None:
            return
        if required and not text.strip():
            raise HTTPException(422, f"{label} is empty")
        if len(text) > max_text_chars:
            raise HTTPException(413, f"{label} is {len(text)} characters; the limit is {max_text_chars}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:  # JSON "\ud800" escapes decode to lone surrogates
            raise HTTPException(
                422,
                f"{label} holds a lone surrogate (U+{ord(text[error.start]):04X} at character {error.start}):"
                " not valid Unicode text",
            ) from None

    def check_count(label: str, n: int) -> None:
        if n > max_batch:
            raise HTTPException(413, f"{label} holds {n} items; the limit is {max_batch} per request")

    def hits_out(hits: list[Hit]) -> list[dict[str, Any]]:
        return [hit.to_dict(rank) for rank, hit in enumerate(hits, start=1)]

    @app.post(
        "/search",
        response_model=SearchResult | BatchSearchResult,
        dependencies=dependencies,
        summary="Search with (query, instruction) pairs",
    )
    async def search(request: SearchRequest) -> dict[str, Any]:
        if request.k > max_k:
            raise HTTPException(422, f"k: must be at most {max_k}, got {request.k}")
        if request.queries is not None:
            if not request.queries:
                raise HTTPException(422, "queries: the list is empty")
            check_count("queries", len(request.queries))
            pairs = [(item.query, item.instruction) for item in request.queries]
        else:
            pairs = [(request.query, request.instruction)]
        for n, (query, instruction) in enumerate(pairs):
            where = "" if request.queries is None else f"queries[{n}]."
            check_text(f"{where}query", query)
            check_text(f"{where}instruction", instruction, required=False)
        mode = request.exclusions or default_exclusions.splitter
        results = await batchers["search"].submit([(q, i, request.k, mode) for q, i in pairs])
        splits = index.split([i for _, i in pairs], index.exclusion_settings(mode) if mode != default_exclusions.splitter
                             else default_exclusions, exclusion_splitter)
        out = [
            {"query": q, "instruction": i, "k": request.k, "exclusions": mode,
             **({"split": split.to_json()} if split.exclude else {}), "hits": hits_out(hits)}
            for (q, i), split, hits in zip(pairs, splits, results)
        ]
        return out[0] if request.queries is None else {"results": out}

    @app.post(
        "/embed", response_model=EmbedResult, dependencies=dependencies, summary="Embed queries or passages"
    )
    async def embed(request: EmbedRequest) -> dict[str, Any]:
        if index.model is None:
            raise HTTPException(
                400, "this index is BM25: it has no embedding model, so /embed is not available"
            )
        check_count("texts", len(request.texts))
        for n, text in enumerate(request.texts):
            check_text(f"texts[{n}]", text)
        instructions = request.instructions or [request.instruction] * len(request.texts)
        for n, instruction in enumerate(instructions):
            check_text(f"instructions[{n}]", instruction, required=False)
        if request.kind == "query":
            rows = await batchers["query"].submit(list(zip(request.texts, instructions)))
        else:
            rows = await batchers["passage"].submit(list(request.texts))
        return {
            "embeddings": [row.tolist() for row in rows],
            "dim": int(index.dim),
            "kind": request.kind,
            "model": index.fingerprint,
        }

    @app.get("/health", summary="Index, model, limits and batching counters")
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "kind": index.kind,
            "count": index.count,
            "dim": index.dim,
            "model": {k: model_info.get(k) for k in ("path", "fingerprint", "template")}
            if model_info
            else None,
            "model_fingerprint": index.fingerprint,
            "auth": api_key is not None,
            "exclusions": default_exclusions.to_json(),
            "limits": {
                "max_batch": max_batch,
                "max_text_chars": max_text_chars,
                "max_k": max_k,
                "max_body_bytes": max_body_bytes,
            },
            "batching": {name: b.stats() for name, b in batchers.items()},
        }

    app.add_api_route("/health", health, methods=["HEAD"], include_in_schema=False)  # probes that send HEAD
    return app


# --------------------------------------------------------------------------------------------- running it


def _h11_protocol(header_timeout_s: float) -> type:
    """uvicorn's h11 protocol plus a deadline for a request's headers.

    uvicorn times out only idle keep-alive connections, and only once a response has been sent: a client that
    connects and sends half a request line keeps its connection, and ``limit_concurrency`` such clients lock
    everyone else out with 503. Here a connection that has no request in progress (just opened, or between
    requests) is closed when ``header_timeout_s`` pass without a complete set of headers; a slow body is
    bounded by the app (``body_timeout_s``)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class _H11ProtocolWithHeaderTimeout(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _header_timeout(self) -> None:
            self._header_timer = None
            in_progress = self.cycle is not None and not self.cycle.response_complete
            if not in_progress and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_header_timer()

        def on_response_complete(self) -> None:
            self._arm_header_timer()  # before a pipelined request is started by super()
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

    return _H11ProtocolWithHeaderTimeout


def _server_settings(limit_concurrency: int | None, header_timeout_s: float) -> dict[str, Any]:
    """uvicorn settings shared by :func:`serve` and :class:`BackgroundServer`."""
    if not header_timeout_s > 0:
        raise ValueError(f"header_timeout_s must be positive, got {header_timeout_s}")
    return {
        "limit_concurrency": limit_concurrency,
        "timeout_keep_alive": 5,  # an idle keep-alive connection is closed after 5 s
        "http": _h11_protocol(header_timeout_s),
    }


def serve(
    index_dir: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    *,
    model: Any = None,
    device: str | None = None,
    ef_search: int | None = None,
    nprobe: int | None = None,
    limit_concurrency: int = 256,
    header_timeout_s: float = 10.0,
    log_level: str = "info",
    **app_settings: Any,
) -> None:
    """Load ``index_dir`` and serve it with uvicorn (blocks). Binds to loopback unless ``host`` says otherwise;
    a client has ``header_timeout_s`` to send a request's headers (see :func:`_h11_protocol`);
    ``app_settings`` go to :func:`create_app` (max_batch, max_text_chars, max_k, batching, max_wait_ms,
    body_timeout_s)."""
    import uvicorn

    settings = _server_settings(limit_concurrency, header_timeout_s)

    if host not in LOOPBACK and api_key is None:
        logger.warning(
            "serving on %s without an API key: anyone who can reach this port can query the index", host
        )
    index = Index.load(index_dir, model, device=device, ef_search=ef_search, nprobe=nprobe)
    app = create_app(index, api_key=api_key, **app_settings)
    uvicorn.run(app, host=host, port=port, log_level=log_level, **settings)


class BackgroundServer:
    """Run an app with a real uvicorn server on a thread (tests, benchmarks, notebooks).

        >>> with BackgroundServer(create_app(index)) as url:
        ...     httpx.post(f"{url}/search", json={"query": "..."})

    ``port=0`` picks a free port; the socket is bound before the thread starts, so there is no race.
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        log_level: str = "warning",
        limit_concurrency: int | None = 256,
        header_timeout_s: float = 10.0,
    ):
        import uvicorn

        settings = _server_settings(limit_concurrency, header_timeout_s)

        self.host = host
        self.socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(app, log_level=log_level, **settings)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True, name="infembed-uvicorn"
        )

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> str:
        import time

        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the uvicorn server thread exited during startup")
            if time.monotonic() > deadline:
                raise TimeoutError("the uvicorn server did not start")
            time.sleep(0.01)
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        self.socket.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
