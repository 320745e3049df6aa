"""The LLM layer: chat requests, an on-disk response cache, and an async client for any OpenAI-compatible
endpoint (OpenAI, vLLM, llama.cpp server) with bounded concurrency, retries and token accounting.

The pieces, from the bottom:

* :class:`Sampling` and :class:`ChatRequest` (:mod:`infembed.synth.chat`): what is asked. :meth:`ChatRequest.key` is the cache key, a
  SHA-256 over the model, the messages, the sampling settings, the answer attempt (a retry after a bad
  answer is a different request, so it gets a different key and a different answer) and the endpoint.
* The endpoint's *identity*: its normalised URL and what it reports it serves for the model asked for
  (``GET /v1/models``: the entry's id, owner and metadata; llama.cpp's server names the model file there, and
  serves it under any model name). :class:`LLMClient` asks once per model and puts it into every request's
  key, so two servers, or two models served under one name, never share answers; a pipeline saves it in
  ``run.json`` and refuses to resume a run against another endpoint.
* :class:`ResponseCache` (:mod:`infembed.synth.cache`): a SQLite file (WAL journal) mapping keys to answers. Each answer is committed as
  soon as it arrives, so a run killed with SIGKILL loses at most the requests in flight; several processes
  may share one cache file.
* A *backend* turns one request into one :class:`ChatResponse` or raises: :class:`OpenAIBackend` (the
  official ``openai`` package), ``infembed.synth.local.TransformersBackend`` (offline trials) and
  ``infembed.synth.batchfile.BatchCollector`` (records requests for the Batch API instead of sending them).
* :class:`LLMClient`: cache first, then the backend under a semaphore, retrying transient failures
  (429, 5xx, timeouts, dropped connections, malformed bodies) with exponential backoff and jitter, honouring
  ``Retry-After``. Only well-formed answers are cached. An endpoint that cannot be connected to at all is
  retried ``connect_retries`` times only, then :class:`EndpointUnreachable` names its URL.
  :class:`UsageMeter` counts requests, cache hits, retries and tokens per stage.

Example::

    client = LLMClient(OpenAIBackend(base_url="http://127.0.0.1:8000/v1"), ResponseCache("cache.sqlite"))
    answer = await client.complete(ChatRequest.build("gpt-4o-mini", [{"role": "user", "content": "Hi"}]))
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from infembed.data.errors import SettingsError
from infembed.settings import check_number, setting
from infembed.synth.cache import ResponseCache
from infembed.synth.chat import (
    ChatRequest,
    ChatResponse,
    ConnectFailed,
    Deferred,
    EndpointError,
    EndpointUnreachable,
    FatalEndpointError,
    LLMError,
    MalformedResponse,
    RequestRejected,
    Sampling,
    TransientError,
    estimate_tokens,
    is_reasoning_model,
)
from infembed.synth.endpoint import (
    OPENAI_URL,
    OpenAIBackend,
    check_base_url,
    describe_endpoint,
    normalise_url,
)

__all__ = [  # requests, answers and errors: synth/chat.py; the cache: synth/cache.py; endpoints: synth/endpoint.py
    "Backend",
    "ChatRequest",
    "ChatResponse",
    "ClientConfig",
    "ConnectFailed",
    "Deferred",
    "EndpointError",
    "EndpointUnreachable",
    "FatalEndpointError",
    "LLMClient",
    "LLMError",
    "MalformedResponse",
    "OPENAI_URL",
    "OpenAIBackend",
    "RequestRejected",
    "ResponseCache",
    "Sampling",
    "StageUsage",
    "TransientError",
    "UsageMeter",
    "check_base_url",
    "describe_endpoint",
    "estimate_tokens",
    "is_reasoning_model",
    "normalise_url",
]

T = TypeVar("T")


# ----------------------------------------------------------------------------------------------- meters
@dataclass
class StageUsage:
    requests: int = 0  # answers fetched from the endpoint in this run
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0  # requests that failed after every retry
    prompt_tokens: int = 0  # of fetched answers only (what this run paid)
    completion_tokens: int = 0


class UsageMeter:
    """What this process asked the endpoint for, per stage (the pipeline's own row records hold the tokens
    of every answer, fetched or cached)."""

    def __init__(self) -> None:
        self.stages: dict[str, StageUsage] = {}

    def __getitem__(self, stage: str) -> StageUsage:
        return self.stages.setdefault(stage, StageUsage())

    def total(self) -> StageUsage:
        out = StageUsage()
        for usage in self.stages.values():
            for name, value in asdict(usage).items():
                setattr(out, name, getattr(out, name) + value)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "stages": {k: asdict(v) for k, v in sorted(self.stages.items())},
            "total": asdict(self.total()),
        }


# --------------------------------------------------------------------------------------------- backends
class Backend(Protocol):
    """Answers one request once (no cache, no retry) or raises one of this module's errors."""

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


