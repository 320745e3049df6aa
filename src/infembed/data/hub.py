"""The seam to the Hugging Face hub: :func:`fetch_hub_rows`, the only function in the project's data layer that
touches the network.

Everything that reads hub data (:mod:`infembed.data.benchmarks`, :mod:`infembed.data.inf_ir`) calls it as
``hub.fetch_hub_rows(...)``, a module attribute, so that tests replace it with fixtures in the hub schemas
(``monkeypatch.setattr(hub, "fetch_hub_rows", fake)``) and run offline. ``datasets`` is imported on first use
(the optional extra ``infembed[hub]``).
"""

from __future__ import annotations

from infembed.data.errors import DataError
from infembed.data.rows import Rows


def fetch_hub_rows(
    repo: str,
    config: str | None,
    split: str | None = None,
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Rows]:
    """``{split: Rows}`` of one hub dataset config (all its splits, or just ``split``), via
    ``datasets.load_dataset``. Any hub failure becomes one :class:`DataError` naming the table."""
    try:
        import datasets
    except ImportError:
        raise DataError(
            "reading from the Hugging Face hub needs the 'datasets' package",
            f"hf://datasets/{repo}",
            hint="pip install 'infembed[hub]'",
        ) from None
    where = f"hf://datasets/{repo}" + (f"/{config}" if config else "")
    try:
        loaded = datasets.load_dataset(repo, config, split=split, revision=revision, cache_dir=cache_dir)
    except Exception as error:  # any hub failure (network, missing config/split) becomes one clear message
        raise DataError(
            f"could not load{' split ' + repr(split) if split else ''} ({type(error).__name__}: {error})",
            where,
            hint="check the name and the network, or set HF_HUB_OFFLINE=1 after one download; "
            "a local benchmark dir works offline",
        ) from None
    splits = {split: loaded} if split is not None else dict(loaded)
    return {name: Rows(f"{where}/{name}", ds.to_list()) for name, ds in splits.items()}


def only_split(tables: dict[str, Rows], wanted: str | None, where: str) -> Rows:
    """The table of split ``wanted``, or the only one there is."""
    if wanted is not None and wanted in tables:
        return tables[wanted]
    if len(tables) == 1:
        return next(iter(tables.values()))
    raise DataError(f"expected split {wanted!r}, found {sorted(tables)}", where)
