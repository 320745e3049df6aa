"""``infembed synth stats``: APS and INGF per field for several data sets,
a 2-D map, Cohen's kappa and keep rates per stage (:mod:`infembed.synth.stats`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from infembed.cli.synth_common import ExpectedError, app, console, fmt, guard, out, steps


@app.command()
def stats(
    data: Annotated[
        list[Path],
        typer.Argument(
            metavar="DATA", help="InF-IR JSONL files or synth output dirs (compared side by side)."
        ),
    ],
    fields: Annotated[
        str, typer.Option(help="'groups' (instruction, query, passage) or 'fields' (each of the seven).")
    ] = "groups",
    max_samples: Annotated[
        int, typer.Option(min=2, help="Texts per group and data set (same N for all).")
    ] = 2000,
    embedding_model: Annotated[
        str | None, typer.Option(help="sentence-transformers model for APS (default: all-MiniLM-L6-v2).")
    ] = None,
    aps: Annotated[
        bool, typer.Option("--aps/--no-aps", help="Compute APS (needs the embedding model).")
    ] = True,
    map_png: Annotated[
        Path | None, typer.Option("--map", help="Write a 2-D map of the texts as PNG.")
    ] = None,
    map_method: Annotated[str, typer.Option(help="pca, or tsne (needs scikit-learn).")] = "pca",
    annotations: Annotated[
        list[Path] | None, typer.Option("--annotations", help="Annotation file(s) for Cohen's kappa.")
    ] = None,
    human: Annotated[
        list[str] | None, typer.Option("--human", help="Rater names that are human annotators.")
    ] = None,
    judge_run: Annotated[
        list[Path] | None,
        typer.Option("--judge-run", help="Add a run's judge choices as a rater (for kappa)."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write every number to this JSON file.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the samples and of the map.")] = 0,
) -> None:
    """APS and INGF per field for several data sets, a 2-D map, Cohen's kappa and keep rates per stage."""

    def go() -> None:
        from rich.text import Text

        from infembed.data.errors import DataError
        from infembed.data.jsonl import write_json
        from infembed.synth import stats as st

        report: dict[str, Any] = {}
        datasets = [st.load_dataset(p) for p in data]
        empty = [p for p, d in zip(data, datasets, strict=True) if not d.rows]
        if empty and len(empty) == len(datasets):
            where = empty[0] if len(empty) == 1 else ", ".join(map(str, empty))
            raise DataError(
                "holds no rows" if len(empty) == 1 else "none of these holds a row",
                where,
                hint="a run that kept no row, or an empty file: nothing to measure",
            )
        for path in empty:
            console.print(
                Text.assemble(
                    ("warning:", "bold yellow"),
                    f" {path} holds no rows; it is left out of the diversity table",
                )
            )
        names = [d.name for d in datasets]
        if len(set(names)) != len(names):
            for i, d in enumerate(datasets):
                d.name = f"{d.name}#{i + 1}"
        if fields == "groups":
            groups = dict(st.GROUPS)
        elif fields == "fields":
            groups = {f: (f,) for fs in st.GROUPS.values() for f in fs}
        else:
            raise ExpectedError("--fields must be 'groups' or 'fields'")
        if map_png and not aps:
            raise ExpectedError("--map needs the embeddings: drop --no-aps")
        if map_method not in ("pca", "tsne"):
            raise ExpectedError("--map-method must be pca or tsne")
        with steps() as step:
            embedder = None
            if aps:
                with step("loading the embedding model"):
                    embedder = st.Embedder(embedding_model)
            with step("embedding" if aps else "measuring", texts=aps) as progress:
                result, samples = st.diversity(
                    datasets,
                    groups,
                    max_samples=max_samples,
                    embedder=embedder,
                    seed=seed,
                    with_aps=aps,
                    progress=progress,
                )
            if map_png:
                with step("drawing the map"):
                    path = st.plot_map(samples, map_png, method=map_method, seed=seed)
        table = Table(title="diversity (APS: lower = more diverse; INGF: higher = more diverse)")
        for col in ("texts", "data set", "N", "APS", "INGF-1", "INGF-2", "INGF-3", "INGF"):
            table.add_column(
                col, overflow="fold", justify="left" if col in ("texts", "data set") else "right"
            )
        for group, by_set in result.table.items():
            for i, d in enumerate(datasets):
                entry = by_set.get(d.name)
                if entry is None:
                    continue
                table.add_row(
                    group if i == 0 else "",
                    d.name,
                    str(result.samples[group]),
                    fmt(entry.get("aps")),
                    *(fmt(entry.get(f"ingf_{n}"), 1) for n in (1, 2, 3)),
                    fmt(entry.get("ingf"), 1),
                    end_section=i == len(datasets) - 1,
                )
        out.print(table)
        report["diversity"] = {
            "table": result.table,
            "samples": result.samples,
            "embedding_model": result.embedding_model,
        }
        if map_png:
            out.print(f"map written to {path}")
            report["map"] = str(path)
        rates = {d.name: st.keep_rates(d.summary) for d in datasets if d.summary}
        if rates:
            keep = Table(title="keep rate per stage")
            keep.add_column("run")
            stages_seen = [s for r in rates.values() for s in r]
            stage_names = list(dict.fromkeys(stages_seen))
            for s in stage_names:
                keep.add_column(s)
            for name, r in rates.items():
                keep.add_row(
                    name,
                    *(
                        f"{fmt(r[s]['keep_rate'], 3)} ({r[s]['kept']}/{r[s]['in']})" if s in r else "-"
                        for s in stage_names
                    ),
                )
            out.print(keep)
            report["keep_rates"] = rates
        if annotations or judge_run:
            parts = [st.read_annotations(p) for p in annotations or []]
            for run_dir in judge_run or []:
                labels: dict[str, dict[str, str]] = {}
                for row in st.judge_labels(run_dir, rater=f"judge:{Path(run_dir).name}"):
                    labels.setdefault(row["rater"], {})[row["item"]] = row["label"]
                parts.append(labels)
            merged = st.merge_annotations(parts)
            if len(merged) < 2:
                raise ExpectedError("Cohen's kappa needs labels from at least two raters")
            matrix = st.kappa_matrix(merged)
            raters = sorted(merged)
            kt = Table(title="Cohen's kappa (items in common)")
            kt.add_column("rater")
            for r in raters:
                kt.add_column(r)
            for a in raters:
                kt.add_row(
                    a,
                    *(
                        "1" if a == b else f"{fmt(matrix[a][b]['kappa'], 3)} ({int(matrix[a][b]['n'])})"
                        for b in raters
                    ),
                )
            out.print(kt)
            report["kappa"] = matrix
            if human:
                vs = st.kappa_vs_humans(merged, human)
                out.print(
                    "mean kappa against the human annotators: "
                    + ", ".join(f"{k} {fmt(v, 3)}" for k, v in vs.items())
                )
                report["kappa_vs_humans"] = vs
        if json_out:
            write_json(json_out, report)
            out.print(f"numbers written to {json_out}")

    guard(go)
