"""The ``infembed`` command line: one thin command per verb; the work happens in the capability packages."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(
    name="infembed",
    help="Instruction-following retrieval: synthesise InF-IR data, train InF-Embed models, evaluate p-MRR, search.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console(stderr=True)


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Expected failures (bad input, missing files, bad settings) print one clear line and exit 2, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from infembed.data.errors import DataError

        try:
            return func(*args, **kwargs)
        except (DataError, FileNotFoundError, ValueError, KeyError) as error:
            message = str(error)
            if isinstance(error, KeyError):
                message = f"unknown key {message}"
            from rich.markup import escape

            console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=2) from None

    return wrapper


def data_dir(explicit: Path | None = None) -> Path:
    """Where the shared data lives: --data-dir, then $INFEMBED_DATA_DIR, then ../shared/data."""
    if explicit is not None:
        return explicit
    env = os.environ.get("INFEMBED_DATA_DIR")
    if env:
        return Path(env)
    return Path("../shared/data")


def _register() -> None:
    from infembed.cli import demo as _demo  # noqa: F401
    from infembed.cli import evaluate as _evaluate  # noqa: F401  (commands register on import)
    from infembed.cli import exclusions as _exclusions  # noqa: F401
    from infembed.cli import train as _train  # noqa: F401

    for module_name, kind in (("infembed.cli.synth", "typer"), ("infembed.cli.search", "register")):
        try:
            module = __import__(module_name, fromlist=["_"])
        except ImportError as error:
            if getattr(error, "name", "") and error.name.startswith("infembed"):
                continue
            raise
        if kind == "typer":
            app.add_typer(module.app, name="synth", help="Synthesise InF-IR training rows with an LLM, and analyse data sets.")
        else:
            module.register(app)


def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _register()
    app(prog_name="infembed")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
