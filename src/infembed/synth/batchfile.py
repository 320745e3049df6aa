"""OpenAI Batch API files: export the requests a run still needs, import the answers into the cache.

The Batch API answers within 24 hours at half the price. A batch run goes stage by stage, because a stage's
prompts contain the previous stage's answers:

1. ``infembed synth export-batch SEED --output RUN --batch-file requests.jsonl`` runs the pipeline with a
   :class:`BatchCollector` instead of an endpoint: every answer found in the cache is used, every request
   not in the cache is written to ``requests.jsonl`` (one line ``{custom_id, method, url, body}``, the
   ``custom_id`` being the request's cache key) and its row waits.
2. Upload the file and start the batch (``openai`` CLI or SDK: ``files.create(purpose="batch")`` then
   ``batches.create(endpoint="/v1/chat/completions", completion_window="24h")``), download the output file.
3. ``infembed synth import-batch output.jsonl --cache RUN/cache.sqlite`` stores every answer in the cache.
4. Repeat from 1 until the export finds no request left: the run is then complete and ``train.jsonl`` holds
   the rows. Four rounds (instruction, poison, negatives, judge) plus one per answer retry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.data.jsonl import iter_jsonl, write_jsonl
from infembed.synth.llm import (
    OPENAI_URL,
    ChatRequest,
    ChatResponse,
    Deferred,
    MalformedResponse,
    ResponseCache,
)

#: the Batch API's limit of requests per input file
MAX_REQUESTS_PER_FILE = 50_000
_KEY = re.compile(r"^[0-9a-f]{64}$")


class BatchCollector:
    """A backend that sends nothing: it records each request that missed the cache and raises
    :class:`~infembed.synth.llm.Deferred`, so its row waits for the next round. Its endpoint is OpenAI's
    API, identified as :class:`~infembed.synth.llm.OpenAIBackend` identifies it (by the model name), so the
    answers a batch brings serve a ``synth run`` against OpenAI too."""

    def __init__(self) -> None:
        self.requests: dict[str, ChatRequest] = {}

    async def identity(self, model: str) -> dict[str, Any]:
        return {"url": OPENAI_URL, "model": {"id": model}}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests[request.key()] = request
        raise Deferred("waiting for a batch answer")

    async def aclose(self) -> None:
        return None


def batch_line(request: ChatRequest) -> dict[str, Any]:
    return {
        "custom_id": request.key(),
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": request.body(),
    }


def write_batch_files(
    path: str | Path, requests: Iterable[ChatRequest], max_per_file: int = MAX_REQUESTS_PER_FILE
) -> list[Path]:
    """Write Batch API input file(s): ``path`` itself, or ``NAME-001.jsonl``, ``NAME-002.jsonl`` ... when
    there are more than ``max_per_file`` requests. Returns the files written (none for no request)."""
    path = Path(path)
    lines = [batch_line(r) for r in requests]
    if not lines:
        return []
    if len(lines) <= max_per_file:
        write_jsonl(path, lines)
        return [path]
    out = []
    for part, start in enumerate(range(0, len(lines), max_per_file), start=1):
        part_path = path.with_name(f"{path.stem}-{part:03d}{path.suffix or '.jsonl'}")
        write_jsonl(part_path, lines[start : start + max_per_file])
        out.append(part_path)
    return out


@dataclass
class ImportReport:
    imported: int = 0
    already_cached: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # {custom_id, status, message}


def import_batch_results(paths: Iterable[str | Path], cache: ResponseCache) -> ImportReport:
    """Store the answers of Batch API output (or error) files in ``cache``.

    Lines that carry an error, and answers with an empty ``choices`` list (a broken response, not an empty
    answer), are reported, not stored, so the next export asks for them again. A line that is not Batch
    API output at all (``"response": "oops"``, a choice that is not an object ...) raises
    :class:`~infembed.data.errors.DataError` naming the file, line and field.
    """
    report = ImportReport()
    for path in paths:
        for line, obj in iter_jsonl(path):
            custom_id = obj.get("custom_id")
            if not isinstance(custom_id, str) or not _KEY.match(custom_id):
                raise DataError(
                    "custom_id is not a request key written by export-batch", path, line, "custom_id"
                )
            response = obj.get("response")
            if response is None:
                response = {}
            if not isinstance(response, dict):
                raise DataError(
                    f"expected an object {{status_code, body}} or null, got {_json_type(response)}",
                    path,
                    line,
                    "response",
                )
            status = response.get("status_code")
            body = response.get("body")
            error = obj.get("error")
            if error or status != 200 or not isinstance(body, dict):
                message = ""
                if isinstance(error, dict):
                    message = str(error.get("message") or error)
                elif error:
                    message = str(error)
                elif isinstance(body, dict) and isinstance(body.get("error"), dict):
                    message = str(body["error"].get("message") or body["error"])
                elif status == 200:
                    message = f"the response body is {_json_type(body)}, not an object"
                report.errors.append({"custom_id": custom_id, "status": status, "message": message[:300]})
                continue
            try:
                answer = ChatResponse.from_completion(body)
            except MalformedResponse as bad:
                if bad.field == "choices" and body.get("choices") == []:
                    message = "malformed response: no choices"
                    report.errors.append({"custom_id": custom_id, "status": status, "message": message})
                    continue
                field_name = "response.body" + (f".{bad.field}" if bad.field else "")
                raise DataError(str(bad), path, line, field_name) from None
            if custom_id in cache:
                report.already_cached += 1
                continue
            cache.put(custom_id, answer, answer.model)
            report.imported += 1
    return report


def _json_type(value: Any) -> str:
    """How a JSON value is called in an error message: 'a string ("oops")', 'null', 'a list' ..."""
    if value is None:
        return "null"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown)})"
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return names.get(type(value), type(value).__name__)
