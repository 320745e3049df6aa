"""The LLM layer: chat requests, an on-disk response cache, and an async client for any OpenAI-compatible
endpoint (OpenAI, vLLM, llama.cpp server) with bounded concurrency, retries and token accounting.

The pieces, from the bottom:

* :class:`Sampling` and :class:`ChatRequest`: what is asked. :meth:`ChatRequest.key` is the cache key, a
  SHA-256 over the model, the messages, the sampling settings and the answer attempt (a retry after a bad
  answer is a different request, so it gets a different key and a different answer).
* :class:`ResponseCache`: a SQLite file (WAL journal) mapping keys to answers. Each answer is committed as
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
import hashlib
import json
import math
import random
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from infembed.data.errors import SettingsError

#: Models that take ``max_completion_tokens`` and no temperature/top_p (OpenAI reasoning models).
_REASONING_MODEL = re.compile(r"^(?:openai/)?(?:o\d|gpt-5)", re.IGNORECASE)


def is_reasoning_model(model: str) -> bool:
    return bool(_REASONING_MODEL.match(model))


# ---------------------------------------------------------------------------------------------- errors
class LLMError(Exception):
    """Base class of the LLM layer's errors."""


class TransientError(LLMError):
    """A failure worth retrying (429, 5xx, timeout, connection). ``retry_after`` in seconds when known."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConnectFailed(TransientError):
    """No connection could be made (refused, unknown host): retried briefly only (``connect_retries``)."""


class EndpointError(LLMError):
    """The endpoint kept failing for one request after every retry."""


class FatalEndpointError(LLMError):
    """The endpoint refuses all work (bad key, unknown model, wrong URL): retrying cannot help."""


class EndpointUnreachable(FatalEndpointError):
    """No connection to the endpoint after ``connect_retries`` quick retries; the message names the URL."""


class MalformedResponse(ValueError):
    """A completion body without a usable answer (no ``choices``, a choice that is not an object ...).
    ``field`` names the part, e.g. ``choices[0].message``."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class RequestRejected(LLMError):
    """The endpoint refused this one request (400/422, e.g. the prompt is too long): the row is rejected."""


class Deferred(LLMError):
    """Batch-export mode: the answer is not in the cache yet; the request was recorded for a batch file."""


