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
import math
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from infembed.data.errors import DataError, SettingsError
from infembed.data.jsonl import json_error_reason

T = TypeVar("T")


def setting(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    default_factory: Any = dataclasses.MISSING,
    envvar: str | None = None,
) -> Any:
    """A dataclass field with its help text (shown by ``--help`` and in the docs); ``envvar``: its flag also
    reads this environment variable."""
    metadata = {"help": help, **({"envvar": envvar} if envvar else {})}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def check_number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    below: float | None = None,
    optional: bool = False,
    integer: bool = False,
    why: str = "",
) -> None:
    """A numeric setting within its range (NaN and infinity are out of every range), else
    :class:`~infembed.data.errors.SettingsError` naming the setting, the range and the value."""
    if value is None and optional:
        return
    bounds = []
    if minimum is not None:
        bounds.append(f">= {minimum:g}")
    if above is not None:
        bounds.append(f"> {above:g}")
    if maximum is not None:
        bounds.append(f"<= {maximum:g}")
    if below is not None:
        bounds.append(f"< {below:g}")
    kinds = (int,) if integer else (int, float)
    ok = isinstance(value, kinds) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (minimum is None or value >= minimum) and (maximum is None or value <= maximum)
    ok = ok and (above is None or value > above) and (below is None or value < below)
    if not ok:
        reason = f" ({why})" if why else ""
        kind = "a whole number" if integer else "a number"
        raise SettingsError(f"{name} must be {kind} {' and '.join(bounds)}{reason}; got {value!r}")


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


def settings_with_file(
    classes: tuple[type, ...], given: tuple[Mapping[str, Any], ...], path: str | Path | None = None
) -> list[Any]:
    """One instance per settings dataclass of a command: its fields from the file ``path`` (one mapping whose
    keys belong to any of ``classes``; checked on their own, so a bad value names the file), with the flags
    that were given (``given``, one dict per class) on top."""
    data = read_settings_file(path) if path else {}
    names = [{f.name for f in dataclasses.fields(cls)} for cls in classes]
    unknown = sorted(set(data) - set().union(*names))
    if unknown:
        known = ", ".join(sorted(set().union(*names)))
        raise DataError(f"unknown setting(s) {', '.join(unknown)}; known: {known}", path)
    instances = []
    for cls, own, flags in zip(classes, names, given, strict=True):
        from_file = {k: v for k, v in data.items() if k in own}
        if from_file:
            settings_from_dict(cls, from_file, path)
        instances.append(settings_from_dict(cls, {**from_file, **flags}))
    return instances


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
        raise DataError(f"expected {base.__name__}, got {type(value).__name__} {value!r}", source, field=name)
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
        if (
            shown is not None and shown != "" and shown is not False and "default" not in help_text.lower()
        ):  # said once, not twice
            help_text = f"{help_text} (default: {shown})".strip()
        annotation = list[base] | None if is_list else base | None  # type: ignore[valid-type]
        envvar = f.metadata.get("envvar")
        # a list setting is one value per flag, the flag repeated: show the value's type, not "<list[str]>"
        metavar = f"<{base.__name__}>" if is_list else None
        if is_list and "repeat" not in help_text.lower():
            help_text = f"{help_text} (repeatable)".strip()
        option = typer.Option(
            None, *names, help=help_text, show_default=False, envvar=envvar, metavar=metavar
        )
        params.append(
            inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
        )
    return params


def settings_command(
    *classes: type, flags: Mapping[str, tuple[str, ...]] | None = None, exclude: tuple[str, ...] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate ``command(settings, **other_options)``: the command gets one flag per field of the settings
    dataclass (see :func:`flag_parameters`) and receives the flags that were given as the dict ``settings``.
    With several classes (``settings_command(SynthConfig, ClientConfig)``), whose field names must differ, the
    command takes one such dict per class, in their order: ``command(synth, client, **other_options)``."""
    if not classes:
        raise TypeError("settings_command needs at least one settings dataclass")

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)  # keep Annotated[..., typer.Option]
        rest = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in list(own.parameters.values())[len(classes) :]
        ]
        generated = [flag_parameters(cls, flags=flags, exclude=exclude) for cls in classes]
        per_class = [{p.name for p in params} for params in generated]
        if sum(map(len, per_class)) != len(set().union(*per_class)):
            raise TypeError(f"settings classes {classes} share a field name")

        def command(**kwargs: Any) -> Any:
            given = [{k: kwargs.pop(k) for k in names if kwargs.get(k) is not None} for names in per_class]
            for names in per_class:
                for name in names:
                    kwargs.pop(name, None)
            return func(*given, **kwargs)

        command.__name__ = func.__name__
        command.__doc__ = func.__doc__
        command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in rest]
            + [p for ps in generated for p in ps]
        )
        return command

    return decorate
