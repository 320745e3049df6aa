"""Search speed: exact (faiss IndexFlatIP) vs HNSW on 100,000 random unit vectors of dimension 384, and the HTTP
service's requests/s with and without request batching.

    .venv/bin/python bench/search.py                      # everything (several minutes on 2 CPU cores)
    .venv/bin/python bench/search.py --skip-service       # vectors only
    .venv/bin/python bench/search.py --data uniform --ef-search 64,256,1024

Two data sets, both 100,000 random unit vectors (seeded numpy):

- ``uniform``: uniform on the sphere, queries too. No structure at all, the worst case for any graph index:
  every point is nearly equidistant from a query (the top-10 cosines are ~0.2, the bulk 0 +- 0.05).
- ``clustered``: the same count and dimension drawn around 1,000 random centres (cosine to the centre ~0.8),
  queries drawn the same way: structure like that of real text embeddings, where HNSW is meant to be used.

For each: queries/s (all queries in one call), p50/p95 latency of single-query calls, HNSW recall@10 against
the exact top 10, and the speed-up (exact p50 / HNSW p50, and batch queries/s ratio). faiss runs on ``--threads`` threads (1 by default:
stable figures on a shared machine; single-query search gains little from threads anyway).

The service part builds a small index (MiniLM, synthetic passages), starts ``infembed serve`` (a real uvicorn on
127.0.0.1, in its own process) and sends ``--requests`` single-query /search requests, ``--concurrency`` at a time,
from an httpx AsyncClient; once with the micro-batcher on, once off. Ratio = batched / unbatched requests/s.

The backend part (``--backends torch,openvino``, ``--skip-backends`` to leave it out) starts ``serve --backend``
with each backend in alternating rounds and reports the p50/p95 latency of /search requests (the Cranfield
queries with their instructions, from $INFEMBED_DATA_DIR) sent one at a time and ``--concurrency`` at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_data(kind: str, n: int, dim: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return unit(rng.standard_normal((n, dim), dtype=np.float32)), unit(
            rng.standard_normal((n_queries, dim), dtype=np.float32)
        )
    centres = unit(rng.standard_normal((1000, dim), dtype=np.float32))
    spread = 0.75 / np.sqrt(dim)  # cosine to the centre ~ 1 / sqrt(1 + 0.75^2) = 0.8

    def draw(count: int) -> np.ndarray:
        return unit(
            centres[rng.integers(0, len(centres), count)]
            + spread * rng.standard_normal((count, dim), dtype=np.float32)
        )

    return draw(n), draw(n_queries)


def latencies(index, queries: np.ndarray, k: int) -> list[float]:
    out = []
    for row in range(len(queries)):
        start = time.perf_counter()
        index.search(queries[row : row + 1], k)
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def throughput(index, queries: np.ndarray, k: int) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    _, ids = index.search(queries, k)
    return len(queries) / (time.perf_counter() - start), ids


def recall_at(truth: np.ndarray, found: np.ndarray) -> float:
    k = truth.shape[1]
    return float(np.mean([len(set(t) & set(f)) / k for t, f in zip(truth, found)]))


def bench_vectors(args: argparse.Namespace) -> list[dict]:
    import faiss

    faiss.omp_set_num_threads(args.threads)
    rows = []
    for kind in args.data:
        vectors, queries = make_data(kind, args.n, args.dim, args.queries)
        lat_queries = queries[: args.latency_queries]
        flat = faiss.IndexFlatIP(args.dim)
        flat.add(vectors)
        qps, truth = throughput(flat, queries, 10)
        flat_lat = latencies(flat, lat_queries, 10)
        flat_p50 = pct(flat_lat, 50)
        flat_row = len(rows)
        rows.append(
            {
                "data": kind,
                "index": "exact (FlatIP)",
                "qps": qps,
                "p50": flat_p50,
                "p95": pct(flat_lat, 95),
                "recall": 1.0,
                "speedup": 1.0,
                "batch_speedup": 1.0,
            }
        )
        print(f"[{kind}] exact: {qps:.0f} q/s, p50 {flat_p50:.2f} ms", file=sys.stderr, flush=True)
        hnsw = faiss.IndexHNSWFlat(args.dim, args.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = args.ef_construction
        start = time.perf_counter()
        hnsw.add(vectors)
        build = time.perf_counter() - start
        print(
            f"[{kind}] HNSW M={args.hnsw_m} efConstruction={args.ef_construction} built in {build:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        for ef in args.ef_search:
            hnsw.hnsw.efSearch = ef
            qps, found = throughput(hnsw, queries, 10)
            lat = latencies(hnsw, lat_queries, 10)
            rows.append(
                {
                    "data": kind,
                    "index": f"HNSW ef={ef}",
                    "qps": qps,
                    "p50": pct(lat, 50),
                    "p95": pct(lat, 95),
                    "recall": recall_at(truth, found),
                    "speedup": flat_p50 / pct(lat, 50),
                    "batch_speedup": qps / rows[flat_row]["qps"],
                    "build_s": build,
                }
            )
            print(
                f"[{kind}] efSearch={ef}: recall@10 {rows[-1]['recall']:.3f}, p50 {rows[-1]['p50']:.2f} ms",
                file=sys.stderr,
                flush=True,
            )
    return rows


# --------------------------------------------------------------------------------------------- service

WORDS = (
    "heat flow plasma turbine protein enzyme galaxy orbit glacier volcano market inflation bond river forest bee "
    "honey chess opening bread yeast vaccine antibody rover crater tide moon solar panel silicon battery lithium "
    "neural network language grammar poem novel castle empire treaty harbour ship engine wing rocket satellite"
).split()


def synthetic_corpus(n: int, seed: int = 0) -> dict[str, str]:
    rng = np.random.default_rng(seed)
    return {f"d{i}": " ".join(rng.choice(WORDS, size=int(rng.integers(12, 40)))) for i in range(n)}


async def load(
    url: str,
    n: int,
    concurrency: int,
    queries: list[str],
    instructions: list[str] | None = None,
    exclusions: str | None = None,
) -> tuple[float, list[float], int]:
    """``n`` requests from ``concurrency`` workers, each with its own keep-alive connection (one shared httpx
    pool of many connections costs the client more CPU than the server spends): (requests/s, latencies in
    ms, non-200 answers). ``instructions``: one per query (default: the same short one for all)."""
    import httpx

    todo = iter(range(n))
    times: list[float] = []
    failures = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal failures
        for i in todo:
            instruction = instructions[i % len(queries)] if instructions else "Technical documents only."
            body = {"query": queries[i % len(queries)], "instruction": instruction, "k": 10}
            if exclusions is not None:
                body["exclusions"] = exclusions
            start = time.perf_counter()
            response = await client.post("/search", json=body)
            times.append((time.perf_counter() - start) * 1000.0)
            failures += response.status_code != 200

    clients = [
        httpx.AsyncClient(base_url=url, timeout=120, limits=httpx.Limits(max_connections=1))
        for _ in range(concurrency)
    ]
    try:
        await asyncio.gather(*(c.get("/health") for c in clients))  # open the connections first
        start = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        elapsed = time.perf_counter() - start
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    return n / elapsed, times, failures


def start_server(
    index_dir: Path,
    batching: bool,
    max_batch: int,
    threads: int = 1,
    timeout: float = 300.0,
    backend: str = "torch",
) -> tuple[subprocess.Popen, str]:
    """``infembed serve`` in its own process (so the load generator does not share its GIL) on a free port."""
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-c",
        "from infembed.cli import main; main()",
        "serve",
        "--index",
        str(index_dir),
        "--port",
        str(port),
        "--device",
        "cpu",
        "--max-batch",
        str(max_batch),
        "--backend",
        backend,
    ]
    if not batching:
        command.append("--no-batching")
    # One torch thread by default: steady figures on a shared machine (spinning OpenMP threads collapse when
    # other processes hold the cores); --threads raises it.
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"infembed serve exited: {process.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    process.terminate()
    raise TimeoutError("infembed serve did not come up")


def bench_service(args: argparse.Namespace) -> list[dict]:
    import httpx

    from infembed.search import Index

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        Index.build("default", synthetic_corpus(args.service_docs), Path(tmp) / "index", device="cpu")
        rng = np.random.default_rng(1)
        queries = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(64)]
        for batching in (True, False):
            process, url = start_server(Path(tmp) / "index", batching, args.concurrency, args.threads)
            try:
                asyncio.run(load(url, args.concurrency, args.concurrency, queries))  # warm-up
                before = httpx.get(f"{url}/health").json()["batching"]["search"]["encoder_calls"]
                rps, times, failures = asyncio.run(load(url, args.requests, args.concurrency, queries))
                calls = httpx.get(f"{url}/health").json()["batching"]["search"]["encoder_calls"] - before
            finally:
                process.terminate()
                process.wait(timeout=30)
            rows.append(
                {
                    "batching": batching,
                    "rps": rps,
                    "p50": pct(times, 50),
                    "p95": pct(times, 95),
                    "failures": failures,
                    "calls": calls,
                }
            )
            print(f"service batching={batching}: {rps:.1f} req/s", file=sys.stderr, flush=True)
    return rows


def cranfield_queries(data_dir: Path) -> tuple[list[str], list[str]] | None:
    """The Cranfield dev queries with their og instructions (None without the data)."""
    import json

    path = data_dir / "followir-cranfield" / "queries.jsonl"
    if not path.exists():
        return None
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["text"] for r in rows], [r["instruction_og"] for r in rows]


def bench_backends(args: argparse.Namespace) -> dict[str, dict]:
    """p50/p95 latency of ``serve`` with each backend (batching on): requests one at a time (the latency of one
    request) and ``--concurrency`` at a time. Rounds alternate the order of the backends; each round starts a
    fresh server (after a warm-up) and the latencies of all rounds are pooled."""
    import httpx

    from infembed.search import Index

    found = cranfield_queries(args.data_dir)
    if found is None:
        rng = np.random.default_rng(1)
        queries = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) for _ in range(64)]
        instructions = None
    else:
        queries, instructions = found
    samples = {b: {"single": [], "concurrent": [], "rps": [], "failures": 0} for b in args.backends}
    with tempfile.TemporaryDirectory() as tmp:
        Index.build("default", synthetic_corpus(args.service_docs), Path(tmp) / "index", device="cpu")
        for round_index in range(args.backend_rounds):
            order = args.backends if round_index % 2 == 0 else args.backends[::-1]
            for backend in order:
                process, url = start_server(
                    Path(tmp) / "index", True, args.concurrency, args.threads, backend=backend
                )
                try:
                    health = httpx.get(f"{url}/health").json()
                    assert health.get("backend") == backend, health
                    sent = (queries, instructions, args.request_exclusions)
                    asyncio.run(load(url, args.concurrency, args.concurrency, *sent))  # warm-up
                    _, single, f1 = asyncio.run(load(url, args.latency_requests, 1, *sent))
                    rps, many, f2 = asyncio.run(load(url, args.requests, args.concurrency, *sent))
                finally:
                    process.terminate()
                    process.wait(timeout=30)
                row = samples[backend]
                row["single"] += single
                row["concurrent"] += many
                row["rps"].append(rps)
                row["failures"] += f1 + f2
                print(
                    f"backend {backend} round {round_index + 1}: p50 {pct(single, 50):.0f} ms one at a time, "
                    f"{rps:.1f} req/s at {args.concurrency} in flight",
                    file=sys.stderr,
                    flush=True,
                )
    return samples


# --------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000, help="Vectors in the index.")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000, help="Queries for throughput and recall.")
    parser.add_argument(
        "--latency-queries", type=int, default=300, help="Single-query calls timed for p50/p95."
    )
    parser.add_argument("--data", type=lambda s: s.split(","), default=["uniform", "clustered"])
    parser.add_argument(
        "--threads", type=int, default=1, help="faiss threads, and torch threads of the service."
    )
    parser.add_argument("--hnsw-m", type=int, default=32)
    parser.add_argument("--ef-construction", type=int, default=80)
    parser.add_argument(
        "--ef-search", type=lambda s: [int(x) for x in s.split(",")], default=[32, 64, 128, 256, 512]
    )
    parser.add_argument("--skip-vectors", action="store_true")
    parser.add_argument("--skip-service", action="store_true")
    parser.add_argument("--service-docs", type=int, default=300, help="Passages in the service's index.")
    parser.add_argument("--requests", type=int, default=256, help="Requests per service run.")
    parser.add_argument("--concurrency", type=int, default=32, help="Requests in flight at once.")
    parser.add_argument(
        "--backends",
        type=lambda s: s.split(","),
        default=["torch", "openvino"],
        help="serve's backends compared (p50/p95 latency); 'torch' alone skips the comparison.",
    )
    parser.add_argument("--backend-rounds", type=int, default=3, help="Alternating rounds per backend.")
    parser.add_argument(
        "--latency-requests", type=int, default=64, help="Requests sent one at a time per backend round."
    )
    parser.add_argument(
        "--data-dir", type=Path, default=Path(os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    )
    parser.add_argument("--skip-backends", action="store_true")
    parser.add_argument(
        "--request-exclusions",
        default=None,
        help="Backends: the requests' 'exclusions' (off, rules, auto; default: the server's default, auto).",
    )
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    console = Console(width=150)
    console.print(
        f"machine: {os.cpu_count()} CPU cores visible, load average {os.getloadavg()[0]:.1f}; "
        f"faiss threads {args.threads}"
    )
    if not args.skip_vectors:
        rows = bench_vectors(args)
        table = Table(
            title=f"{args.n:,} random unit vectors, dim {args.dim}, top 10, {args.queries} queries; "
            f"HNSW M={args.hnsw_m}, efConstruction={args.ef_construction}"
        )
        for column in (
            "data",
            "index",
            "queries/s (batch)",
            "p50 ms",
            "p95 ms",
            "recall@10",
            "speed-up (p50)",
            "speed-up (batch)",
        ):
            table.add_column(column, justify="left" if column in ("data", "index") else "right")
        for row in rows:
            table.add_row(
                row["data"],
                row["index"],
                f"{row['qps']:.0f}",
                f"{row['p50']:.2f}",
                f"{row['p95']:.2f}",
                f"{row['recall']:.3f}",
                f"{row['speedup']:.1f}x",
                f"{row['batch_speedup']:.1f}x",
            )
        console.print(table)
        for kind in args.data:
            good = [
                r for r in rows if r["data"] == kind and r["index"].startswith("HNSW") and r["recall"] >= 0.95
            ]
            best = max(good, key=lambda r: r["speedup"]) if good else None
            build = next(r["build_s"] for r in rows if r["data"] == kind and "build_s" in r)
            if best is None:
                console.print(
                    f"[{kind}] no efSearch tried reaches recall@10 >= 0.95 (HNSW build {build:.0f} s)",
                    markup=False,
                )
            else:
                verdict = "meets" if best["speedup"] >= 5 else "misses"
                console.print(
                    f"[{kind}] fastest with recall@10 >= 0.95: {best['index']}, recall {best['recall']:.3f}, "
                    f"{best['speedup']:.1f}x faster than exact per single query, {best['batch_speedup']:.1f}x in "
                    f"batch queries/s ({verdict} the 5x target; HNSW build {build:.0f} s)",
                    markup=False,
                )
    if not args.skip_service:
        rows = bench_service(args)
        table = Table(
            title=f"service: {args.requests} single-query /search requests, {args.concurrency} in flight, "
            f"{args.service_docs} passages, MiniLM on CPU ({args.threads} torch thread(s))"
        )
        for column in ("batching", "requests/s", "p50 ms", "p95 ms", "encoder calls", "failures"):
            table.add_column(column, justify="right")
        for row in rows:
            table.add_row(
                "on" if row["batching"] else "off",
                f"{row['rps']:.1f}",
                f"{row['p50']:.0f}",
                f"{row['p95']:.0f}",
                str(row["calls"]),
                str(row["failures"]),
            )
        console.print(table)
        console.print(f"batching on / off: {rows[0]['rps'] / rows[1]['rps']:.1f}x requests/s")
    if not args.skip_backends and len(args.backends) > 1:
        samples = bench_backends(args)
        table = Table(
            title=f"serve --backend: /search requests (Cranfield queries + instructions), {args.service_docs} "
            f"passages, MiniLM, {args.threads} thread(s), batching on, exclusions "
            f"{args.request_exclusions or 'default'}, {args.backend_rounds} alternating rounds"
        )
        for column in (
            "backend",
            "p50 ms (1 at a time)",
            "p95 ms (1 at a time)",
            f"p50 ms ({args.concurrency} in flight)",
            f"p95 ms ({args.concurrency} in flight)",
            "requests/s",
            "failures",
        ):
            table.add_column(column, justify="right")
        for backend, row in samples.items():
            table.add_row(
                backend,
                f"{pct(row['single'], 50):.0f}",
                f"{pct(row['single'], 95):.0f}",
                f"{pct(row['concurrent'], 50):.0f}",
                f"{pct(row['concurrent'], 95):.0f}",
                f"{float(np.median(row['rps'])):.1f}",
                str(row["failures"]),
            )
        console.print(table)
        base = args.backends[0]
        for backend in args.backends[1:]:
            console.print(
                f"{backend} / {base}: p50 one at a time "
                f"{pct(samples[base]['single'], 50) / pct(samples[backend]['single'], 50):.2f}x faster, "
                f"requests/s {float(np.median(samples[backend]['rps'])) / float(np.median(samples[base]['rps'])):.2f}x"
            )


if __name__ == "__main__":
    main()