# ----------------------------------------------------------------------------------------------- client
class LLMClient:
    """Cache, concurrency limit and retries around a backend.

    Args:
        backend: answers single requests.
        cache: where answers are kept; ``None`` disables caching.
        concurrency: requests in flight at most.
        max_retries: retries of a transient failure before :class:`EndpointError`.
        connect_retries: retries when no connection can be made at all (before
            :class:`EndpointUnreachable`): a server that is not running fails the run in seconds.
        backoff_base / backoff_max: the n-th retry waits ``d/2 + uniform(0, d/2)`` seconds with
            ``d = min(backoff_max, backoff_base * 2**n)``, or the server's ``Retry-After`` if longer.
    """

    def __init__(
        self,
        backend: Backend,
        cache: ResponseCache | None = None,
        *,
        concurrency: int = 8,
        max_retries: int = 6,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        meter: UsageMeter | None = None,
        seed: int | None = None,
        connect_retries: int = 2,
    ) -> None:
        if concurrency < 1:
            raise SettingsError("concurrency must be at least 1")
        if max_retries < 0:
            raise SettingsError("max_retries must be >= 0")
        self.backend = backend
        self.cache = cache
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.connect_retries = min(connect_retries, max_retries)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.meter = meter or UsageMeter()
        self._random = random.Random(seed)
        self._semaphore: asyncio.Semaphore | None = None
        self._identity_lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._identities: dict[str, dict[str, Any] | None] = {}

    def _delay(self, retry: int, retry_after: float | None) -> float:
        d = min(self.backoff_max, self.backoff_base * (2**retry))
        delay = d / 2 + self._random.uniform(0, d / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def _lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:  # they belong to one event loop
            self._semaphore, self._loop = asyncio.Semaphore(self.concurrency), loop
            self._identity_lock = asyncio.Lock()
        assert self._identity_lock is not None
        return self._identity_lock

    async def endpoint(self, model: str, usage: StageUsage | None = None) -> dict[str, Any] | None:
        """What identifies the endpoint serving ``model`` (see :meth:`OpenAIBackend.identity`), asked once
        per model with the same retries as a request; None for a backend that cannot say."""
        identity = getattr(self.backend, "identity", None)
        if identity is None:
            return None
        if model not in self._identities:
            async with self._lock():
                if model not in self._identities:
                    self._identities[model] = await self._retrying(
                        lambda: identity(model), usage or StageUsage()
                    )
        return self._identities[model]

    async def identity(self, models: Iterable[str]) -> dict[str, Any] | None:
        """The run's endpoint: ``{"url", "models": {name: what is served for it}}`` (None: not known)."""
        found = {m: await self.endpoint(m) for m in dict.fromkeys(models)}
        if not found or any(v is None for v in found.values()):
            return None
        first = next(iter(found.values()))
        assert first is not None
        return {"url": first["url"], "models": {m: v["model"] for m, v in found.items() if v is not None}}

    async def _retrying(self, call: Callable[[], Awaitable[T]], usage: StageUsage) -> T:
        """``call()`` with the retries of a transient failure (and the fewer of a failed connection)."""
        last = ""
        connect_failures = 0
        for retry in range(self.max_retries + 1):
            if retry:
                usage.retries += 1
            try:
                return await call()
            except ConnectFailed as error:
                connect_failures += 1
                if connect_failures > self.connect_retries:
                    usage.failures += 1
                    raise EndpointUnreachable(str(error)) from None
                last = str(error)
                if retry < self.max_retries:
                    await asyncio.sleep(self._delay(retry, None))
            except TransientError as error:
                last = str(error)
                if retry < self.max_retries:
                    await asyncio.sleep(self._delay(retry, error.retry_after))
        usage.failures += 1
        raise EndpointError(f"failed after {self.max_retries + 1} tries: {last}")

    async def complete(self, request: ChatRequest) -> ChatResponse:
        usage = self.meter[request.stage]
        identity = await self.endpoint(request.model, usage)
        if identity is not None:
            request = dataclasses.replace(request, endpoint=json.dumps(identity, sort_keys=True))
        key = request.key()
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                usage.cache_hits += 1
                return hit
        self._lock()
        assert self._semaphore is not None
        async with self._semaphore:
            response = await self._retrying(lambda: self.backend.complete(request), usage)
        usage.requests += 1
        usage.prompt_tokens += response.prompt_tokens
        usage.completion_tokens += response.completion_tokens
        if self.cache is not None:
            self.cache.put(key, response, request.model)
        return response

    async def aclose(self) -> None:
        await self.backend.aclose()


# ----------------------------------------------------------------------------------------------- settings
BACKENDS = ("openai", "local")


@dataclass
class ClientConfig:
    """Where requests go and how (endpoint, client, cache, prices): the ``synth run`` / ``synth benchmark``
    flags that are not generation settings, declared once here (:mod:`infembed.settings`). They are not saved
    in ``run.json``'s ``config``; the endpoint they lead to is, as ``endpoint`` (its URL and the model it
    serves), and a resume against another endpoint is refused unless ``allow_endpoint_change``."""

    backend: str = setting("openai", "openai (any OpenAI-compatible endpoint) or local (transformers).")
    base_url: str | None = setting(
        None,
        "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 (vLLM); default: OpenAI.",
        envvar="OPENAI_BASE_URL",
    )
    api_key_env: str = setting("OPENAI_API_KEY", "Name of the environment variable holding the API key.")
    local_model: str = setting(
        "smollm2", "local backend: 'smollm2' (packaged GGUF), a .gguf file or a model dir."
    )
    concurrency: int = setting(8, "Requests in flight at most.")
    timeout: float = setting(
        120.0,
        "Deadline in seconds for each request, the whole answer included (a request past it is retried).",
    )
    max_retries: int = setting(6, "Retries of a request on 429, 5xx, timeouts.")
    retry_base: float = setting(1.0, "First retry delay in seconds (doubles each retry, with jitter).")
    cache: str | None = setting(None, "Response cache file (default: OUTPUT/cache.sqlite).")
    no_cache: bool = setting(False, "Do not read or write the response cache.")
    price: list[str] = setting(
        default_factory=list, help="MODEL=INPUT,OUTPUT in US$ per 1M tokens (repeatable)."
    )
    batch_prices: bool = setting(False, "Cost at Batch API prices (half).")
    allow_endpoint_change: bool = setting(
        False,
        "Resume a run made against another endpoint or served model (its unfinished rows are made again here).",
    )

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SettingsError(f"backend must be one of {', '.join(BACKENDS)}; got {self.backend!r}")
        if self.base_url is not None:
            check_base_url(self.base_url)
        check_number("concurrency", self.concurrency, integer=True, minimum=1)
        check_number("timeout", self.timeout, above=0)
        check_number("max_retries", self.max_retries, integer=True, minimum=0)
        check_number("retry_base", self.retry_base, minimum=0)
        self.prices()  # each --price parses

    def prices(self) -> dict[str, Any]:
        """``--price`` as model -> :class:`~infembed.synth.costs.Price`."""
        from infembed.synth.costs import parse_price

        return dict(parse_price(p) for p in self.price)

    def model_name(self, model: str, default: str = "gpt-4o-mini") -> str:
        """The model to name in requests: the local backend's when ``model`` was left at its default."""
        return f"local:{self.local_model}" if self.backend == "local" and model == default else model

    def make_backend(self) -> Backend:
        if self.backend == "local":
            from infembed.synth.local import TransformersBackend

            return TransformersBackend.from_name(self.local_model)
        return OpenAIBackend(
            base_url=self.base_url, api_key=os.environ.get(self.api_key_env), timeout=self.timeout
        )

    def make_client(
        self, default_cache: Path, *, seed: int | None = None, backend: Backend | None = None
    ) -> LLMClient:
        """An :class:`LLMClient` over ``backend`` (default: :meth:`make_backend`) with the response cache at
        ``--cache`` (default ``default_cache``) unless ``--no-cache``."""
        cache = None if self.no_cache else ResponseCache(self.cache or default_cache)
        return LLMClient(
            backend if backend is not None else self.make_backend(),
            cache,
            concurrency=self.concurrency,
            max_retries=self.max_retries,
            backoff_base=self.retry_base,
            seed=seed,
        )