# --------------------------------------------------------------------------------------------- requests
@dataclass(frozen=True)
class Sampling:
    """Sampling settings sent with a request. ``None`` means "not sent" (the server's default)."""

    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = 512
    seed: int | None = None
    reasoning_effort: str | None = None

    def for_attempt(self, attempt: int) -> Sampling:
        """Settings for the ``attempt``-th try after a bad answer: a different seed and, when decoding was
        greedy, some temperature, so that the retry can give a different answer."""
        if attempt == 0:
            return self
        temperature = self.temperature
        if temperature is not None and temperature < 0.7:
            temperature = 0.7
        seed = (self.seed or 0) + attempt
        return Sampling(temperature, self.top_p, self.max_tokens, seed, self.reasoning_effort)


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request. ``stage`` only labels the accounting; it is not part of the key."""

    model: str
    messages: tuple[tuple[str, str], ...]
    sampling: Sampling = field(default_factory=Sampling)
    attempt: int = 0
    stage: str = ""
    #: ``response_format`` sent as is (JSON-constrained output, see :mod:`infembed.synth.structured`);
    #: a JSON string so the request stays hashable. ``None``: not sent (free text).
    response_format: str | None = None

    @classmethod
    def build(
        cls,
        model: str,
        messages: Sequence[dict[str, str]],
        sampling: Sampling | None = None,
        attempt: int = 0,
        stage: str = "",
        response_format: dict[str, Any] | None = None,
    ) -> ChatRequest:
        sampling = (sampling or Sampling()).for_attempt(attempt)
        fmt = json.dumps(response_format, sort_keys=True) if response_format else None
        return cls(model, tuple((m["role"], m["content"]) for m in messages), sampling, attempt, stage, fmt)

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    def body(self) -> dict[str, Any]:
        """The JSON body of ``POST /v1/chat/completions`` (also the ``body`` of a Batch API line)."""
        body: dict[str, Any] = {"model": self.model, "messages": self.message_dicts()}
        s = self.sampling
        reasoning = is_reasoning_model(self.model)
        if s.temperature is not None and not reasoning:
            body["temperature"] = s.temperature
        if s.top_p is not None and not reasoning:
            body["top_p"] = s.top_p
        if s.max_tokens is not None:
            body["max_completion_tokens" if reasoning else "max_tokens"] = s.max_tokens
        if s.seed is not None:
            body["seed"] = s.seed
        if s.reasoning_effort is not None and reasoning:
            body["reasoning_effort"] = s.reasoning_effort
        if self.response_format is not None:  # absent otherwise: cache keys of free-text requests unchanged
            body["response_format"] = json.loads(self.response_format)
        return body

    def key(self) -> str:
        """Cache key: SHA-256 of the request body (model, messages, sampling) and the answer attempt."""
        payload = json.dumps(
            {"body": self.body(), "attempt": self.attempt}, sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass
class ChatResponse:
    """The first choice's text and the token counts. ``cached`` is set when it came from the cache."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    model: str = ""
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("cached")
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any], cached: bool = False) -> ChatResponse:
        return cls(
            text=str(obj.get("text") or ""),
            prompt_tokens=int(obj.get("prompt_tokens") or 0),
            completion_tokens=int(obj.get("completion_tokens") or 0),
            finish_reason=obj.get("finish_reason"),
            model=str(obj.get("model") or ""),
            cached=cached,
        )

    @classmethod
    def from_completion(cls, completion: Any, request: ChatRequest | None = None) -> ChatResponse:
        """From an OpenAI ``ChatCompletion`` object or its JSON dict (Batch API output lines).

        Raises :class:`MalformedResponse` when the body holds no answer: no ``choices`` (an empty list
        included: that is a broken response, not an empty answer), or a first choice without a ``message``
        object whose ``content`` is a string or null. A null content is an empty answer.
        """
        data = completion
        if hasattr(completion, "model_dump"):  # the SDK builds its objects without validating them
            data = completion.model_dump(warnings=False)
        if not isinstance(data, dict):
            raise MalformedResponse(f"the body is a JSON {type(data).__name__}, not an object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise MalformedResponse("no choices" if not choices else "'choices' is not a list", "choices")
        choice = choices[0]
        if not isinstance(choice, dict):
            raise MalformedResponse("the first choice is not an object", "choices[0]")
        message = choice.get("message")
        if not isinstance(message, dict):
            raise MalformedResponse("the first choice has no message object", "choices[0].message")
        text = message.get("content")
        if text is not None and not isinstance(text, str):
            raise MalformedResponse("the message content is not text", "choices[0].message.content")
        text = text or ""
        finish = choice.get("finish_reason")
        finish = finish if isinstance(finish, str) else None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt_tokens = _count(usage.get("prompt_tokens"))
        completion_tokens = _count(usage.get("completion_tokens"))
        if prompt_tokens is None:  # servers without usage: OpenAI's rule of thumb, ~4 characters a token
            prompt_tokens = estimate_tokens(" ".join(c for _, c in request.messages)) if request else 0
        if completion_tokens is None:
            completion_tokens = estimate_tokens(text)
        return cls(text, prompt_tokens, completion_tokens, finish, str(data.get("model") or ""))


def _count(value: Any) -> int | None:
    """A token count as reported, or None when it is missing or not a count (then it is estimated)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        return None
    return int(value)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4) if text else 0


# ------------------------------------------------------------------------------------------------ cache
class ResponseCache:
    """Answers on disk, keyed by :meth:`ChatRequest.key`, in one SQLite file.

    WAL journal and one commit per answer: a process killed at any point leaves a valid database holding
    every answer committed before the kill. Safe to share between threads and processes.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT, response TEXT, created REAL)"
        )

    def get(self, key: str) -> ChatResponse | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return ChatResponse.from_json(json.loads(row[0]), cached=True) if row else None

    def put(self, key: str, response: ChatResponse, model: str = "") -> None:
        text = json.dumps(response.to_json(), ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model, response, created) VALUES (?, ?, ?, ?)",
                (key, model, text, time.time()),
            )

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM responses WHERE key = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


