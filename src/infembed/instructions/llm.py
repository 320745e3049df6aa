"""The ``llm`` splitter: any OpenAI-compatible endpoint, through the synthesis client (cache keyed by endpoint,
retries), asked for the same :class:`~infembed.instructions.Instruction` as JSON; a malformed answer falls back to
the rules. The endpoint is checked when the splitter is built."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from infembed.instructions.instruction import Instruction
from infembed.instructions.rules_text import strip_end
from infembed.instructions.split import split_instruction

LLM_SYSTEM_PROMPT = (
    "You decompose search instructions. Given an instruction that a user wrote to narrow a document search, "
    'return JSON with two keys: "keep", the instruction rewritten without any clause that excludes something '
    "(keep every positive requirement, including 'only X are relevant', in the user's words), and \"exclude\", a list "
    "of the excluded aspects, each a short standalone noun phrase naming what the unwanted documents are about "
    "(for 'Documents on supersonic flow are not relevant' the aspect is 'supersonic flow'). A negation that does not "
    "exclude documents ('documents need not be recent', 'not only X but also Y') is not an exclusion. If nothing is "
    'excluded, "keep" is the instruction unchanged and "exclude" is []. Answer with the JSON object only.'
)
LLM_SCHEMA = {
    "type": "object",
    "properties": {"keep": {"type": "string"}, "exclude": {"type": "array", "items": {"type": "string"}}},
    "required": ["keep", "exclude"],
}


def parse_llm_answer(text: str, instruction: str) -> Instruction:
    """The LLM's JSON answer as an :class:`Instruction`; a malformed answer raises ``ValueError``."""
    match = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not match:
        raise ValueError(f"no JSON object in the answer: {text[:80]!r}")
    data = json.loads(match.group(0))
    if not isinstance(data, dict) or not isinstance(data.get("keep", ""), str):
        raise ValueError("the answer's 'keep' must be a string")
    exclude = data.get("exclude") or []
    if isinstance(exclude, str):
        exclude = [exclude]
    if not isinstance(exclude, list) or not all(isinstance(e, str) for e in exclude):
        raise ValueError("the answer's 'exclude' must be a list of strings")
    exclude = [strip_end(e) for e in exclude if strip_end(e)]
    if not exclude:
        return Instruction(instruction)
    return Instruction(keep=(data.get("keep") or "").strip(), exclude=exclude)


def llm_splitter(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    cache: str | None = None,
    concurrency: int = 8,
    timeout: float = 60.0,
    fallback: str = "rules",
) -> Callable[[str], Instruction]:
    """A splitter that asks an OpenAI-compatible endpoint (through :class:`infembed.synth.llm.LLMClient`: cache,
    retries). A malformed answer falls back to ``fallback`` (``"rules"`` or ``"off"``) for that instruction.

    The endpoint is asked once, here, what it serves (``GET /v1/models``): an endpoint that cannot be reached
    fails now, in a few seconds and before any model is loaded, with a
    :class:`~infembed.synth.llm.EndpointUnreachable` (a :class:`~infembed.data.errors.DataError`: one line in the
    CLI). Its identity (URL and served model) is part of every cache key, so splits cached from one endpoint
    are never served for another."""
    import asyncio

    from infembed.synth.llm import (
        ChatRequest,
        EndpointError,
        LLMClient,
        OpenAIBackend,
        ResponseCache,
        Sampling,
        check_base_url,
    )

    check_base_url(base_url, "--exclusion-llm-url")
    identities: dict = {}  # model -> the endpoint's identity, asked once and shared by every batch's client

    def client(store: ResponseCache | None, **kwargs: float) -> LLMClient:
        backend = OpenAIBackend(base_url=base_url, api_key=api_key, timeout=timeout, identities=identities)
        return LLMClient(backend, store, concurrency=concurrency, **kwargs)  # type: ignore[arg-type]

    async def probe() -> None:  # a few quick tries: an endpoint that is down fails in seconds
        checker = client(None, connect_retries=1, max_retries=2, backoff_base=0.5)
        try:
            await checker.endpoint(model)
        finally:
            await checker.aclose()

    def asking(work: Any) -> Any:
        try:
            return asyncio.run(work)
        except EndpointError as error:  # the URL, which the retries' message does not name
            raise EndpointError(f"the splitter's endpoint {base_url}: {error}") from None

    asking(probe())

    def request(instruction: str) -> ChatRequest:
        return ChatRequest.build(
            model,
            [{"role": "system", "content": LLM_SYSTEM_PROMPT}, {"role": "user", "content": instruction}],
            sampling=Sampling(temperature=0.0, max_tokens=400),
        )

    async def run(texts: list[str]) -> list[Instruction]:
        llm = client(ResponseCache(cache) if cache else None)
        try:

            async def one(text: str) -> Instruction:
                response = await llm.complete(request(text))
                try:
                    return parse_llm_answer(response.text, text)
                except (ValueError, json.JSONDecodeError):
                    return split_instruction(text, fallback)

            return list(await asyncio.gather(*(one(t) for t in texts)))
        finally:
            await llm.aclose()
            if llm.cache is not None:
                llm.cache.close()

    memo: dict[str, Instruction] = {}

    def batch(texts: Sequence[str | None]) -> list[Instruction]:
        todo = sorted({t.strip() for t in texts if t and t.strip() and t.strip() not in memo})
        if todo:
            memo.update(zip(todo, asking(run(todo))))
        return [memo[t.strip()] if t and t.strip() else Instruction("") for t in texts]

    def splitter(text: str) -> Instruction:
        return batch([text])[0]

    splitter.batch = batch  # type: ignore[attr-defined]
    splitter.name = f"llm:{model}"  # type: ignore[attr-defined]
    return splitter
