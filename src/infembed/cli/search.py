"""``infembed index``, ``infembed search`` and ``infembed serve``: thin wrappers over :mod:`infembed.search`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer

from infembed.cli import console, friendly_errors
from infembed.cli.evaluate import Backend, ExclusionLlmModel, ExclusionLlmUrl
from infembed.data.errors import SettingsError
from infembed.instructions.split import DEFAULT_SPLITTER
from infembed.search.settings import IndexSettings, ServeSettings
from infembed.settings import check_number, settings_command


def _device(device: str | None) -> str | None:
    # Under torchrun each rank takes its own GPU.
    if device is None and "LOCAL_RANK" in os.environ:
        import torch

        if torch.cuda.is_available():
            return f"cuda:{os.environ['LOCAL_RANK']}"
    return device


@settings_command(IndexSettings)
def index_command(
    settings: dict[str, Any],
    model: str = typer.Option(
        "default",
        "--model",
        "-m",
        help="Model dir or hub name ('default' = packaged all-MiniLM-L6-v2); ignored for --kind bm25.",
    ),
    corpus: Path = typer.Option(
        ..., "--corpus", "-c", help="corpus.jsonl ({_id, title, text} per line) or a BEIR dir holding one."
    ),
    output: Path = typer.Option(
        ..., "--output", "-o", help="Index directory to write (a rerun with the same inputs resumes)."
    ),
    device: str = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)."),
    vector_store: str = typer.Option(
        "faiss",
        "--store",
        help="Where the vectors go: faiss (vectors.faiss in --output, default) | milvus (a Milvus collection at "
        "--uri, shared by several `infembed serve` replicas; docs/search.md).",
    ),
    uri: str = typer.Option(
        None,
        "--uri",
        help="--store milvus: the Milvus server (http://host:19530) or a Milvus Lite file (x/milvus.db).",
    ),
    collection: str = typer.Option(
        None, "--collection", help="--store milvus: the collection's name (default: from --output's name)."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace a complete index in --output that was built from other inputs."
    ),
) -> None:
    """Encode a corpus into a searchable index (resumable; run under torchrun to spread encoding over ranks)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from infembed.search.index import STORES, Index

    index_settings = IndexSettings.of(**settings)
    kind = index_settings.kind
    if vector_store not in STORES:
        raise SettingsError(f"--store must be one of {', '.join(STORES)}, got {vector_store!r}")
    if vector_store == "milvus" and not uri:
        raise SettingsError("--store milvus needs --uri: a Milvus server (http://host:19530) or a .db file")
    if vector_store != "milvus" and (uri or collection):
        raise SettingsError("--uri and --collection apply to --store milvus only")
    rank = int(os.environ.get("RANK", "0"))
    columns = (
        TextColumn("encoding"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    # the bar is drawn when encoding starts (the first progress call), so a refusal shows no empty bar
    bar = Progress(*columns, console=console, disable=rank != 0 or kind == "bm25", transient=False)
    task = None

    def progress(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            bar.start()
            task = bar.add_task("encoding", total=total)
        bar.update(task, completed=done, total=total)

    try:
        index = Index.build(
            None if kind == "bm25" else model,
            corpus,
            output,
            index_settings,
            device=_device(device),
            progress=progress,
            store=vector_store,
            uri=uri,
            collection=collection,
            overwrite=overwrite,
        )
    finally:
        if task is not None:
            bar.stop()
    if rank == 0:
        model_note = (
            f", model {index.meta['model']['path']} (fingerprint {index.fingerprint})"
            if index.fingerprint
            else ""
        )
        where = (
            f" (collection {index.meta['store']['collection']} at {index.meta['store']['uri']})"
            if index.store == "milvus"
            else ""
        )
        console.print(
            f"[bold green]indexed[/] {index.count} documents into {output}{where} (kind {index.kind}{model_note})"
        )


def search_command(
    index_dir: Path = typer.Option(..., "--index", "-i", help="Index directory written by `infembed index`."),
    query: list[str] = typer.Option(..., "--query", "-q", help="The query; repeat for several."),
    instruction: list[str] = typer.Option(
        None,
        "--instruction",
        "-I",
        help="What makes a passage relevant: one for all queries, or one per --query.",
    ),
    k: int = typer.Option(10, "-k", "--top-k", help="Results per query."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="Model to encode queries (default: the one the index was built with; another is refused).",
    ),
    device: str = typer.Option(None, "--device", help="cpu, cuda, ... (default: cuda if available)."),
    ef_search: int = typer.Option(
        None, "--ef-search", help="HNSW: candidates explored (higher = better recall, slower)."
    ),
    nprobe: int = typer.Option(None, "--nprobe", help="IVF: lists visited."),
    exclusions: str = typer.Option(
        DEFAULT_SPLITTER,
        "--exclusions",
        help="How instructions that exclude are handled: 'auto' (default: the learned decomposer finds what the instruction excludes; search with what it keeps, push down documents matching what it excludes), 'rules', 'off', or 'llm' (--exclusion-llm-url/--exclusion-llm-model). docs/instructions.md.",
    ),
    exclusion_llm_url: ExclusionLlmUrl = None,
    exclusion_llm_model: ExclusionLlmModel = None,
    trec: Path = typer.Option(
        None,
        "--trec",
        help="Also write the hits as a TREC run (qid Q0 docid rank score tag); queries are numbered 1.. in "
        "--query order, the tag is the index dir's name.",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --trec file."),
    backend: Backend = None,
) -> None:
    """Search an index with a query and an instruction; prints a ranked table (or JSON with --json)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from infembed.search.index import Index

    instructions = list(instruction or [])
    if len(instructions) > 1 and len(instructions) != len(query):
        raise SettingsError(
            f"{len(query)} --query but {len(instructions)} --instruction: give one for all, or one per query"
        )
    if k < 1:
        raise SettingsError(f"-k must be at least 1, got {k}")
    aligned = (
        instructions if len(instructions) > 1 else [instructions[0] if instructions else None] * len(query)
    )
    from infembed.cli.evaluate import exclusion_splitter_from_flags

    splitter = exclusion_splitter_from_flags(exclusions, exclusion_llm_url, exclusion_llm_model)
    if (
        trec is not None and not overwrite
    ):  # before the model loads: an existing run is never replaced silently
        from infembed.evaluate.outputs import refuse_existing

        refuse_existing([trec], "--trec")
    index = Index.load(index_dir, model, device=device, ef_search=ef_search, nprobe=nprobe, backend=backend)
    settings = index.exclusion_settings(exclusions)
    results = index.search(query, aligned, k=k, exclusions=settings, exclusion_splitter=splitter)
    if trec is not None:
        from infembed.data.formats import write_trec_run
        from infembed.evaluate.outputs import slug

        run = {str(n): {hit.id: hit.score for hit in hits} for n, hits in enumerate(results, start=1)}
        write_trec_run(trec, run, tag=slug(index_dir.absolute().name))
    splits = index.split(aligned, settings, splitter)
    records = [
        {
            "query": q,
            "instruction": i,
            "k": k,
            "exclusions": exclusions,
            **({"split": split.to_json()} if split.exclude or split.dropped else {}),
            "hits": [hit.to_dict(rank) for rank, hit in enumerate(hits, start=1)],
        }
        for q, i, split, hits in zip(query, aligned, splits, results)
    ]
    if as_json:
        payload = records[0] if len(records) == 1 else {"results": records}
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    out = Console()
    for record in records:
        title = f"[bold]{escape(record['query'])}[/]" + (
            f"\n[dim]{escape(record['instruction'])}[/]" if record["instruction"] else ""
        )
        split = record.get("split")
        if split and split["exclude"]:
            title += "\n[dim]searched with: {}; excluded: {}[/]".format(
                escape(split["keep"] or "(the query alone)"), escape("; ".join(split["exclude"]))
            )
        if split and split.get("dropped"):
            title += "\n[dim]not excluded (no searchable words): {}[/]".format(
                escape("; ".join(split["dropped"]))
            )
        table = Table(title=title, title_justify="left")
        table.add_column("rank", justify="right")
        table.add_column("id")
        table.add_column("score", justify="right")
        table.add_column("title")
        table.add_column("snippet", overflow="fold")
        for hit in record["hits"]:
            text = " ".join(hit["text"].split())
            snippet = text if len(text) <= 120 else text[:117] + "..."
            table.add_row(str(hit["rank"]), hit["id"], f"{hit['score']:.4f}", hit["title"], snippet)
        out.print(table)


@settings_command(ServeSettings)
def serve_command(
    settings: dict[str, Any],
    index_dir: Path = typer.Option(..., "--index", "-i", help="Index directory written by `infembed index`."),
    api_key: str = typer.Option(
        None,
        "--api-key",
        envvar="INFEMBED_API_KEY",
        help="Require this key (Authorization: Bearer KEY or X-API-Key: KEY). Prefer the INFEMBED_API_KEY variable: flags show in `ps`.",
    ),
    model: str = typer.Option(
        None, "--model", "-m", help="Model for queries (default: the index's own; another is refused)."
    ),
    device: str = typer.Option(None, "--device", help="cpu, cuda, ... (default: cuda if available)."),
    ef_search: int = typer.Option(None, "--ef-search", help="HNSW: candidates explored per search."),
    nprobe: int = typer.Option(None, "--nprobe", help="IVF: lists visited per search."),
    exclusions: str = typer.Option(
        DEFAULT_SPLITTER,
        "--exclusions",
        help="Default handling of instructions that exclude: 'auto' (default: the learned decomposer), 'rules', 'off' or 'llm' (--exclusion-llm-url/--exclusion-llm-model); a request may ask for 'off', 'auto' or 'rules'.",
    ),
    exclusion_llm_url: ExclusionLlmUrl = None,
    exclusion_llm_model: ExclusionLlmModel = None,
) -> None:
    """Serve an index over HTTP: POST /search, POST /embed, GET /health, docs at /docs."""
    from infembed.cli.evaluate import exclusion_splitter_from_flags
    from infembed.search.server import check_port, serve

    # every setting is checked, and the port tried, before the index and its model are loaded
    serve_settings = ServeSettings(**settings)
    check_number("ef_search", ef_search, minimum=1, integer=True, optional=True)
    check_number("nprobe", nprobe, minimum=1, integer=True, optional=True)
    splitter = exclusion_splitter_from_flags(exclusions, exclusion_llm_url, exclusion_llm_model)
    if api_key is None and "INFEMBED_API_KEY" in os.environ:  # click reads an empty variable as unset
        api_key = os.environ["INFEMBED_API_KEY"]
    if api_key is not None and not api_key.strip():
        # an empty --api-key or INFEMBED_API_KEY= must not silently turn authentication off
        raise SettingsError(
            "the API key is empty (--api-key or INFEMBED_API_KEY): give a key, or leave both unset"
        )
    check_port(serve_settings.host, serve_settings.port)
    host, port = serve_settings.host, serve_settings.port
    shown = f"[{host}]" if ":" in host else host
    console.print(f"loading {index_dir} ...; then serving on http://{shown}:{port}  (API docs at /docs)")
    serve(
        str(index_dir),
        api_key=api_key,
        settings=serve_settings,
        model=model,
        device=device,
        ef_search=ef_search,
        nprobe=nprobe,
        exclusions=exclusions,
        exclusion_splitter=splitter,
    )


def register(app: typer.Typer) -> None:
    """Add ``index``, ``search`` and ``serve`` to the ``infembed`` app."""
    app.command("index")(friendly_errors(index_command))
    app.command("search")(friendly_errors(search_command))
    app.command("serve")(friendly_errors(serve_command))
