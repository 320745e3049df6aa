"""Throughput of the synthesis pipeline against our local OpenAI-compatible server with an injected latency.

Runs the whole pipeline (8 requests a row: instruction, I-, Q-, P1-, P2-, 3 judge scenarios) at concurrency
1, 8 and 32, each with a fresh cache so every request goes to the server, and prints rows/s and the
speed-up over concurrency 1 (the peer). The server runs in its own process, so that its threads do not
compete with the client for the GIL. Then reruns the concurrency-32 job into a new output directory with
the cache of the first run (every answer is a cache hit) and prints its time relative to the first run.

    .venv/bin/python bench/synth.py [--latency 0.05] [--rows 64] [--seed-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from infembed.synth.inputs import SeedData, load_seed
from infembed.synth.llm import LLMClient, OpenAIBackend, ResponseCache
from infembed.synth.pipeline import Pipeline, SynthConfig

SERVER = Path(__file__).resolve().parents[1] / "tests" / "synth" / "fake_openai_server.py"


class ServerProcess:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.root = base_url.removesuffix("/v1")

    def _call(self, path: str, method: str = "GET", payload: dict | None = None) -> dict:
        data = json.dumps(payload or {}).encode() if method == "POST" else None
        request = urllib.request.Request(self.root + path, data=data, method=method)
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def configure(self, config: dict) -> None:
        self._call("/admin/config", "POST", config)

    def stats(self) -> dict:
        return self._call("/admin/stats")

    def reset(self) -> None:
        self._call("/admin/reset", "POST")


@contextlib.contextmanager
def server_process(latency: float) -> Iterator[ServerProcess]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", "0", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        yield ServerProcess(line.strip().rsplit(" ", 1)[-1])
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_once(
    server: ServerProcess,
    seed: SeedData,
    out: Path,
    cache: Path,
    concurrency: int,
    config: SynthConfig | None = None,
) -> tuple[float, dict]:
    async def main() -> dict:
        client = LLMClient(
            OpenAIBackend(base_url=server.base_url, timeout=30), ResponseCache(cache), concurrency=concurrency
        )
        try:
            return await Pipeline(seed, out, client, config or SynthConfig(model="bench-gen")).run()
        finally:
            await client.aclose()
            client.cache.close()

    started = time.perf_counter()
    summary = asyncio.run(main())
    return time.perf_counter() - started, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the server waits per request")
    parser.add_argument("--rows", type=int, default=64, help="pairs per run at concurrency 8 and 32")
    parser.add_argument("--rows-c1", type=int, default=16, help="pairs for the concurrency-1 run")
    data = Path(os.environ.get("INFEMBED_DATA_DIR", "/work/shared/data"))
    parser.add_argument("--seed-dir", type=Path, default=data / "raw" / "msmarco-instructir-seed")
    parser.add_argument(
        "--replay",
        type=Path,
        default=None,
        help="also replay this InF-IR file through the pipeline (the server answers with its texts) and "
        "print the tokens per row and the cost of 1,000 pairs on hosted models",
    )
    parser.add_argument(
        "--reasoning-tokens",
        type=int,
        default=600,
        help="hidden reasoning tokens assumed per o3-mini judge answer (the server reports none)",
    )
    parser.add_argument("--replay-output", type=Path, default=None, help="keep the replay run in this dir")
    parser.add_argument("--replay-only", action="store_true", help="skip the throughput runs")
    args = parser.parse_args()
    if not args.replay_only:
        throughput(args)
    if args.replay:
        replay_cost(args)


def replay_cost(args: argparse.Namespace) -> None:
    """Tokens per row, counted by the pipeline on real text lengths, and what 1,000 pairs would cost."""
    from infembed.data.jsonl import read_jsonl
    from infembed.data.records import TRIPLET_FIELDS
    from infembed.synth.costs import price_for
    from infembed.synth.inputs import SeedPair

    rows = read_jsonl(args.replay)
    corpus = load_seed(str(args.seed_dir))
    seed = SeedData(
        [
            SeedPair(str(r.get("id", i)), r["query_positive"], r["document_positive"])
            for i, r in enumerate(rows)
        ],
        corpus.distractors,
        str(args.replay),
    )
    with tempfile.TemporaryDirectory() as tmp, server_process(0.0) as server:
        server.configure({"replay": rows})
        config = SynthConfig(model="gpt-4o-mini", judge_model="o3-mini")
        out = args.replay_output or Path(tmp) / "out"
        seconds, summary = run_once(server, seed, out, out / "cache.sqlite", 32, config)
        kept = {r["id"]: r for r in read_jsonl(out / "train.jsonl")}
    same = sum(
        1
        for i, b in enumerate(rows)
        if str(b.get("id", i)) in kept and all(kept[str(b.get("id", i))][f] == b[f] for f in TRIPLET_FIELDS)
    )
    finished = summary["rows"]["kept"] + summary["rows"]["rejected"]
    per_stage = summary["tokens"]["per_stage"]
    print(
        f"\nreplay of {args.replay} ({len(rows)} rows) through the pipeline in {seconds:.1f} s: "
        f"{summary['rows']['kept']} kept ({same} identical to the file), {summary['rows']['rejected']} rejected"
    )
    for stage, info in summary["stages"].items():
        if info["rejected"]:
            print(f"  rejected at {stage}: {info['reasons']}")
    print("tokens per finished pair (prompt tokens = characters/4 of the pipeline's real prompts):")
    gen_in = gen_out = 0.0
    for stage, usage in per_stage.items():
        p_in, p_out = usage["prompt_tokens"] / finished, usage["completion_tokens"] / finished
        print(f"  {stage:<12} {usage['requests'] / finished:4.1f} requests {p_in:8.0f} in {p_out:6.0f} out")
        if stage != "judge":
            gen_in, gen_out = gen_in + p_in, gen_out + p_out
    judge = per_stage["judge"]
    j_in, j_out = judge["prompt_tokens"] / finished, judge["completion_tokens"] / finished
    j_requests = judge["requests"] / finished
    print("cost of 1,000 pairs (US$; prices in infembed.synth.costs; Batch API = half):")
    plans = [
        ("gpt-4o-mini for all stages", "gpt-4o-mini", "gpt-4o-mini", 0),
        (
            f"gpt-4o-mini + o3-mini judge ({args.reasoning_tokens} reasoning tokens/answer)",
            "gpt-4o-mini",
            "o3-mini",
            args.reasoning_tokens,
        ),
        ("gpt-4o for all stages", "gpt-4o", "gpt-4o", 0),
    ]
    for label, gen_model, judge_model, reasoning in plans:
        gen_price, judge_price = price_for(gen_model), price_for(judge_model)
        assert gen_price and judge_price
        cost = gen_price.cost(int(gen_in * 1000), int(gen_out * 1000)) + judge_price.cost(
            int(j_in * 1000), int((j_out + reasoning * j_requests) * 1000)
        )
        print(f"  {label:<62} ${cost:7.2f}  (batch ${cost / 2:6.2f})")


def throughput(args: argparse.Namespace) -> None:
    full = load_seed(str(args.seed_dir), limit=max(args.rows, args.rows_c1))
    results = []
    with tempfile.TemporaryDirectory() as tmp, server_process(args.latency) as server:
        root = Path(tmp)
        for concurrency in (1, 8, 32):
            n = args.rows_c1 if concurrency == 1 else args.rows
            seed = SeedData(full.pairs[:n], full.distractors, full.source)
            server.reset()
            seconds, summary = run_once(
                server, seed, root / f"c{concurrency}", root / f"c{concurrency}.sqlite", concurrency
            )
            requests = server.stats()["requests"]
            assert summary["rows"]["kept"] == n, summary["rows"]
            results.append((concurrency, n, seconds, requests))
        server.reset()
        cached_seconds, summary = run_once(server, seed, root / "cached", root / "c32.sqlite", 32)
        cached_requests = server.stats()["requests"]

    base_rate = results[0][1] / results[0][2]
    print(
        f"synth pipeline vs local server, injected latency {args.latency * 1000:.0f} ms/request, 8 requests/row"
    )
    print(
        f"{'concurrency':>11} {'rows':>5} {'seconds':>8} {'rows/s':>7} {'req/s':>7} {'speed-up vs c=1':>16}"
    )
    for concurrency, n, seconds, requests in results:
        rate = n / seconds
        print(
            f"{concurrency:>11} {n:>5} {seconds:>8.2f} {rate:>7.2f} {requests / seconds:>7.1f} {rate / base_rate:>15.1f}x"
        )
    first = results[-1][2]
    print(
        f"cached rerun (c=32, {results[-1][1]} rows, new output dir, same cache): {cached_seconds:.2f} s, "
        f"{cached_requests} requests to the server, {cached_seconds / first:.1%} of the first run's time "
        f"({first / cached_seconds:.0f}x faster)"
    )
    ideal = 8 * args.latency
    print(f"(ideal at c=1: {1 / ideal:.2f} rows/s; at c=32 the ideal is 32x that)")


if __name__ == "__main__":
    main()
