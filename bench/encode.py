"""Encoding throughput of each backend against ``SentenceTransformer(backend="torch").encode``, and what each
costs in quality.

Sides, all on the CPU with the same thread count (``--threads``), texts, batch size and maximum lengths:

- ``sentence-transformers (torch)``: the peer every ratio is taken against: ``SentenceTransformer.encode`` on
  the very SentenceTransformer object inside the torch model (same weights), texts joined with the same template;
- ``infembed torch``: ``InFEmbed.encode_passages`` / ``encode_queries`` (``--backend torch``);
- ``infembed openvino``: the same on ``--backend openvino`` (infembed.model.backends; the export is cached);
- ``int8 ...`` (measured, not offered as a backend; ``--no-int8`` skips them): the OpenVINO export quantised by
  NNCF (post-training, static), calibrated on ``--calibration`` Cranfield passages that are not among the measured
  ones; once with every MatMul in int8, once with the FFN output projections (the MatMul after the activation)
  left in float, the usual fix for BERT's activation outliers;
- ``sentence-transformers (openvino)`` with ``--st-openvino``: sentence-transformers' own OpenVINO backend (it
  exports on every load, so it is left out by default).

Rounds alternate the order of the sides (so load that drifts during a run falls on all of them); each side's
rate is the median of ``--rounds`` passes, and ratios are of medians. Quality against the peer: the minimum
cosine over all texts, and the top-10 overlap (each query's 10 best passages, among the measured passages, found
with the side's own query and passage embeddings).

    python bench/encode.py                       # 640 Cranfield passages, 200 queries, 3 rounds, 2 threads
    python bench/encode.py --rounds 5 --no-int8 --json bench/results/encode.json

Texts: title + text of the Cranfield dev corpus ($INFEMBED_DATA_DIR/followir-cranfield/corpus.jsonl) and its
queries with their og and changed instructions (cycled to ``--queries``); without the data, seeded synthetic
texts. Exit status 1 when the openvino backend's minimum cosine is below 0.9999.
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

PEER = "sentence-transformers (torch)"


def load_texts(args) -> tuple[list[str], list[str], list[tuple[str, str | None]], str]:
    """(measured passages, calibration passages, (query, instruction) pairs, where they come from)."""
    root = args.data_dir / "followir-cranfield"
    need = args.passages + args.calibration
    if (root / "corpus.jsonl").exists() and (root / "queries.jsonl").exists():
        from infembed.data.formats import read_corpus

        docs = [doc.full_text() for doc in read_corpus(root / "corpus.jsonl").values()]
        rows = [
            json.loads(line) for line in (root / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        pairs = [(r["text"], r[k]) for k in ("instruction_og", "instruction_changed") for r in rows]
        source = f"{root} ({len(docs)} passages, {len(pairs)} query+instruction pairs)"
    else:
        rng = random.Random(0)
        words = (
            "flow heat wing shock boundary layer pressure cylinder slab mach number transition plate".split()
        )
        docs = [" ".join(rng.choice(words) for _ in range(rng.randint(5, 300))) for _ in range(1000)]
        pairs = [(" ".join(rng.choice(words) for _ in range(6)), "Only experiments.") for _ in range(80)]
        source = "synthetic texts (Cranfield not found; set INFEMBED_DATA_DIR)"
    docs = [docs[i % len(docs)] for i in range(need)]
    pairs = [pairs[i % len(pairs)] for i in range(args.queries)]
    return docs[: args.passages], docs[args.passages :], pairs, source


def int8_model(args, fp32_xml: Path, calibration: list[str], tokenizer, ignore_ffn_output: bool, out: Path):
    """The fp32 export quantised to int8 by NNCF on ``calibration`` texts (a bench-only experiment)."""
    import logging

    import nncf
    import openvino as ov

    nncf.set_log_level(logging.ERROR)
    model = ov.Core().read_model(str(fp32_xml))
    ignored = None
    if ignore_ffn_output:  # the MatMul fed by the FFN activation (GELU/SiLU/ReLU), in every layer
        activations = {"Gelu", "Swish", "Relu", "HSwish", "Multiply"}
        names = [
            op.get_friendly_name()
            for op in model.get_ordered_ops()
            if op.get_type_name() == "MatMul" and op.input_value(0).get_node().get_type_name() in activations
        ]
        ignored = nncf.IgnoredScope(names=names)
    samples = []
    for text in calibration:
        f = tokenizer([text], truncation=True, max_length=args.max_length, return_tensors="np")
        samples.append({k: f[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in f})
    quantised = nncf.quantize(
        model,
        nncf.Dataset(samples),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(samples),
        **({"ignored_scope": ignored} if ignored else {}),
    )
    ov.save_model(quantised, str(out))
    return out


def cosines(a, b):
    import numpy as np

    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def top10_overlap(q_ref, p_ref, q, p) -> float:
    import numpy as np

    k = min(10, p_ref.shape[0])
    ref = np.argsort(-(q_ref @ p_ref.T), axis=1)[:, :k]
    got = np.argsort(-(q @ p.T), axis=1)[:, :k]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ref, got)]))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model dir or hub name (default: packaged MiniLM)")
    parser.add_argument("--passages", type=int, default=640)
    parser.add_argument("--queries", type=int, default=200, help="(query, instruction) pairs, cycled")
    parser.add_argument("--calibration", type=int, default=300, help="int8: calibration passages")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=None, help="default: the model's own lengths")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch and OpenVINO threads")
    parser.add_argument("--no-int8", action="store_true", help="skip the int8 measurements")
    parser.add_argument("--st-openvino", action="store_true", help="also sentence-transformers' own backend")
    parser.add_argument(
        "--data-dir", type=Path, default=Path(os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)

    import tempfile

    import numpy as np
    import torch

    from infembed.model import InFEmbed, backends
    from infembed.templates import join

    torch.set_num_threads(args.threads)
    torch_model = InFEmbed.load(args.model, device="cpu")
    if args.max_length is not None:
        torch_model.config.passage_max_length = torch_model.config.query_max_length = args.max_length
    args.max_length = torch_model.config.passage_max_length
    config = torch_model.config
    ov_model = InFEmbed.load(args.model, backend="openvino")
    ov_model.config.passage_max_length, ov_model.config.query_max_length = (
        config.passage_max_length,
        config.query_max_length,
    )
    st = torch_model.passage_side.st  # the SentenceTransformer (torch backend) inside the torch model
    passages, calibration, pairs, source = load_texts(args)
    joined = [join(config.template, q, i) for q, i in pairs]

    def peer(kind: str):
        texts = passages if kind == "passages" else joined
        st.max_seq_length = config.passage_max_length if kind == "passages" else config.query_max_length
        return st.encode(
            texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False,
            normalize_embeddings=config.normalize,
        )  # fmt: skip

    def ours(model):
        def encode(kind: str):
            if kind == "passages":
                return model.encode_passages(passages, batch_size=args.batch_size)
            return model.encode_queries(
                [q for q, _ in pairs], [i for _, i in pairs], batch_size=args.batch_size
            )

        return encode

    sides = {PEER: peer, "infembed torch": ours(torch_model), "infembed openvino": ours(ov_model)}
    tmp = tempfile.TemporaryDirectory()
    if not args.no_int8:
        digest = backends.backbone_digest(torch_model.encoder.backbone)
        fp32_xml = backends.export_dir(digest) / backends.XML_NAME
        for label, ignore in (("int8 (all MatMuls)", False), ("int8 (FFN outputs in float)", True)):
            start = time.perf_counter()
            xml = int8_model(
                args,
                fp32_xml,
                calibration,
                torch_model.encoder.tokenizer,
                ignore,
                Path(tmp.name) / f"{ignore}.xml",
            )
            model = InFEmbed.load(args.model, device="cpu")
            model.config.passage_max_length = config.passage_max_length
            model.config.query_max_length = config.query_max_length
            model.encoder.runtime = backends.OpenVINOBackbone(xml, args.threads)
            model.backend = "openvino-int8"
            sides[label] = ours(model)
            print(f"{label}: quantised in {time.perf_counter() - start:.0f} s", flush=True)
    if args.st_openvino:
        from sentence_transformers import SentenceTransformer

        st_ov = SentenceTransformer(
            torch_model.source, device="cpu", backend="openvino",
            model_kwargs={"ov_config": {"INFERENCE_NUM_THREADS": args.threads}},
        )  # fmt: skip

        def st_openvino(kind: str):
            st_ov.max_seq_length = (
                config.passage_max_length if kind == "passages" else config.query_max_length
            )
            texts = passages if kind == "passages" else joined
            return st_ov.encode(texts, batch_size=args.batch_size, normalize_embeddings=config.normalize)

        sides["sentence-transformers (openvino)"] = st_openvino

    print(f"model:      {torch_model.source}")
    print(
        f"threads:    {args.threads} (torch and OpenVINO); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"texts:      {len(passages)} passages, {len(pairs)} queries from {source}")
    print(
        f"batch size: {args.batch_size}, max length: passages {config.passage_max_length}, queries "
        f"{config.query_max_length} tokens, rounds: {args.rounds}"
    )
    for encode in sides.values():  # warm-up (lazy initialisation, thread pools, kernels), not measured
        encode("queries")

    seconds = {kind: {name: [] for name in sides} for kind in ("passages", "queries")}
    outputs: dict[str, dict] = {kind: {} for kind in seconds}
    for kind in ("passages", "queries"):
        for round_index in range(args.rounds):
            order = list(sides.items())
            if round_index % 2:
                order.reverse()
            for name, encode in order:
                start = time.perf_counter()
                outputs[kind][name] = np.asarray(encode(kind), dtype=np.float32)
                seconds[kind][name].append(time.perf_counter() - start)
            line = ", ".join(
                f"{name} {len(outputs[kind][name]) / seconds[kind][name][-1]:.1f}" for name in sides
            )
            print(f"{kind} round {round_index + 1} (texts/s): {line}", flush=True)

    rows = {}
    for name in sides:
        row = {}
        for kind in ("passages", "queries"):
            count = len(passages) if kind == "passages" else len(pairs)
            row[f"{kind}_per_s"] = count / statistics.median(seconds[kind][name])
            row[f"{kind}_ratio"] = statistics.median(seconds[kind][PEER]) / statistics.median(
                seconds[kind][name]
            )
            row[f"{kind}_round_ratios"] = [p / s for p, s in zip(seconds[kind][PEER], seconds[kind][name])]
            ref, got = outputs[kind][PEER], outputs[kind][name]
            row[f"{kind}_min_cosine"] = float(cosines(ref, got).min())
        row["top10_overlap"] = top10_overlap(
            outputs["queries"][PEER],
            outputs["passages"][PEER],
            outputs["queries"][name],
            outputs["passages"][name],
        )
        rows[name] = row
    tmp.cleanup()

    print()
    print(f"{'side':<34}{'passages/s':>11}{'x peer':>8}{'queries/s':>11}{'x peer':>8}"
          f"{'min cos p':>11}{'min cos q':>11}{'top-10':>8}")  # fmt: skip
    for name, r in rows.items():
        print(
            f"{name:<34}{r['passages_per_s']:>11.1f}{r['passages_ratio']:>7.2f}x{r['queries_per_s']:>11.1f}"
            f"{r['queries_ratio']:>7.2f}x{r['passages_min_cosine']:>11.5f}{r['queries_min_cosine']:>11.5f}"
            f"{r['top10_overlap']:>8.3f}"
        )
    for name, r in rows.items():
        if name != PEER:
            rounds = "; ".join(
                f"{kind} " + ", ".join(f"{x:.2f}" for x in r[f"{kind}_round_ratios"])
                for kind in ("passages", "queries")
            )
            print(f"per-round ratios, {name}: {rounds}")
    summary = {
        "model": str(torch_model.source), "threads": args.threads, "passages": len(passages),
        "queries": len(pairs), "batch_size": args.batch_size, "rounds": args.rounds, "peer": PEER,
        "load_average": os.getloadavg()[0], "seconds": seconds, "sides": rows,
    }  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    summary = main()
    openvino = summary["sides"]["infembed openvino"]
    sys.exit(0 if min(openvino["passages_min_cosine"], openvino["queries_min_cosine"]) >= 0.9999 else 1)
