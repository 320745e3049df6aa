"""The ``infembed`` command line: one thin command per verb; the work happens in the capability packages."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from infembed.progress import console

app = typer.Typer(
    name="infembed",
    help="Instruction-following retrieval: synthesise InF-IR data, train InF-Embed models, evaluate p-MRR, search.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # click's own help layout: option names in full on the left, help wrapped beside them, flags without a
    # value type. typer's rich panels cut long names ("--learning-rate,-…") and show "<bool>" for every flag
    # at 80 columns. Sub-apps get the same mode in _register.
    rich_markup_mode=None,
)
__all__ = ["app", "console", "data_dir", "debug_mode", "fail", "friendly_errors", "versions"]


def debug_mode() -> bool:
    """``--debug`` (or ``INFEMBED_DEBUG=1``): show the traceback of every error, expected ones included."""
    return os.environ.get("INFEMBED_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


def fail(message: str, code: int = 2) -> None:
    """Print one red ``error:`` line (markup in ``message`` is shown as text, never interpreted) and exit."""
    from rich.text import Text

    console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False, soft_wrap=True)
    raise typer.Exit(code=code)


def friendly_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """The project's own errors (bad input, bad settings, missing files, files the OS will not let us write:
    ``EXPECTED_ERRORS``, ``expected_os_error``) print one clear line and exit 2; anything else is a bug and keeps its traceback. ``--debug`` shows every traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from infembed.data.errors import EXPECTED_ERRORS, error_message, expected_os_error

        try:
            return func(*args, **kwargs)
        except EXPECTED_ERRORS as error:
            if debug_mode():
                raise
            fail(error_message(error))
        except OSError as error:  # a read-only or full disk: the user's to fix; a network error is not one
            if debug_mode() or not expected_os_error(error):
                raise
            fail(error_message(error))

    return wrapper


def versions() -> dict[str, str]:
    """The versions that decide the numbers: infembed, Python and the model libraries (read from the installed
    packages' metadata, so ``--version`` does not import torch)."""
    from importlib.metadata import PackageNotFoundError, version

    from infembed import __version__

    found = {"infembed": __version__, "python": sys.version.split()[0]}
    for package in ("torch", "transformers", "sentence-transformers", "faiss-cpu", "bm25s"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def _print_version(value: bool) -> None:
    if value:
        typer.echo(" ".join(f"{name} {number}" for name, number in versions().items()))
        raise typer.Exit()


@app.callback()
def _options(
    debug: bool = typer.Option(
        False,
        "--debug",
        help="Show the full traceback of every error (also INFEMBED_DEBUG=1).",
        is_eager=True,
    ),
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the versions of infembed, Python, torch, transformers, sentence-transformers and exit.",
        is_eager=True,
        callback=_print_version,
    ),
) -> None:
    if debug:
        os.environ["INFEMBED_DEBUG"] = "1"


def data_dir(explicit: Path | None = None) -> Path:
    """Where the shared data lives: --data-dir, then $INFEMBED_DATA_DIR, then ../shared/data."""
    if explicit is not None:
        return explicit
    env = os.environ.get("INFEMBED_DATA_DIR")
    if env:
        return Path(env)
    return Path("../shared/data")


_registered = False


def _register() -> None:
    """Add every verb to ``app`` (once)."""
    global _registered
    if _registered:
        return
    _registered = True
    from infembed.cli import demo as _demo  # noqa: F401
    from infembed.cli import evaluate as _evaluate  # noqa: F401  (commands register on import)
    from infembed.cli import exclusions as _exclusions  # noqa: F401
    from infembed.cli import train as _train  # noqa: F401

    # verb groups (a typer app each, with their help) and verbs that register themselves; a module that is
    # not there (an optional part not installed) is left out
    groups = {
        "infembed.cli.synth": (
            "synth",
            "Synthesise InF-IR training rows with an LLM, and analyse data sets.",
        ),
        "infembed.cli.decomposer": (
            "decomposer",
            "Split instructions into what to find and what to leave out; train a learned decomposer (experimental).",
        ),
    }
    for module_name in (*groups, "infembed.cli.search"):
        try:
            module = __import__(module_name, fromlist=["_"])
        except ImportError as error:
            if getattr(error, "name", "") and error.name.startswith("infembed"):
                continue
            raise
        if module_name in groups:
            name, help_text = groups[module_name]
            module.app.rich_markup_mode = app.rich_markup_mode  # the same help layout as the top-level verbs
            app.add_typer(module.app, name=name, help=help_text)
        else:
            module.register(app)


def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from infembed.progress import library_bars_in_our_style

    library_bars_in_our_style()  # transformers' "Loading weights" bar drawn like ours
    _register()
    app(prog_name="infembed")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
