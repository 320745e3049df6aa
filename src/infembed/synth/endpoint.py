"""Where requests go: an OpenAI-compatible endpoint (:class:`OpenAIBackend`, through the official ``openai``
client) and what identifies it: its normalised URL and what it reports it serves for the model asked for
(``GET /v1/models``: the entry's id, owner and metadata; llama.cpp's server names the model file there and
serves it under any model name). :class:`~infembed.synth.llm.LLMClient` puts the identity into every cache key
and a pipeline saves it in ``run.json``, so answers of one endpoint are never served for another."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from infembed.data.errors import SettingsError
from infembed.synth.chat import (
    ChatRequest,
    ChatResponse,
    ConnectFailed,
    FatalEndpointError,
    MalformedResponse,
    RequestRejected,
    TransientError,
)

#: the official OpenAI API (the openai client's default, and where Batch API answers come from)
OPENAI_URL = "https://api.openai.com/v1"
#: seconds to wait for a connection (a host that drops packets fails fast, not after the request timeout)
CONNECT_TIMEOUT = 5.0
#: fields of a ``/v1/models`` entry that do not identify the model: llama.cpp and vLLM report the current time
#: as ``created``, vLLM a fresh permission id per call, llama.cpp's router whether the model is loaded now
_VOLATILE = ("created", "object", "permission", "permissions", "status", "in_cache")


def check_base_url(url: str, flag: str = "--base-url") -> str:
    """``url`` if it is an http(s) URL with a host, else :class:`SettingsError` naming ``flag``."""
    example = "give e.g. http://localhost:8000/v1"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as error:
        raise SettingsError(f"{flag} {url!r} is not a URL ({error}); {example}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{flag} {url!r} is not an http(s) URL with a host; {example}")
    return url


def normalise_url(url: str) -> str:
    """The endpoint as an identity: scheme and host lower-cased, default port, credentials and trailing
    slash dropped (``HTTP://Host:80/v1/`` -> ``http://host/v1``)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None and parts.port != {"http": 80, "https": 443}.get(scheme):
        netloc += f":{parts.port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def served_model(models: list[Any] | None, model: str) -> dict[str, Any]:
    """What identifies the model an endpoint serves for requests naming ``model``: its ``/v1/models`` entry
    (without the fields that change between calls); the only entry of a server that serves one model under
    any name (llama.cpp); else just the name (a server that lists nothing, or not this name)."""
    entries = [m for m in models or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]
    entry = next((m for m in entries if m["id"] == model), None)
    if entry is None and len(entries) == 1:
        entry = entries[0]
    if entry is None:
        return {"id": model}
    return {k: v for k, v in entry.items() if k not in _VOLATILE}


def describe_endpoint(identity: dict[str, Any]) -> str:
    """``http://host:8080/v1 (local = /models/a.gguf)``: the URL and each model name asked for, with the model
    served for it when that is another name."""
    names = []
    for name, served in sorted((identity.get("models") or {}).items()):
        served_id = served.get("id") if isinstance(served, dict) else None
        names.append(name if served_id in (None, name) else f"{name} = {served_id}")
    return f"{identity.get('url')} ({', '.join(names)})" if names else str(identity.get("url"))


class OpenAIBackend:
    """Any OpenAI-compatible ``/v1/chat/completions`` endpoint through the official ``openai`` client.

    The client's own retries are switched off: :class:`LLMClient` retries with jitter and counts them.
    ``base_url`` is e.g. ``https://api.openai.com/v1`` (the default), ``http://localhost:8000/v1`` (vLLM) or
    ``http://localhost:8080/v1`` (llama.cpp ``llama-server``).
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        *,
        identities: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        import httpx
        import openai  # lazy: only runs that talk to an endpoint need it

        if not timeout > 0:
            raise SettingsError(f"the timeout must be positive, not {timeout}")
        if base_url is not None:
            check_base_url(base_url)
        self._openai = openai
        self.base_url = base_url
        self.timeout = timeout
        # Local servers accept any key; the client insists on one. The client's timeout applies to each
        # read of the socket; complete() adds the deadline for the whole request.
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or "not-needed",
            timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
            max_retries=0,
        )
        #: the endpoint as requests go to it (OpenAI's when no base_url is given)
        self.url = str(self._client.base_url).rstrip("/")
        #: model name -> identity (see :meth:`identity`); may be shared between backends of one endpoint
        self.identities = identities if identities is not None else {}
        self._models: list[Any] | None = None
        self._models_fetched = False

    async def identity(self, model: str) -> dict[str, Any]:
        """``{"url": normalised URL, "model": what the endpoint serves for model}``, asking ``GET /models``
        once (it also checks that the endpoint can be reached and takes the key). OpenAI's own API is not
        asked what it serves: its model names identify its models, and the Batch API's answers
        (:class:`~infembed.synth.batchfile.BatchCollector`, which sends nothing) are keyed the same way."""
        if model not in self.identities:
            url = normalise_url(self.url)
            if not self._models_fetched:
                self._models = await self._fetch_models()
                self._models_fetched = True
            served = {"id": model} if url == OPENAI_URL else served_model(self._models, model)
            self.identities[model] = {"url": url, "model": served}
        return self.identities[model]

    async def _fetch_models(self) -> list[Any] | None:
        """The ``data`` list of ``GET /models``; None when the endpoint lists no models (404, not JSON)."""
        openai = self._openai
        try:
            body = await asyncio.wait_for(self._client.get("models", cast_to=object), self.timeout)
        except asyncio.TimeoutError:
            raise TransientError(f"GET {self.url}/models timed out (after {self.timeout:g} s)") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
            raise FatalEndpointError(
                f"{self.url} refused the request for its models ({error.status_code}: {_error_text(error)})"
            ) from None
        except openai.APIStatusError as error:
            if error.status_code == 429 or error.status_code >= 500:
                retry_after = _retry_after(error.response.headers.get("retry-after"))
                text = f"GET {self.url}/models: HTTP {error.status_code}: {_error_text(error)}"
                raise TransientError(text, retry_after) from None
            return None  # e.g. a proxy without /models: the model name is all there is
        except openai.APITimeoutError as error:
            if _is_connect_error(error.__cause__, "ConnectTimeout"):
                raise ConnectFailed(
                    f"cannot connect to {self.url} (no connection within {min(self.timeout, CONNECT_TIMEOUT):g} s; "
                    "is a server running there?)"
                ) from None
            raise TransientError(f"GET {self.url}/models timed out (after {self.timeout:g} s)") from None
        except openai.APIConnectionError as error:
            if _is_connect_error(error.__cause__):
                raise ConnectFailed(
                    f"cannot connect to {self.url} ({error.__cause__}; is a server running there?)"
                ) from None
            raise TransientError(f"connection failed: {error}") from None
        except (openai.APIResponseValidationError, ValueError, TypeError):
            return None
        data = body.get("data") if isinstance(body, dict) else None
        return data if isinstance(data, list) else None

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
        except openai.APITimeoutError as error:
            if _is_connect_error(error.__cause__, "ConnectTimeout"):  # a host that drops the packets
                raise ConnectFailed(
                    f"cannot connect to {self.url} (no connection within {min(self.timeout, CONNECT_TIMEOUT):g} s; "
                    "is a server running there?)"
                ) from None
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


def _is_connect_error(error: BaseException | None, name: str = "ConnectError") -> bool:
    """No connection was made at all: httpx's ``ConnectError`` (by name: the SDK may ship its own httpx)."""
    return error is not None and any(k.__name__ == name for k in type(error).__mro__)


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
