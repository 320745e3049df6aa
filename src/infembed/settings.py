"""Settings declared once. A settings dataclass (:class:`~infembed.train.config.TrainConfig`,
:class:`~infembed.synth.pipeline.SynthConfig`) declares each setting as a field with its type, default and help
text; from there it reaches

* the command line: :func:`settings_command` gives a typer command one ``--flag`` per field (help and default
  from the field; a flag left out means "the file's value, else the default"), so ``--help`` lists them all;
* files: :func:`read_settings_file` reads a YAML or JSON mapping and :func:`settings_from_dict` checks its keys
  and types against the fields, naming the file and the setting;
* saved configs: ``dataclasses.asdict``, read back with :func:`settings_from_dict`.

Example::

    @dataclass
    class MyConfig:
        epochs: float = setting(2.0, "Passes over the data.")

    @app.command("fit")
    @settings_command(MyConfig, flags={"epochs": ("--epochs", "-e")})
    def fit(settings: dict, config: Path = typer.Option(None, "--config")) -> None:
        cfg = MyConfig(**settings)
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from infembed.data.errors import DataError
from infembed.data.jsonl import json_error_reason

T = TypeVar("T")


def setting(default: Any = dataclasses.MISSING, help: str = "", *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with its help text (shown by ``--help`` and in the docs)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"help": help})


# --------------------------------------------------------------------------------------------- files


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """A YAML (``.yaml``/``.yml``) or JSON file holding one mapping of settings. A UTF-8 byte-order mark is
    accepted; a syntax error names the file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError("file not found" if not path.exists() else "is not a file", path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError("not valid UTF-8", path, hint="save the file as UTF-8") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            raise DataError(
                f"not valid YAML ({getattr(error, 'problem', error)})", path, mark.line + 1 if mark else None
            ) from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise DataError(json_error_reason(error), path, error.lineno) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DataError(f"expected a mapping of settings, got {type(data).__name__}", path)
    return data


def settings_from_dict(cls: type[T], data: Mapping[str, Any], source: str | Path | None = None) -> T:
    """An instance of the settings dataclass ``cls`` from a mapping (a file's, or a saved config's): unknown keys
    and values of the wrong type name the setting (and the file); a numeric string is taken for a float
    setting, since YAML 1.1 reads ``1e-4`` as text. The dataclass's own ``__post_init__`` checks the values."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise DataError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}", source)
    values = {}
    for name, value in data.items():
        values[name] = value if value is None else _checked(name, hints[name], value, source)
    if source is None:
        return cls(**values)
    try:
        return cls(**values)
    except ValueError as error:  # a bad value from a file: name the file too
        raise DataError(str(error), source) from None


def _base_type(annotation: Any) -> tuple[Any, bool]:
    """(the scalar type, is it a list) of ``X``, ``X | None``, ``list[X]``, ``list[X] | None``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _base_type(inner[0]) if len(inner) == 1 else (str, False)
    if origin is list:
        (item,) = typing.get_args(annotation) or (str,)
        return item, True
    return annotation, False


def _checked(name: str, annotation: Any, value: Any, source: str | Path | None) -> Any:
    base, is_list = _base_type(annotation)
    if is_list:
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and all(isinstance(v, base) for v in value):
            return value
        raise DataError(f"expected a list of {base.__name__}, got {value!r}", source, field=name)
    if base is float and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    ok = isinstance(value, base) and not (base in (int, float) and isinstance(value, bool))
    if not ok:
        raise DataError(
            f"expected {base.__name__}, got {type(value).__name__} {value!r}", source, field=name
        )
    return value


# --------------------------------------------------------------------------------------------- flags


def flag_parameters(
    cls: type, *, flags: Mapping[str, tuple[str, ...]] | None = None, exclude: tuple[str, ...] = ()
) -> list[inspect.Parameter]:
    """One typer option per field of ``cls`` (keyword-only, default None = "not given on the command line").

    ``flags`` renames a field's flag (``{"learning_rate": ("--learning-rate", "--lr")}``; a bool field's entry is
    the ``--on/--off`` pair); the default name is ``--field-name`` (``--field-name/--no-field-name`` for bools)."""
    import typer

    flags = flags or {}
    hints = typing.get_type_hints(cls)
    params = []
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        base, is_list = _base_type(hints[f.name])
        dashed = f.name.replace("_", "-")
        names = flags.get(f.name) or ((f"--{dashed}/--no-{dashed}",) if base is bool else (f"--{dashed}",))
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        shown = ", ".join(default) if isinstance(default, list) else default
        help_text = f.metadata.get("help", "")
        if shown not in (None, "", False) and "default" not in help_text.lower():  # said once, not twice
            help_text = f"{help_text} (default: {shown})".strip()
        annotation = list[base] | None if is_list else base | None  # type: ignore[valid-type]
        option = typer.Option(None, *names, help=help_text, show_default=False)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation))
    return params


def settings_command(
    cls: type, *, flags: Mapping[str, tuple[str, ...]] | None = None, exclude: tuple[str, ...] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate ``command(settings, **other_options)``: the command gets one flag per field of ``cls`` (see
    :func:`flag_parameters`) and receives the flags that were given as the dict ``settings``."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(func)
        hints = typing.get_type_hints(func)
        rest = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in list(own.parameters.values())[1:]]
        generated = flag_parameters(cls, flags=flags, exclude=exclude)
        names = {p.name for p in generated}

        def command(**kwargs: Any) -> Any:
            given = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            return func({k: v for k, v in given.items() if v is not None}, **kwargs)

        command.__name__ = func.__name__
        command.__doc__ = func.__doc__
        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in rest] + generated
        )
        return command

    return decorate
