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

import contextlib
import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from infembed import __version__
from infembed.data.errors import SettingsError
from infembed.data.jsonl import lone_surrogate
from infembed.instructions.split import DEFAULT_SPLITTER
from infembed.search.batcher import MicroBatcher
from infembed.search.guard import Guard, json_typed
from infembed.search.index import Hit, Index
from infembed.search.schema import (  # noqa: F401  (the models stay importable from here)
    BatchSearchResult,
    EmbedRequest,
    EmbedResult,
    HitOut,
    InstructionSplit,
    QueryItem,
    SearchRequest,
    SearchResult,
)
from infembed.search.settings import ServeSettings
from infembed.settings import check_number

logger = logging.getLogger("infembed.search.service")


# --------------------------------------------------------------------------------------------- the app


#: pydantic's error types for a body that is not a JSON object at all (or is missing)
_NOT_AN_OBJECT = ("model_attributes_type", "dict_type", "model_type", "missing")
_BODY_EXAMPLES = {
    "/search": '{"query": "...", "instruction": "...", "k": 10}',
    "/embed": '{"texts": ["..."], "kind": "query"}',
}


def _body_problem(path: str, content_type: str | None, error: dict[str, Any]) -> str:
    """What is wrong with a request body that is not a JSON object, and what is expected instead (pydantic
    says only "Input should be a valid dictionary")."""
    expected = (
        f"a JSON object such as {_BODY_EXAMPLES.get(path, '{...}')} with Content-Type: application/json"
    )
    if not json_typed(content_type):
        return f"the body must be {expected} (got Content-Type: {content_type})"
    if error.get("type") == "missing":
        return f"the body is empty: send {expected}"
    kind = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false"}
    given = kind.get(type(error.get("input")), "null" if error.get("input") is None else "something else")
    return f"the body must be {expected}; got {given}"


def create_app(
    index: Index,
    api_key: str | None = None,
    settings: ServeSettings | None = None,
    *,
    max_batch: int | None = None,
    max_text_chars: int | None = None,
    max_k: int | None = None,
    batching: bool | None = None,
    max_wait_ms: float | None = None,
    max_body_bytes: int | None = None,
    encode_batch_size: int = 64,
    exclusions: str = DEFAULT_SPLITTER,
    exclusion_splitter: Callable[[str], Any] | None = None,
    body_timeout_s: float | None = None,
) -> Any:
    """A FastAPI app serving ``index``. ``api_key``: required on /search and /embed when set (header
    ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``, compared as UTF-8 bytes). ``settings``: a
    :class:`~infembed.search.settings.ServeSettings` (limits, batching, timeouts; checked there); the keyword
    arguments that are not None override its fields (``body_timeout_s`` is its ``body_timeout``: a request body
    must arrive within this time, else 408). ``batching=False`` encodes each request on its own (for
    comparison). Limits: see the module docstring."""
    from fastapi import Depends, FastAPI, HTTPException, Request
    from fastapi.exception_handlers import http_exception_handler
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi.security import APIKeyHeader, HTTPBearer
    from starlette.exceptions import HTTPException as StarletteHTTPException

    settings = ServeSettings.of(
        settings,
        max_batch=max_batch,
        max_text_chars=max_text_chars,
        max_k=max_k,
        batching=batching,
        max_wait_ms=max_wait_ms,
        body_timeout=body_timeout_s,
    )
    max_batch, max_text_chars, max_k = settings.max_batch, settings.max_text_chars, settings.max_k
    if settings.backend is not None and index.model is not None:  # serve() loaded it so already
        if settings.backend != index.model.backend:
            index.model.use_backend(settings.backend)
    check_number("max_body_bytes", max_body_bytes, minimum=1, integer=True, optional=True)
    check_number("encode_batch_size", encode_batch_size, minimum=1, integer=True)
    if api_key is not None and not api_key.strip():
        raise SettingsError("the API key is empty")
    if max_body_bytes is None:
        # room for max_batch (query + instruction) pairs of max_text_chars, JSON-escaped (up to 6 bytes a char)
        max_body_bytes = 2 * max_batch * max_text_chars * 6 + 65536

    default_exclusions = index.exclusion_settings(exclusions)
    if default_exclusions.splitter == "llm" and exclusion_splitter is None:
        raise SettingsError(
            "exclusions 'llm' needs an exclusion splitter (--exclusion-llm-url/--exclusion-llm-model)"
        )

    def run_searches(items: list[tuple[str, str | None, int, str]]) -> list[list[Hit]]:
        results: list[list[Hit]] = [[] for _ in items]
        for mode in dict.fromkeys(m for *_, m in items):  # one index.search per exclusion mode in the batch
            rows = [n for n, item in enumerate(items) if item[3] == mode]
            top = max(items[n][2] for n in rows)
            found = index.search(
                [items[n][0] for n in rows],
                [items[n][1] for n in rows],
                k=top,
                batch_size=encode_batch_size,
                exclusions=index.exclusion_settings(mode)
                if mode != default_exclusions.splitter
                else default_exclusions,
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

    batching = {"max_batch": max_batch, "max_wait_ms": settings.max_wait_ms, "enabled": settings.batching}
    batchers = {
        "search": MicroBatcher(run_searches, None, **batching),
        "query": MicroBatcher(run_query_embeddings, None, **batching),
        "passage": MicroBatcher(run_passage_embeddings, None, **batching),
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
    app.add_middleware(
        Guard, api_key=api_key, max_body_bytes=max_body_bytes, body_timeout_s=settings.body_timeout
    )
    # Declared for the OpenAPI docs ("Authorize" button); the Guard middleware does the enforcing.
    security = (
        []
        if api_key is None
        else [HTTPBearer(auto_error=False), APIKeyHeader(name="X-API-Key", auto_error=False)]
    )
    dependencies = [Depends(s) for s in security]

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        problems = []
        for e in error.errors():
            whole = tuple(e.get("loc", ())) == ("body",) and e.get("type") in _NOT_AN_OBJECT
            if whole:  # the body as a whole: not a JSON object, or none
                problems.append(_body_problem(request.url.path, request.headers.get("content-type"), e))
                continue
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
        problem = lone_surrogate(text)  # JSON "\\ud800" escapes decode to lone surrogates
        if problem:
            raise HTTPException(422, f"{label} holds {problem}")

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
        splits = index.split(
            [i for _, i in pairs],
            index.exclusion_settings(mode) if mode != default_exclusions.splitter else default_exclusions,
            exclusion_splitter,
        )
        out = [
            {
                "query": q,
                "instruction": i,
                "k": request.k,
                "exclusions": mode,
                **({"split": split.to_json()} if split.exclude or split.dropped else {}),
                "hits": hits_out(hits),
            }
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
            "backend": getattr(index.model, "backend", None),  # what encodes the queries (None: BM25)
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
