"""What ``infembed eval`` and ``infembed report`` write, named and checked before anything is evaluated.

Every run gets its own descriptive name, made only from what decides its numbers: the benchmark, the
retriever or model, and each setting that is not the default (exclusions, an explicit template, the top-k),
e.g. ``followir-cranfield-excl__bm25__excl-rules``. The results file is ``<name>.json`` in an output dir
and the TREC runs ``<name>.og.trec`` / ``<name>.changed.trec``; a run scored from run files made elsewhere is
``<benchmark>__run-<tag>``. Nothing that exists is replaced unless asked (``--overwrite``), and that is checked
before the first model loads, so a long evaluation is never run only to be refused or to replace another one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from infembed.data.errors import DataError, SettingsError
from infembed.templates import TEMPLATES, resolve_template

#: ``infembed eval --top-k``'s default (a name says the top-k only when it is another)
DEFAULT_TOP_K = 1000


def slug(text: str) -> str:
    """``text`` as one word that is safe in a file name and a TREC tag."""
    return re.sub(r"[^\w.+-]+", "_", text).strip("_.") or "run"


def benchmark_slug(where: Path | str) -> str:
    """The benchmark part of a run name: a dir's name, or a registered name with '/' as '_'."""
    if isinstance(where, Path):
        return slug(where.absolute().name if where.name in ("", ".", "..") else where.name)
    return slug(where.strip().strip("/"))


def template_tag(template: str | None) -> str | None:
    """``tpl-<name>`` for an explicit ``--template`` (a named one by its name, any other by a short hash of
    its text), None when the retriever's own template is used."""
    if template is None:
        return None
    resolved = resolve_template(template)
    for name, value in TEMPLATES.items():
        if value == resolved:
            return f"tpl-{name}"
    return "tpl-" + hashlib.sha1(resolved.encode()).hexdigest()[:8]


def run_tags(
    specs: Sequence[str],
    *,
    template: str | None = None,
    top_k: int = DEFAULT_TOP_K,
    exclusions: str = "off",
    exclusion_llm_model: str | None = None,
) -> list[str]:
    """One tag per retriever spec (the run name without its benchmark, also the TREC runs' tag): the model's
    label (``bm25``, ``all-MiniLM-L6-v2``, ``runs_a_final`` ...) and every setting that is not the default."""
    from infembed.evaluate.report import canonical_model_name, model_labels

    labels = model_labels(
        [{"model": canonical_model_name(s), "template": None} for s in specs], with_exclusions=False
    )
    suffix = []
    if exclusions != "off":
        suffix.append(
            f"excl-{exclusions}"
            + (f"-{slug(exclusion_llm_model)}" if exclusions == "llm" and exclusion_llm_model else "")
        )
    tag = template_tag(template)
    if tag:
        suffix.append(tag)
    if top_k != DEFAULT_TOP_K:
        suffix.append(f"top{top_k}")
    return [
        "__".join(["bm25" if s.lower() == "bm25" else slug(label), *suffix])
        for s, label in zip(specs, labels)
    ]


def run_names(benchmarks: Sequence[Path | str], tags: Sequence[str]) -> list[str]:
    """``<benchmark>__<tag>`` for every (benchmark, tag), benchmark by benchmark. The same name twice (the same
    run asked for twice, or two benchmark dirs of one name) is refused: one would replace the other."""
    names = [f"{benchmark_slug(b)}__{tag}" for b in benchmarks for tag in tags]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SettingsError(
                f"two runs of this evaluation would both be named {name!r} (the same benchmark and retriever twice, "
                "or two benchmark dirs of the same name): evaluate them separately, into different --output dirs"
            )
        seen.add(name)
    return names


def results_paths(output: Path | None, names: Sequence[str]) -> list[Path | None]:
    """Where each run's results go: ``-o x.json`` holds the one run, a directory ``<name>.json`` per run."""
    if output is None:
        return [None] * len(names)
    check_output(output, len(names))
    if output.suffix == ".json" and not output.is_dir():
        return [output]
    return [output / f"{name}.json" for name in names]


def trec_paths(trec_dir: Path | None, names: Sequence[str]) -> list[tuple[Path, Path] | None]:
    """Each run's TREC files in ``--trec-runs DIR``: ``(<name>.og.trec, <name>.changed.trec)``."""
    if trec_dir is None:
        return [None] * len(names)
    for path in (trec_dir, *trec_dir.parents):
        if path.exists() and not path.is_dir():
            raise DataError("is a file, so no run can be written under it", path, field="--trec-runs")
    return [(trec_dir / f"{name}.og.trec", trec_dir / f"{name}.changed.trec") for name in names]


def check_output(output: Path, runs: int) -> None:
    """``-o x.json`` holds one run; several runs go to a directory. Refuse what cannot be written."""
    from infembed.data.jsonl import check_writable

    for parent in output.parents:
        if parent.exists() and not parent.is_dir():
            raise DataError("is a file, so nothing can be written under it", parent, field="--output")
    if output.suffix == ".json" and not output.is_dir():
        if runs > 1:
            raise DataError(
                f"one .json file holds one run, but this evaluation makes {runs}",
                output,
                field="--output",
                hint="give a directory: one file per run is written there",
            )
    elif output.exists() and not output.is_dir():
        raise DataError(
            "exists and is not a directory", output, field="--output", hint="give a directory or a .json file"
        )
    check_writable(output)


def refuse_existing(paths: Iterable[Path | None], flag: str) -> None:
    """Refuse (one line naming the first, counting the rest) outputs that already exist: they are replaced only
    with ``--overwrite``."""
    existing = [p for p in paths if p is not None and p.exists()]
    if existing:
        more = f" (and {len(existing) - 1} more of this command's outputs)" if len(existing) > 1 else ""
        raise DataError(
            f"exists{more}; nothing was replaced",
            existing[0],
            field=flag,
            hint="pass --overwrite to replace it, or choose another path",
        )
