"""A deterministic OpenAI-compatible chat server for tests and benchmarks (standard library only).

It answers ``POST /v1/chat/completions`` from the prompt alone, so the same prompt always gets the same
answer, and it can misbehave on demand:

* ``latency``: seconds to sleep before each answer;
* ``fail_next``: a list of HTTP statuses returned to the next requests (e.g. ``[429, 500]``);
* ``fail_all``: a status returned to every request (a server that keeps failing);
* ``replay``: InF-IR rows: a prompt whose query is a row's Q+ or Q- gets that row's text as the answer
  (and the judge names the row's intended passage), so a run reproduces the rows with real text lengths;
* ``rules``: ``{"task", "contains", "reply" | "status", "times"}``: for requests of that task (see
  ``infembed.synth.prompts.task_of``) whose user message contains the text (or every text of a list), reply with ``empty``,
  ``refusal``, ``garbage``, ``multiline``, ``echo`` (poisoned field = the positive one), ``cut``
  (finish_reason "length"), ``wrong`` (judge: a distractor), ``json_fragment`` (the text ``{"instr``),
  ``html`` (an nginx "502 Bad Gateway" page as the answer text), ``malformed`` (a 200 whose body is not
  JSON) or ``no_choices`` (a 200 with ``"choices": []``), or answer with an HTTP ``status`` (and the error
  ``message``); ``trickle``: seconds between the bytes of the answer's body (a server that never stalls
  long but never finishes either); ``times`` matches (default 1, -1 for always);
* ``tag``: a text put into every generated instruction (``(from TAG)``), so that two servers answer the same
  prompt differently and a test can tell whose answers a row holds;
* ``instructions`` prompts (``infembed synth instructions``) get a fixed mix of valid and invalid labelled
  rows (``fake_instruction_answers.py``);
* the prompts of ``--style negation`` are answered by ``fake_negation_answers.py`` (rule replies ``vague``,
  ``echo`` and ``wrong`` there);
* ``models``: the ``data`` list ``GET /v1/models`` answers (default one ``fake-model``), e.g. one entry
  ``{"id": "/models/a.gguf", "owned_by": "llamacpp"}`` as llama.cpp's server reports the file it serves.

How the answers are made, so that the judge can be right: I+ ends with ``ref <hash of P+>``; a negative
passage written for (I, Q) carries the marker ``<hash I>-<hash Q>``; the judge picks the candidate carrying
the marker of the (instruction, query) it is shown, else the one whose hash the instruction's ``ref``
names. So P1- = f(I-, Q+) wins (I-, Q+), P2- = f(I+, Q-) wins (I+, Q-), and P+ wins (I+, Q+).

``GET /admin/stats`` gives request counts (by task, and how many asked for a ``response_format``); ``POST
/admin/config`` replaces the behaviour; ``POST /admin/reset`` zeroes the counts. Start in-process with :class:`FakeOpenAIServer` (a context manager) or
as ``python fake_openai_server.py --port 8000 --latency 0.05``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fake_benchmark_answers import as_json, benchmark_answer
from fake_instruction_answers import instruction_answer
from fake_negation_answers import negation_answer

from infembed.synth.prompts import task_of

#: what an nginx proxy returns when the model server behind it is down (one line, as some proxies send it)
NGINX_502 = (
    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>"
    "<hr><center>nginx/1.18.0 (Ubuntu)</center></body></html>"
)


def text_hash(text: str) -> str:
    return hashlib.sha1(" ".join(text.split())[:100].encode("utf-8")).hexdigest()[:8]


def _field(content: str, label: str) -> str:
    match = re.search(rf"^{re.escape(label)}: (.*)$", content, re.MULTILINE)
    return match.group(1).strip() if match else ""


def _block(content: str, label: str) -> str:
    """A possibly multi-line field, up to the next blank line."""
    match = re.search(rf"^{re.escape(label)}: (.*?)(?=\n\n|\Z)", content, re.MULTILINE | re.DOTALL)
    return match.group(1).strip() if match else ""


def _words(text: str, k: int = 3) -> list[str]:
    words = sorted({w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)}, key=lambda w: (-len(w), w))
    return words[:k] or ["topic"]


def _candidates(content: str) -> list[str]:
    pattern = r"^\[\d+\] (.*?)(?=\n\n\[\d+\] |\n\nWhich passage|\Z)"
    return [m.group(1).strip() for m in re.finditer(pattern, content, re.MULTILINE | re.DOTALL)]


class Behaviour:
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        config = dict(config or {})
        self.latency = float(config.get("latency", 0.0))
        self.fail_next = list(config.get("fail_next", []))
        self.fail_all = config.get("fail_all")
        self.rules = [dict(r) for r in config.get("rules", [])]
        self.tag = str(config.get("tag", ""))
        self.models = list(config.get("models", [{"id": "fake-model", "object": "model"}]))
        rows = config.get("replay", [])
        self.by_query = {r["query_positive"]: r for r in rows} | {r["query_negative"]: r for r in rows}
        self.lock = threading.Lock()

    def match(self, task: str | None, content: str) -> dict[str, Any] | None:
        with self.lock:
            for rule in self.rules:
                if rule.get("task") not in (None, task):
                    continue
                needles = rule.get("contains") or []
                if any(n not in content for n in ([needles] if isinstance(needles, str) else needles)):
                    continue
                times = rule.get("times", 1)
                if times == 0:
                    continue
                if times > 0:
                    rule["times"] = times - 1
                return rule
        return None

    def next_failure(self) -> int | None:
        with self.lock:
            if self.fail_all:
                return int(self.fail_all)
            if self.fail_next:
                return int(self.fail_next.pop(0))
        return None


def replay(task: str | None, content: str, by_query: dict[str, dict[str, str]]) -> str | None:
    """The answer an LLM gave when the InF-IR row holding this prompt's query was made, or None."""
    query, instruction = _field(content, "Query"), _field(content, "Instruction")
    row = by_query.get(query)
    if row is None:
        return None
    positive = query == row["query_positive"]
    if task == "instruction":
        return f"Instruction: {row['instruction_positive']}"
    if task == "poison_instruction":
        return f"Instruction: {row['instruction_negative']}"
    if task == "poison_query":
        return f"Query: {row['query_negative']}"
    if task == "negative_passage":
        return f"Passage: {row['hard_negative_document_1' if positive else 'hard_negative_document_2']}"
    if task == "judge":
        if not positive:
            intended = row["hard_negative_document_2"]
        elif instruction == row["instruction_negative"]:
            intended = row["hard_negative_document_1"]
        else:
            intended = row["document_positive"]
        # the candidate sharing the longest prefix (negatives often start like P+; long texts are shortened)
        target = " ".join(intended.split())
        scores = [len(os.path.commonprefix([" ".join(c.split()), target])) for c in _candidates(content)]
        if scores and max(scores) >= 20:
            return f"Answer: {scores.index(max(scores)) + 1}"
    return None


