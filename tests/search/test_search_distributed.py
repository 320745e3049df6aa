"""``infembed index`` under torchrun: two CPU processes each encode their share of the shards, rank 0 assembles
the index. Invariant: the result equals a single-process build (same documents, same vectors up to float noise
from different batch padding), and the build records that two ranks shared it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infembed.search import Index

pytestmark = [pytest.mark.slow, pytest.mark.distributed]


def test_torchrun_two_ranks(tmp_path, corpus_path, flat_index, model):
    torchrun = Path(sys.executable).parent / "torchrun"
    infembed = Path(sys.executable).parent / "infembed"
    if not torchrun.exists() or not infembed.exists():
        pytest.skip("torchrun or the infembed script is not installed in this environment")
    out = tmp_path / "index"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    command = [
        str(torchrun),
        "--standalone",
        "--nproc_per_node",
        "2",
        str(infembed),
        "index",
        "--corpus",
        str(corpus_path),
        "--output",
        str(out),
        "--shard-size",
        "4",
        "--device",
        "cpu",
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    index = Index.load(out, model)
    assert index.count == 30 and index.meta["shards"] == 8
    np.testing.assert_allclose(index.embeddings(), flat_index.embeddings(), atol=1e-5)
    assert index.meta["world_size"] == 2  # the ranks shared the work (alone, each would record 1)
    shutil.rmtree(out)
