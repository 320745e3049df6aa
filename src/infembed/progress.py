"""Progress in one style for every step that takes more than a few seconds: rich bars on stderr, the style of
``infembed index`` (description, bar, done/total, elapsed, remaining).

Three shapes, all on the one :data:`console` (so a bar started inside another's step nests in the same live
display instead of fighting over the terminal):

* ``with progress_bar("encoding", total=n, unit="texts") as update: ... update(done)`` for work that counts;
* ``bar("training", total, unit="steps")`` for a loop written against tqdm (``update(n)``,
  ``set_postfix(loss=...)``, ``close()``, iteration);
* ``with step("loading model"): ...`` for work that cannot count (a spinner and the elapsed time).

A ``transient`` bar disappears when done (a sub-step); any other leaves one line with its final count and time.
When stderr is not a terminal (a log file, a pipe) nothing is redrawn: a counting bar writes a line with its count
every :data:`LOG_EVERY_S` seconds, and each finished, non-transient bar or step writes that one line. Only rank 0
of a torchrun job shows progress; ``INFEMBED_PROGRESS=0`` turns it all off.
Library code shows a bar only when asked (a ``progress=`` argument); commands ask. transformers' own tqdm bars
("Loading weights") are drawn as ours by :func:`library_bars_in_our_style` (the CLI installs it); call
sentence-transformers' ``encode`` with ``show_progress_bar=False`` and show a bar from here instead.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["console", "enabled", "progress_bar", "bar", "step", "library_bars_in_our_style", "Bar"]

#: stderr, shared by the CLI's messages and every bar (``infembed.cli.console`` is this object)
console = Console(stderr=True)
#: when stderr is a log, not a terminal: a line of a counting bar's progress at most this often
LOG_EVERY_S = 30.0


def enabled() -> bool:
    """Progress is shown on rank 0 only (torchrun sets RANK), unless ``INFEMBED_PROGRESS=0``."""
    if os.environ.get("INFEMBED_PROGRESS", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    return os.environ.get("RANK", "0") == "0"


def _redrawn() -> bool:
    """A terminal that can redraw a bar in place (not a file, a pipe or TERM=dumb)."""
    return console.is_terminal and not console.is_dumb_terminal


def _columns(counted: bool) -> tuple[Any, ...]:
    if not counted:
        return (SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn())
    return (
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TextColumn("{task.fields[count]}", markup=False),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[postfix]}", markup=False),
    )


def _count(done: float, total: float | None, unit: str) -> str:
    shown = f"{int(done)}/{int(total)}" if total is not None else f"{int(done)}"
    return f"{shown} {unit}".rstrip()


def _done_line(*parts: str, started: float) -> None:
    """The one line a finished bar or step leaves in a log: what, how much, how long (H:MM:SS, as the bars)."""
    elapsed = str(datetime.timedelta(seconds=int(time.monotonic() - started)))
    console.print(" ".join(p for p in (*parts, elapsed) if p), markup=False, highlight=False)


class Bar:
    """A counting bar with tqdm's calls, for loops written against tqdm: ``update(n)``, ``set_postfix(**kw)``,
    ``set_description``, ``close()``, iterating over ``iterable``. Built by :func:`bar`."""

    def __init__(
        self,
        description: str,
        total: int | None,
        *,
        initial: int = 0,
        unit: str = "",
        transient: bool = False,
        iterable: Any = None,
    ) -> None:
        self.description, self.total, self.n, self.unit = description, total, initial, unit
        self.transient, self.iterable = transient, iterable
        self._shown = enabled()
        self._started = self._logged = time.monotonic()
        self._postfix = ""
        self._closed = False
        self._progress: Progress | None = None
        if self._shown and _redrawn():
            self._progress = Progress(*_columns(True), console=console, transient=transient)
            self._progress.start()
            self._task = self._progress.add_task(
                description, total=total, completed=initial, count=_count(initial, total, unit), postfix=""
            )

    def _draw(self, **fields: Any) -> None:
        if self._progress is not None:
            self._progress.update(self._task, **fields)
        elif self._shown and not self.transient and time.monotonic() - self._logged >= LOG_EVERY_S:
            self._logged = time.monotonic()  # a log: a line now and then, so a long step is not silent
            _done_line(
                self.description, _count(self.n, self.total, self.unit), self._postfix, started=self._started
            )

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        self._draw(completed=self.n, count=_count(self.n, self.total, self.unit))

    def set(self, done: int, total: int | None = None) -> None:
        """Set the count (and the total, when it becomes known)."""
        if total is not None:
            self.total = total
        self.n = done
        self._draw(completed=done, total=self.total, count=_count(done, self.total, self.unit))

    def set_postfix(self, **fields: Any) -> None:
        self._postfix = " ".join(f"{key} {value}" for key, value in fields.items())
        self._draw(postfix=self._postfix)

    def set_description(self, description: str, refresh: bool = True) -> None:
        self.description = description
        self._draw(description=description)

    def refresh(self) -> None:
        if self._progress is not None:
            self._progress.refresh()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._progress is not None:
            self._progress.stop()
        elif self._shown and not self.transient:
            _done_line(
                self.description, _count(self.n, self.total, self.unit), self._postfix, started=self._started
            )

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bar(
    description: str, total: int | None, *, initial: int = 0, unit: str = "", transient: bool = False
) -> Bar:
    """A :class:`Bar`; ``close()`` it, or use it as a context manager."""
    return Bar(description, total, initial=initial, unit=unit, transient=transient)


@contextlib.contextmanager
def progress_bar(
    description: str, total: int | None = None, *, unit: str = "", transient: bool = False
) -> Iterator[Callable[..., None]]:
    """``with progress_bar("encoding", unit="texts") as update: update(done, total)``: a counting bar whose total
    may be given up front or with the updates."""
    with bar(description, total, unit=unit, transient=transient) as shown:

        def update(done: int, total: int | None = None) -> None:
            shown.set(done, total)

        yield update


@contextlib.contextmanager
def step(description: str, *, transient: bool = False) -> Iterator[None]:
    """A spinner and the elapsed time while the block runs, for work that cannot count (loading a model,
    fitting a grid); bars started inside it show beneath it."""
    started = time.monotonic()
    if not enabled():
        yield
    elif not _redrawn():
        yield
        if not transient:
            _done_line(description, started=started)
    else:
        with Progress(*_columns(False), console=console, transient=transient) as shown:
            task = shown.add_task(description, total=None)
            yield
            shown.update(task, total=1, completed=1)


def library_bars_in_our_style() -> None:
    """Draw transformers' own tqdm bars ("Loading weights" ...) as ours (transient: gone when done), through
    transformers' tqdm hook; huggingface_hub's download bars are left as they are. The CLI calls this once."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - a dependency
        return
    if not hasattr(hf_logging, "set_tqdm_hook"):  # an older transformers: silence them instead
        hf_logging.disable_progress_bar()
        return

    def hook(factory: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kwargs.get("disable"):
            return factory(*args, **kwargs)
        iterable = args[0] if args else kwargs.get("iterable")
        total = kwargs.get("total")
        if total is None and hasattr(iterable, "__len__"):
            total = len(iterable)
        description, unit = str(kwargs.get("desc") or ""), str(kwargs.get("unit") or "")
        return Bar(description, total, unit=unit, transient=True, iterable=iterable)

    hf_logging.set_tqdm_hook(hook)