class OpenAIBackend:
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint through the official ``openai`` client.

    The client's own retries are switched off: :class:`LLMClient` retries with jitter and counts them.
    ``base_url`` is e.g. ``https://api.openai.com/v1`` (the default), ``http://localhost:8000/v1`` (vLLM) or
    ``http://localhost:8080/v1`` (llama.cpp ``llama-server``).
    """

    def __init__(
        self, base_url: str | None = None, api_key: str | None = None, timeout: float = 120.0
    ) -> None:
        import openai  # lazy: only runs that talk to an endpoint need it

        if not timeout > 0:
            raise SettingsError(f"the timeout must be positive, not {timeout}")
        self._openai = openai
        self.base_url = base_url
        self.timeout = timeout
        # Local servers accept any key; the client insists on one. The client's timeout applies to each
        # read of the socket; complete() adds the deadline for the whole request.
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0
        )
        #: the endpoint as requests go to it (OpenAI's when no base_url is given)
        self.url = str(self._client.base_url).rstrip("/")

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """One request, answered in full within ``timeout`` seconds (a server that trickles its answer
        byte by byte times out too), or one of this module's errors."""
        openai = self._openai
        try:
            completion = await asyncio.wait_for(
                self._client.chat.completions.create(**request.body()), self.timeout
            )
        except asyncio.TimeoutError:  # the builtin TimeoutError from Python 3.11 on
            raise TransientError(f"request timed out (no full answer within {self.timeout:g} s)") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as error:
            raise FatalEndpointError(f"{error.status_code}: {_error_text(error)}") from None
        except (openai.BadRequestError, openai.UnprocessableEntityError) as error:
            raise RequestRejected(f"{error.status_code}: {_error_text(error)}") from None
        except openai.APIStatusError as error:
            retry_after = _retry_after(error.response.headers.get("retry-after"))
            raise TransientError(f"HTTP {error.status_code}: {_error_text(error)}", retry_after) from None
        except openai.APITimeoutError:
            raise TransientError(f"request timed out (after {self.timeout:g} s)") from None
        except openai.APIConnectionError as error:
            if _is_connect_error(error.__cause__):  # nothing listens there, or no such host
                raise ConnectFailed(
                    f"cannot connect to {self.url} ({error.__cause__}; is a server running there?)"
                ) from None
            raise TransientError(f"connection failed: {error}") from None
        except openai.APIResponseValidationError as error:
            raise TransientError(f"malformed response: {error}") from None
        except (ValueError, TypeError) as error:  # e.g. a 200 whose body is not JSON
            raise TransientError(f"malformed response: {error}") from None
        try:
            return ChatResponse.from_completion(completion, request)
        except MalformedResponse as error:  # e.g. "choices": []: retried, never cached
            raise TransientError(f"malformed response: {error}") from None

    async def aclose(self) -> None:
        await self._client.close()


def _is_connect_error(error: BaseException | None) -> bool:
    """No connection was made at all: httpx's ``ConnectError`` (by name: the SDK may ship its own httpx)."""
    return error is not None and any(k.__name__ == "ConnectError" for k in type(error).__mro__)


def _error_text(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
    return str(getattr(error, "message", error))[:300]


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


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
        self._loop: asyncio.AbstractEventLoop | None = None

    def _delay(self, retry: int, retry_after: float | None) -> float:
        d = min(self.backoff_max, self.backoff_base * (2**retry))
        delay = d / 2 + self._random.uniform(0, d / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    async def complete(self, request: ChatRequest) -> ChatResponse:
        usage = self.meter[request.stage]
        key = request.key()
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                usage.cache_hits += 1
                return hit
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:  # a semaphore belongs to one event loop
            self._semaphore, self._loop = asyncio.Semaphore(self.concurrency), loop
        async with self._semaphore:
            last = ""
            connect_failures = 0
            for retry in range(self.max_retries + 1):
                if retry:
                    usage.retries += 1
                try:
                    response = await self.backend.complete(request)
                except ConnectFailed as error:
                    connect_failures += 1
                    if connect_failures > self.connect_retries:
                        usage.failures += 1
                        raise EndpointUnreachable(str(error)) from None
                    last = str(error)
                    if retry < self.max_retries:
                        await asyncio.sleep(self._delay(retry, None))
                    continue
                except TransientError as error:
                    last = str(error)
                    if retry < self.max_retries:
                        await asyncio.sleep(self._delay(retry, error.retry_after))
                    continue
                usage.requests += 1
                usage.prompt_tokens += response.prompt_tokens
                usage.completion_tokens += response.completion_tokens
                if self.cache is not None:
                    self.cache.put(key, response, request.model)
                return response
        usage.failures += 1
        raise EndpointError(f"failed after {self.max_retries + 1} tries: {last}")

    async def aclose(self) -> None:
        await self.backend.aclose()
