"""A training run's output dir: what may be written there, and when a rerun continues what it holds.

``--output`` must be new, empty, or hold an earlier ``infembed train`` run (a dir with anything else is refused,
as ``infembed index`` refuses one). A rerun continues the run in the dir only if it is the same run: the
settings that decide the trained weights (every :class:`TrainConfig` field but the bookkeeping ones in
:data:`BOOKKEEPING`) and the content of the training rows (a digest) must match what the checkpoint recorded.
Otherwise it is refused with the differences named; ``overwrite=True`` (``--overwrite``) starts over. A
finished run with the same settings and rows is not trained again.

Everything here is checked before the model is loaded, so a mistake costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from infembed.data.errors import DataError
from infembed.data.jsonl import write_json, write_jsonl

#: settings that change where and how often a run writes or reports, never the weights it ends with
BOOKKEEPING = frozenset({"output", "save_steps", "keep_checkpoints", "eval_benchmark", "eval_steps", "log_steps", "device"})
#: files that mark a dir as written by ``infembed train`` (or ``InFEmbed.save``)
MARKERS = ("train_config.json", "checkpoints", "infembed.json")
CHECKPOINTS = "checkpoints"
RECORD = "run.json"  # in each checkpoint dir: the run's settings and data digest, readable without torch
SUMMARY = "train_summary.json"
SETTINGS = "train_config.json"
METRICS = "metrics.jsonl"

_HINT = "give --overwrite to start over, or another --output"


@dataclass
class Plan:
    """What a new run does with its output dir."""

    checkpoint: Path | None = None  # continue from this checkpoint
    finished: bool = False  # the dir holds this very run, finished: nothing to train
    clear: bool = False  # remove what an earlier run left before writing


def rows_digest(rows: Sequence[Any]) -> str:
    """A digest of the training rows' content (order included): the same file names with other rows differ."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(astuple(row), sort_keys=True, default=str).encode())
        digest.update(b"\n")
    return f"{len(rows)}:{digest.hexdigest()[:16]}"


def check_destination(root: Path) -> None:
    """Refuse an output that is a file, lies under a file, or is a dir holding anything but a training run."""
    for parent in [root, *root.parents]:
        if parent.exists():
            if not parent.is_dir():
                what = "exists and is not a directory" if parent == root else f"lies under {parent}, which is a file"
                raise DataError(what, root, field="output", hint="give a directory path")
            break
    if root.is_dir():
        entries = {p.name for p in root.iterdir() if not p.name.startswith(".")}
        if entries and not entries & set(MARKERS):
            raise DataError(
                f"exists and holds other files ({', '.join(sorted(entries)[:3])}{', ...' if len(entries) > 3 else ''}), "
                "not a training run; refusing to write into it",
                root,
                field="output",
                hint="give a new or empty directory",
            )


def latest_checkpoint(root: Path) -> Path | None:
    found = sorted(
        p for p in (root / CHECKPOINTS).glob("step-*") if not p.name.endswith(".tmp") and (p / "state.pt").exists()
    )
    return found[-1] if found else None


def write_record(checkpoint: Path, settings: dict[str, Any], data_digest: str) -> None:
    write_json(checkpoint / RECORD, {"settings": settings, "data_digest": data_digest})


def _read_record(checkpoint: Path) -> tuple[dict[str, Any], str | None]:
    path = checkpoint / RECORD
    if path.exists():
        record = json.loads(path.read_text())
        return record["settings"], record.get("data_digest")
    import torch  # a checkpoint written before run.json existed: its settings are in the state

    state = torch.load(checkpoint / "state.pt", map_location="cpu", weights_only=False)
    return state.get("config", {}), None


def differences(recorded: dict[str, Any], current: dict[str, Any], recorded_digest: str | None,
                current_digest: str) -> list[str]:
    """'name: recorded -> current' for each result-deciding setting that differs, and the rows if they do."""
    out = [
        f"{name}: {recorded.get(name)!r} there, {current[name]!r} now"
        for name in current
        if name not in BOOKKEEPING and recorded.get(name) != current[name]
    ]
    if recorded_digest != current_digest:
        out.append("the training rows' content" if recorded_digest else "the training rows (not recorded there)")
    return out


def plan(root: Path, settings: dict[str, Any], data_digest: str, *, resume: bool = True,
         overwrite: bool = False) -> Plan:
    """Decide what a run with ``settings`` on rows with ``data_digest`` does with ``root``, or refuse (DataError)."""
    check_destination(root)
    if not root.is_dir() or not any(not p.name.startswith(".") for p in root.iterdir()):
        return Plan()
    if overwrite:
        return Plan(clear=True)
    summary, recorded_settings = root / SUMMARY, root / SETTINGS
    if summary.exists() and recorded_settings.exists():
        recorded = json.loads(recorded_settings.read_text())
        diffs = differences(recorded, settings, json.loads(summary.read_text()).get("data_digest"), data_digest)
        if diffs:
            raise DataError(f"holds a finished run with other settings ({'; '.join(diffs)})", root, field="output",
                            hint=_HINT)
        if not resume:
            raise DataError("holds this run, finished", root, field="output", hint="give --overwrite to train it again")
        return Plan(finished=True)
    checkpoint = latest_checkpoint(root)
    if checkpoint is not None:
        recorded, recorded_digest = _read_record(checkpoint)
        diffs = differences(recorded, settings, recorded_digest, data_digest)
        step = int(checkpoint.name.split("-")[-1])
        if diffs:
            raise DataError(f"holds a checkpoint (step {step}) of a run with other settings ({'; '.join(diffs)})",
                            root, field="output", hint=_HINT)
        if not resume:
            raise DataError(f"holds a checkpoint (step {step}) of this run", root, field="output",
                            hint="rerun without --no-resume to continue it, or give --overwrite to start over")
        return Plan(checkpoint=checkpoint)
    if recorded_settings.exists():  # started, stopped before its first checkpoint: nothing to continue from
        recorded = json.loads(recorded_settings.read_text())
        diffs = differences(recorded, settings, data_digest, data_digest)
        if diffs:
            raise DataError(f"holds an unfinished run with other settings ({'; '.join(diffs)})", root,
                            field="output", hint=_HINT)
        return Plan(clear=True)
    raise DataError("holds a model that was not trained there", root, field="output",
                    hint="give --overwrite to replace it, or another --output")


def clear(root: Path) -> None:
    """Remove what an earlier run wrote (only called on a dir :func:`check_destination` accepted)."""
    for entry in root.iterdir():
        if entry.name.startswith("."):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def truncate_metrics(root: Path, step: int) -> None:
    """Keep only the metrics of steps up to ``step`` (a resumed run writes the later ones again)."""
    path = root / METRICS
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a torn last line of a killed run
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] <= step:
            kept.append(row)
    write_jsonl(path, kept)
