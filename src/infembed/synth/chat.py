"""What is asked of an LLM and what comes back: :class:`Sampling`, :class:`ChatRequest` (whose
:meth:`~ChatRequest.key` is the response cache's key), :class:`ChatResponse`, and the errors of the LLM layer
(:mod:`infembed.synth.llm` sends the requests)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from infembed.data.errors import DataError

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


class EndpointError(LLMError, DataError):
    """The endpoint kept failing for one request after every retry. A :class:`DataError`, so the CLI prints it
    as one line (exit 2), as it does every error of the endpoint below."""


class FatalEndpointError(LLMError, DataError):
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
    """One chat completion request. ``stage`` only labels the accounting; it is not part of the key.
    ``endpoint`` is what identifies the endpoint and the model it serves (set by
    :class:`~infembed.synth.llm.LLMClient` from its backend): part of the key, not of the body."""

    model: str
    messages: tuple[tuple[str, str], ...]
    sampling: Sampling = field(default_factory=Sampling)
    attempt: int = 0
    stage: str = ""
    #: ``response_format`` sent as is (JSON-constrained output, see :mod:`infembed.synth.structured`);
    #: a JSON string so the request stays hashable. ``None``: not sent (free text).
    response_format: str | None = None
    #: JSON of the endpoint's identity (its URL and the model it serves); ``None``: not known
    endpoint: str | None = None

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
        """Cache key: SHA-256 of the request body (model, messages, sampling), the answer attempt and the
        endpoint (so that two servers, or two models served under one name, never share answers)."""
        data: dict[str, Any] = {"body": self.body(), "attempt": self.attempt}
        if self.endpoint is not None:
            data["endpoint"] = self.endpoint
        payload = json.dumps(data, sort_keys=True, ensure_ascii=False)
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