def _split_task(messages: list[dict[str, Any]]) -> str | None:
    """The instruction splitter's prompt (infembed.instructions.LLM_SYSTEM_PROMPT) is the task "split"."""
    from infembed.instructions import LLM_SYSTEM_PROMPT

    first_system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
    return "split" if first_system == LLM_SYSTEM_PROMPT else None


def _instructions_task(messages: list[dict[str, Any]]) -> str | None:
    """The prompt of ``infembed synth instructions`` (its system message opens with TASK_HEADER)."""
    from infembed.synth.instruction_prompts import TASK_HEADER

    first_system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
    return "instructions" if first_system.split("\n", 1)[0] == TASK_HEADER else None


def answer(task: str | None, content: str, reply: str | None, tag: str = "") -> tuple[str, str]:
    """(answer text, finish_reason) for a prompt; ``reply`` is a rule's misbehaviour; ``tag`` marks the
    instructions this server writes."""
    if task and task.startswith("benchmark_") and reply is None:
        return benchmark_answer(task, content) or "", "stop"
    if task == "split" and reply is None:
        # a model that splits like the rules would, in the JSON the prompt asks for, wrapped in prose
        from infembed.instructions import split_instruction

        return "Here is the JSON:\n" + json.dumps(split_instruction(content).to_json()), "stop"
    if reply == "empty":
        return "", "stop"
    if reply == "refusal":
        return "I'm sorry, but I can't help with that request.", "stop"
    if reply == "garbage":
        return "### ???" if task != "judge" else "Hmm, several of them look fine to me honestly.", "stop"
    if reply == "json_fragment":
        return '{"instr', "stop"
    if reply == "html":
        return NGINX_502, "stop"
    query, instruction = _field(content, "Query"), _field(content, "Instruction")
    if task == "instruction":
        passage = _block(content, "Relevant passage")
        words = ", ".join(_words(passage))
        mark = f" (from {tag})" if tag else ""
        text = f"Instruction: Prefer passages that explain {words} in plain terms{mark}, ref {text_hash(passage)}."
    elif task == "poison_instruction":
        if reply == "echo":
            return f"Instruction: {instruction}", "stop"
        passage = _block(content, "Passage")
        words = " and ".join(_words(passage, 2))
        text = f"Instruction: Prefer passages that dispute {words} from an opposing viewpoint, variant {text_hash(instruction)}."
    elif task == "poison_query":
        if reply == "echo":
            return f"Query: {query}", "stop"
        text = f"Query: {query} versus the alternatives"
    elif task == "negative_passage":
        reference = _block(content, "Reference passage")
        words = ", ".join(_words(reference, 4))
        text = (
            f"Passage: This passage answers '{query}' under a different reading, marker "
            f"{text_hash(instruction)}-{text_hash(query)}. It discusses {words} with other facts, other "
            "figures and another conclusion than the usual account."
        )
    elif task and task.startswith("negation_"):  # --style negation (fake_negation_answers.py)
        text = negation_answer(task, content, reply)
    elif task == "judge":
        candidates = _candidates(content)
        marker = f"{text_hash(instruction)}-{text_hash(query)}"
        ref = re.search(r"ref ([0-9a-f]{8})", instruction)
        best = next((i for i, c in enumerate(candidates) if marker in c), None)
        if best is None and ref:
            best = next((i for i, c in enumerate(candidates) if text_hash(c) == ref.group(1)), None)
        if best is None:
            best = 0
        if reply == "wrong":
            others = [i for i, c in enumerate(candidates) if i != best and "marker" not in c]
            best = others[0] if others else (best + 1) % max(1, len(candidates))
        text = f"Answer: {best + 1}"
    else:
        text = "Hello from the fake server."
    if reply == "multiline":
        text += "\nNote: I made this by following the rules above.\nSecond line."
    if reply == "cut":
        return text[: max(1, len(text) // 2)], "length"
    return text, "stop"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle + delayed ACK add ~40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: Any) -> None:  # quiet
        return None

    def _send(
        self,
        status: int,
        payload: Any,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        trickle: float = 0.0,
    ):
        body = raw if raw is not None else json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if not trickle:
                self.wfile.write(body)
                return
            for i in range(len(body)):  # one byte at a time until the client gives up
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
                time.sleep(trickle)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        return json.loads(data or b"{}")

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/admin/stats":
            self._send(200, self.server.stats())
        elif self.path.rstrip("/").endswith("/models"):
            with self.server.lock:
                self.server.counts["models"] += 1
            self._send(200, {"object": "list", "data": self.server.behaviour.models})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        try:
            body = self._body()
        except ValueError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        if self.path == "/admin/config":
            self.server.behaviour = Behaviour(body)
            self._send(200, {"ok": True})
            return
        if self.path == "/admin/reset":
            self.server.reset()
            self._send(200, {"ok": True})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        self.server.handle_chat(self, body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the default backlog of 5 refuses connections from 32 concurrent clients

    def __init__(self, address: tuple[str, int], behaviour: Behaviour) -> None:
        super().__init__(address, _Handler)
        self.behaviour = behaviour
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def handle_error(self, request: Any, client_address: Any) -> None:  # dropped clients are normal
        return None

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()

    def stats(self) -> dict[str, Any]:
        with self.lock:
            by_task = {k[5:]: v for k, v in self.counts.items() if k.startswith("task:")}
            return {
                "requests": self.counts["requests"],
                "answered": self.counts["answered"],
                "failed": self.counts["failed"],
                "models": self.counts["models"],
                "response_format": self.counts["response_format"],
                "by_task": by_task,
            }

    def handle_chat(self, handler: _Handler, body: dict[str, Any]) -> None:
        behaviour = self.behaviour
        messages = body.get("messages") or []
        task = task_of(messages) or _split_task(messages) or _instructions_task(messages)
        content = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") != "system")
        with self.lock:
            self.counts["requests"] += 1
            self.counts[f"task:{task}"] += 1
            self.counts["response_format"] += bool(body.get("response_format"))
        if behaviour.latency:
            time.sleep(behaviour.latency)
        status = behaviour.next_failure()
        rule = behaviour.match(task, content) if status is None else None
        if rule is not None and rule.get("status"):
            status = int(rule["status"])
        if status is not None:
            with self.lock:
                self.counts["failed"] += 1
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            message = (rule or {}).get("message") or f"injected {status}"
            handler._send(
                status,
                {"error": {"message": message, "type": kind}},
                headers={"Retry-After": "0"},
            )
            return
        reply = rule.get("reply") if rule else None
        if reply == "malformed":
            with self.lock:
                self.counts["failed"] += 1
            handler._send(200, None, raw=b"<html>this is not json")
            return
        if reply == "no_choices":
            with self.lock:
                self.counts["failed"] += 1
            handler._send(200, {"id": "chatcmpl-x", "object": "chat.completion", "choices": []})
            return
        replayed = replay(task, content, behaviour.by_query) if behaviour.by_query and not reply else None
        text, finish = (
            (replayed, "stop") if replayed is not None else answer(task, content, reply, behaviour.tag)
        )
        if task == "instructions" and reply is None:  # a JSON list of labelled instructions
            text = instruction_answer(content, constrained=bool(body.get("response_format")))
        elif body.get("response_format") and reply is None and finish == "stop":
            text = as_json(text)  # as a server with JSON-constrained output answers
        all_text = " ".join(str(m.get("content") or "") for m in messages)
        completion = {
            "id": "chatcmpl-" + hashlib.sha1(all_text.encode()).hexdigest()[:12],
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake-model"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": math.ceil(len(all_text) / 4),
                "completion_tokens": math.ceil(len(text) / 4),
                "total_tokens": math.ceil(len(all_text) / 4) + math.ceil(len(text) / 4),
            },
        }
        with self.lock:
            self.counts["answered"] += 1
        handler._send(200, completion, trickle=float((rule or {}).get("trickle") or 0.0))


class FakeOpenAIServer:
    """Runs the server in a daemon thread on 127.0.0.1 and a free port.

    >>> with FakeOpenAIServer({"latency": 0.01}) as server:
    ...     base_url = server.base_url  # http://127.0.0.1:PORT/v1
    """

    def __init__(self, config: dict[str, Any] | None = None, port: int = 0) -> None:
        self._server = _Server(("127.0.0.1", port), Behaviour(config))
        self.port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def configure(self, config: dict[str, Any]) -> None:
        self._server.behaviour = Behaviour(config)

    def stats(self) -> dict[str, Any]:
        return self._server.stats()

    def reset(self) -> None:
        self._server.reset()

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0)
    args = parser.parse_args()
    server = FakeOpenAIServer({"latency": args.latency}, port=args.port)
    print(f"fake OpenAI server on {server.base_url}", flush=True)
    server._server.serve_forever()


if __name__ == "__main__":
    main()
