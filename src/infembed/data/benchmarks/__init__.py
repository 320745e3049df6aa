"""Benchmarks by name or path: one dispatcher, :func:`load_benchmark`, over the family modules.

* a local dir: an instruction benchmark dir (``qrels_og.tsv``) or a BEIR dir (``qrels/<split>.tsv``), read by
  :mod:`~infembed.data.benchmarks.local`;
* a registered name (:mod:`~infembed.data.benchmarks.registry`: ``followir/core17``, ``bright/biology``,
  ``mair/<task>`` ...) or a FollowIR hub repo name, read from the hub by the family's module
  (:mod:`~infembed.data.benchmarks.followir`, :mod:`~infembed.data.benchmarks.bright`,
  :mod:`~infembed.data.benchmarks.mair`) through :func:`infembed.data.hub.fetch_hub_rows`.

Example::

    from infembed.data.benchmarks import load_benchmark
    bench = load_benchmark("followir/news21")   # downloads once into the datasets cache
    bench.main_score, bench.has_changed, bench.top_ranked is not None   # ('ndcg_at_5', True, True)
    bench = load_benchmark("path/to/followir-cranfield")   # a local dir, offline
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infembed.data.benchmarks import bright, followir, mair
from infembed.data.benchmarks.local import load_beir, load_instruction_benchmark
from infembed.data.benchmarks.registry import HUB_COPIES, resolve
from infembed.data.errors import DataError
from infembed.data.records import Benchmark


def load_benchmark(spec: str | Path, *, data_dirs: Sequence[str | Path] = (), **kwargs: Any) -> Benchmark:
    """A benchmark from a local dir (instruction benchmark or BEIR) or a registered name (``followir/core17``,
    ``bright/biology``, ``mair/<task>`` ...; see :mod:`infembed.data.benchmarks.registry`). A bare name that is
    neither is looked up in ``data_dirs`` (the CLI passes its data dir, ``$INFEMBED_DATA_DIR``):
    see :func:`locate_benchmark`."""
    where = locate_benchmark(spec, data_dirs)
    if isinstance(where, str):
        return load_named_benchmark(where, **kwargs)
    if (where / "qrels_og.tsv").exists():
        return load_instruction_benchmark(where)
    if (where / "qrels").is_dir():
        return load_beir(where, **kwargs)
    raise DataError(
        "not a benchmark dir (no qrels_og.tsv and no qrels/ folder)",
        where,
        hint="see docs/architecture.md for the layout",
    )


def locate_benchmark(spec: str | Path, data_dirs: Sequence[str | Path] = ()) -> Path | str:
    """Where ``spec`` is read from, in this order: an existing path (as given), a registered name (returned as
    the name), ``<data dir>/<spec>`` for the first of ``data_dirs`` that holds it. Found nowhere: a
    :class:`DataError` listing the known names and every place it looked."""
    path = Path(spec)
    if path.exists():
        return path
    try:
        resolve(str(spec))
        return str(spec)
    except DataError as unknown:
        reason = unknown.reason
    places = [path if path.is_absolute() else Path.cwd() / path]
    if not path.is_absolute():
        for folder in data_dirs:
            candidate = Path(folder) / path
            if candidate.exists():
                return candidate
            places.append(candidate)
    raise DataError(f"{reason} Looked for a directory at: {', '.join(map(str, places))}.")


_OPTIONS = {
    "followir": {"layout", "revision", "cache_dir"},
    "bright": {"long_context", "instruction", "reasoning", "revision", "cache_dir"},
    "mair": {"split", "revision", "docs_revision", "cache_dir"},
}


def load_named_benchmark(name: str, **options: Any) -> Benchmark:
    """A registered benchmark by name, read from the hub (cached by ``datasets`` after the first download).

    Options: ``revision`` (a commit; default the registry's), ``cache_dir``; for FollowIR ``layout`` =
    ``"original"`` (``jhu-clsp/<x>-instructions``, default) or ``"mteb"`` (the mteb 2.x copies); for BRIGHT
    ``long_context`` (``long_documents`` and ``gold_ids_long``), ``instruction`` (see :func:`~infembed.data.benchmarks.bright.bright_from_rows`)
    and ``reasoning`` (e.g. ``"gpt4"`` for the ``gpt4_reason`` queries); for MAIR ``split`` and
    ``docs_revision`` (``revision`` pins ``MAIR-Queries``, ``docs_revision`` ``MAIR-Docs``).
    A FollowIR hub repo name (``jhu-clsp/core17-instructions``, ``jhu-clsp/core17-instructions-mteb``,
    ``mteb/Core17InstructionRetrieval``) reads that repo, in its layout, at the revision mteb pins for it.
    Raises :class:`DataError` listing the known names for an unknown one.
    """
    spec, split = resolve(name)
    unknown = sorted(set(options) - _OPTIONS[spec.family])
    if unknown:
        raise DataError(
            f"unknown option(s) {', '.join(unknown)} for {spec.name}",
            spec.name,
            hint=f"known: {', '.join(sorted(_OPTIONS[spec.family]))}",
        )
    revision = options.get("revision")
    cache_dir = options.get("cache_dir")
    if spec.family == "followir":
        copy = HUB_COPIES.get(name.strip().strip("/").lower())
        if copy is None:
            return followir.from_hub(spec, options.get("layout", "original"), revision, cache_dir)
        _, repo, pinned, layout = copy
        if options.get("layout", layout) != layout:
            raise DataError(
                f"{repo} is in the {layout!r} layout",
                name,
                field="layout",
                hint="leave layout out for a repo name",
            )
        return followir.from_hub(spec, layout, revision, cache_dir, copy=(repo, pinned))
    if spec.family == "bright":
        return bright.from_hub(spec, options, revision, cache_dir)
    return mair.from_hub(
        spec, options.get("split") or split, revision, options.get("docs_revision"), cache_dir
    )


__all__ = ["load_benchmark", "load_named_benchmark", "locate_benchmark"]
