"""The demo's training step: the default MiniLM on the shared InF-IR sample with the paper's best objective."""

from __future__ import annotations

import json
from pathlib import Path

from infembed.train.config import TrainConfig


def demo_config(data_root: Path, output: Path, quick: bool = False, device: str | None = None) -> TrainConfig:
    return TrainConfig(
        data=[str(data_root / "inf-ir-msmarco-sample")],
        model="default",
        objective="multi",
        negatives="P,I",
        epochs=1 if quick else 2,
        limit=96 if quick else None,
        batch_size=16,
        learning_rate=5e-5,
        output=str(output),
        device=device,
    )


def train_demo_model(data_root: Path, output: Path, quick: bool = False, device: str | None = None) -> Path:
    """Train (or reuse an identical finished run in ``output``) and return the model dir. The demo owns
    ``output``: a run with other settings there (``--quick`` after a full demo) is replaced."""
    from infembed.data.errors import DataError
    from infembed.train.trainer import train

    config = demo_config(data_root, output, quick, device)
    done = output / "train_config.json"
    if (output / "infembed.json").exists() and done.exists() and json.loads(done.read_text()) == config.to_dict():
        return output
    try:
        return train(config)
    except DataError as error:
        demo_wrote_it = (output / "infembed.json").exists() or done.exists()
        if error.field != "output" or not demo_wrote_it:
            raise  # bad input, or a dir the demo did not write: never replace it
        return train(config, overwrite=True)
