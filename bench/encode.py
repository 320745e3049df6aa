"""Dense encoding throughput: ``InFEmbed.encode_passages`` against ``SentenceTransformer.encode``.

Both sides use the *same* SentenceTransformer object (the one inside our model: same weights, dtype, device),
the same texts, batch size and maximum length, measured in the same process. Rounds alternate which side goes
first (so neither always gets a warm cache or a cooler CPU), and the median of the rounds is reported. The two
sides must also give the same embeddings (max abs diff printed).

    python bench/encode.py                      # the packaged all-MiniLM-L6-v2 on the Cranfield corpus
    python bench/encode.py --n 2000 --rounds 5 --model path/to/model --device cuda

Texts: title + text of the Cranfield dev corpus ($INFEMBED_DATA_DIR/followir-cranfield/corpus.jsonl), cycled
to ``--n``; without the data, seeded synthetic texts of varied length.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_texts(n: int, data_dir: Path) -> tuple[list[str], str]:
    corpus = data_dir / "followir-cranfield" / "corpus.jsonl"
    if corpus.exists():
        from infembed.data.formats import read_corpus

        docs = [doc.full_text(" ") for doc in read_corpus(corpus).values()]
        source = f"{corpus} ({len(docs)} documents, cycled)"
    else:
        rng = random.Random(0)
        words = (
            "flow heat wing shock boundary layer pressure cylinder slab mach number transition plate".split()
        )
        docs = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 300))) for _ in range(1000)]
        source = "synthetic texts (Cranfield corpus not found; set INFEMBED_DATA_DIR)"
    return [docs[i % len(docs)] for i in range(n)], source


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model dir or hub name (default: packaged MiniLM)")
    parser.add_argument("--n", type=int, default=320, help="number of texts (a few minutes on 2 CPU cores)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--max-length", type=int, default=None, help="default: the model's passage max length"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ... (the same for both sides)")
    parser.add_argument(
        "--data-dir", type=Path, default=Path(os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from infembed.model import InFEmbed

    model = InFEmbed.load(args.model, device=args.device)
    st = model.passage_side.st  # the very SentenceTransformer our encoder runs on
    if args.max_length is not None:
        model.config.passage_max_length = args.max_length
    st.max_seq_length = model.config.passage_max_length  # the same truncation on both sides
    texts, source = load_texts(args.n, args.data_dir)
    print(f"model:      {model.source}")
    print(
        f"device:     {model.device} ({torch.get_num_threads()} torch threads), dtype {next(st.parameters()).dtype}"
    )
    print(f"texts:      {len(texts)} from {source}")
    print(
        f"batch size: {args.batch_size}, max length: {model.config.passage_max_length} tokens, rounds: {args.rounds}"
    )

    def ours() -> np.ndarray:
        return model.encode_passages(texts, batch_size=args.batch_size)

    def peer() -> np.ndarray:
        return st.encode(
            texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False,
            normalize_embeddings=model.config.normalize,
        )  # fmt: skip

    def timed(fn) -> tuple[float, np.ndarray]:
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = fn()
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start, out

    # warm-up (lazy initialisation, allocator, thread pools) on a few texts, not measured
    model.encode_passages(texts[:64], batch_size=args.batch_size)
    st.encode(texts[:64], batch_size=args.batch_size, show_progress_bar=False)

    seconds: dict[str, list[float]] = {"ours": [], "sentence-transformers": []}
    outputs: dict[str, np.ndarray] = {}
    for round_index in range(args.rounds):
        order = [("ours", ours), ("sentence-transformers", peer)]
        if round_index % 2:
            order.reverse()
        for name, fn in order:
            elapsed, outputs[name] = timed(fn)
            seconds[name].append(elapsed)
            print(
                f"round {round_index + 1}: {name:<22} {len(texts) / elapsed:8.1f} texts/s ({elapsed:.1f} s)",
                flush=True,
            )

    rate = {name: len(texts) / statistics.median(values) for name, values in seconds.items()}
    # each round's two passes run back to back, so their ratio is robust to load that drifts between rounds
    paired = [peer_s / ours_s for ours_s, peer_s in zip(seconds["ours"], seconds["sentence-transformers"])]
    max_diff = float(np.abs(outputs["ours"] - outputs["sentence-transformers"]).max())
    ratio = rate["ours"] / rate["sentence-transformers"]
    print()
    print(f"ours (InFEmbed.encode_passages):   {rate['ours']:.1f} texts/s (median of {args.rounds})")
    print(
        f"sentence-transformers encode:      {rate['sentence-transformers']:.1f} texts/s (median of {args.rounds})"
    )
    print(f"ratio ours / sentence-transformers: {ratio:.2f}  (target >= 1.0)")
    print(f"per-round ratios:                   {', '.join(f'{r:.2f}' for r in paired)}")
    print(f"max abs diff of the embeddings:     {max_diff:.2e}")
    summary = {
        "model": str(model.source), "device": str(model.device), "threads": torch.get_num_threads(),
        "n": len(texts), "batch_size": args.batch_size, "max_length": model.config.passage_max_length,
        "rounds": args.rounds, "seconds": seconds, "texts_per_second": rate, "ratio": ratio, "per_round_ratios": paired, "max_abs_diff": max_diff,
    }  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    summary = main()
    sys.exit(0 if summary["max_abs_diff"] < 1e-4 else 1)
