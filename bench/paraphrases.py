"""Robustness of exclusion handling to phrasing: followir-cranfield-excl with its changed instructions' exclusion
sentence rewritten in twelve new phrasings (docs/instructions.md).

    .venv/bin/python bench/paraphrases.py                                  # bm25 + MiniLM, auto and rules
    .venv/bin/python bench/paraphrases.py -r bm25 -r default -r runs/demo/model --exclusions auto rules off

``bench/paraphrases/cranfield-excl-p{1..12}.jsonl`` hold, per query, only the new exclusion sentence: written by
helpers who saw neither the splitters nor their data, keeping the same excluded aspects and qualifications
("only", "limited to") so the judgments stay valid; p1 assessor verdicts without "are not relevant", p2 a user's
requests, p3 terse labels, lists and contrasts; p4-p6 (session 21, blind for the decomposer shipped then) a
non-native researcher, an engineer's understated review comment, search-assistant shorthand; p7-p9 (session 23,
blind for it too) a patent examiner's scope statements, a graduate student's hurried chat, systematic-review
screening criteria; p10-p12 (session 25, blind too) a librarian's search brief, meeting minutes, a
principal investigator's Slack messages. The benchmark dirs
are built at run time from ``$INFEMBED_DATA_DIR/followir-cranfield-excl`` (corpus, qrels, og instructions; never
copied into the repository): changed instruction = og instruction + " " + the new sentence, as in the standard phrasing.
Prints p-MRR, og MAP@1000 and changed nDCG@10 (x100) per retriever, splitter and phrasing, and each phrasing's
p-MRR minus the standard one's.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
HERE = Path(__file__).resolve().parent


def paraphrased_benchmark(source: Path, sentences: Path, out: Path) -> Path:
    """A benchmark dir like ``source`` whose changed instructions end in the sentences of ``sentences``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("corpus.jsonl", "qrels_og.tsv", "qrels_changed.tsv"):
        target = out / name
        if not target.exists():
            target.symlink_to((source / name).resolve())
    new = {
        row["_id"]: row["exclusion"]
        for row in map(json.loads, sentences.read_text(encoding="utf-8").splitlines())
    }
    lines = []
    for line in (source / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        query = json.loads(line)
        if query["_id"] in new:
            query["instruction_changed"] = f"{query['instruction_og']} {new[query['_id']]}"
        lines.append(json.dumps(query, ensure_ascii=False))
    (out / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("INFEMBED_DATA_DIR", "../shared/data"))
    )
    parser.add_argument("-r", "--retriever", action="append", help="bm25, default, or a model dir (repeat)")
    parser.add_argument("--exclusions", nargs="+", default=["auto", "rules"])
    parser.add_argument("--json", type=Path, help="write the figures as JSON")
    args = parser.parse_args()

    from infembed.data.benchmarks import load_benchmark
    from infembed.evaluate.retrievers import build_retriever
    from infembed.evaluate.runner import evaluate

    source = args.data / "followir-cranfield-excl"
    figures: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        benches = {"standard": load_benchmark(str(source))}
        for path in sorted(
            HERE.glob("paraphrases/cranfield-excl-p*.jsonl"), key=lambda p: int(p.stem.rsplit("-p", 1)[-1])
        ):
            name = path.stem.rsplit("-", 1)[-1]
            benches[name] = load_benchmark(str(paraphrased_benchmark(source, path, Path(tmp) / name)))
        print(
            f"{'retriever':24s} {'exclusions':10s} "
            + " ".join(f"{b:>18s}" for b in benches)
            + "   max |p - standard|"
        )
        for spec in args.retriever or ["bm25", "default"]:
            for mode in args.exclusions:
                retriever = build_retriever(spec, exclusions=mode, show_progress=False)
                row = {}
                for name, bench in benches.items():
                    r = evaluate(bench, retriever)
                    row[name] = {
                        "p-MRR": r["p-MRR"],
                        "og_map_at_1000": r["og"]["map_at_1000"],
                        "changed_ndcg_at_10": r["changed"]["ndcg_at_10"],
                    }
                figures.setdefault(spec, {})[mode] = row
                gap = max(abs(v["p-MRR"] - row["standard"]["p-MRR"]) for v in row.values()) * 100
                cells = " ".join(
                    f"{v['p-MRR'] * 100:6.1f} {v['og_map_at_1000'] * 100:5.1f} {v['changed_ndcg_at_10'] * 100:5.1f}"
                    for v in row.values()
                )
                print(f"{spec[-24:]:24s} {mode:10s} {cells}   {gap:5.1f}")
    print("cells: p-MRR, og MAP@1000, changed nDCG@10 (x100)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
