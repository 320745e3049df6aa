"""Matplotlib without a display, and PNGs written atomically (a crash never leaves half a picture)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed: CI, servers, SSH sessions)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Write ``fig`` as PNG to ``path`` (parents created; temp file then rename) and close it."""
    from infembed.data.jsonl import atomic_path

    path = Path(path)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi, format="png")
    finally:
        pyplot().close(fig)
    return path
