"""Cross-device negatives: a real two-process ``torchrun`` (gloo, CPU) equals one process on the whole batch.

Invariant: with embeddings all-gathered (local slice keeping its gradient), every rank computes the same
global loss; summing the parameter gradients over ranks gives exactly the gradient that one process gets on
``TrainingBatch.concat([batch_rank0, batch_rank1])``. Checked for the loss, the total gradient norm and a few
full gradient tensors, on a global batch that splits unevenly (3 rows on rank 0, 2 on rank 1), for the
concatenation model (multivariate P,I), the cross-attention model (univariate P,I,IQ) and exclusion-aware
training (``exclusion_training="rules"``: each rank's aspects are gathered and pointed at their rows' places in
the global batch). The rows' instructions exclude something (``dist_worker.excluding_rows``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from dist_worker import (
    assert_gradients_close,
    excluding_rows,
    make_config,
    make_trainer,
    rank_batch,
    step_result,
)

WORKER = Path(__file__).parent / "dist_worker.py"
SETTINGS = {
    "concat-multi-PI": {"interaction": "concat", "objective": "multi", "negatives": "P,I"},
    "cross-uni-PIIQ": {"interaction": "cross_attention", "objective": "uni", "negatives": "P,I,IQ"},
    "concat-multi-PIIQ-exclusions": {
        "interaction": "concat", "objective": "multi", "negatives": "P,I,IQ", "exclusion_training": "rules",
    },
}
N_ROWS = 5  # batch_size 3 x 2 ranks = 6 > 5: rank 0 gets 3 rows, rank 1 gets 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def torchrun_results(rows, tmp_path_factory):
    from infembed.data.inf_ir import write_triplets

    tmp = tmp_path_factory.mktemp("torchrun")
    rows_file = tmp / "rows.jsonl"
    write_triplets(rows_file, excluding_rows(rows[:N_ROWS]))  # instructions that exclude: every setting sees them
    command = [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
        str(WORKER), str(rows_file), str(tmp), json.dumps(SETTINGS),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return {
        name: [torch.load(tmp / f"{name}-rank{rank}.pt", weights_only=False) for rank in (0, 1)]
        for name in SETTINGS
    }


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("name", list(SETTINGS))
def test_torchrun_two_ranks_equal_one_process_on_the_concatenated_batch(name, rows, torchrun_results):
    config = make_config(**SETTINGS[name])
    rows = excluding_rows(rows[:N_ROWS])
    ranks = [rank_batch(rows, config, world_size=2, rank=rank) for rank in (0, 1)]
    assert [b.n_anchors for b in ranks] == [9, 6]  # uneven split: exercises the padded all-gather
    single = step_result(make_trainer(config, rows), type(ranks[0]).concat(ranks))

    rank0, rank1 = torchrun_results[name]
    assert [rank0["n_anchors"], rank1["n_anchors"]] == [9, 6]
    # every rank computes the same global loss, equal to the single process's
    assert rank0["loss"] == pytest.approx(rank1["loss"], rel=1e-6)
    assert rank0["loss"] == pytest.approx(single["loss"], rel=1e-4)
    # summed gradients: identical on both ranks and equal to the single-process gradient
    assert single["grad_norm"] > 0
    assert rank0["grad_norm"] == pytest.approx(single["grad_norm"], rel=1e-4)
    assert set(rank0["grads"]) == set(single["grads"])
    for param in single["grads"]:
        torch.testing.assert_close(rank0["grads"][param], rank1["grads"][param], rtol=0, atol=0)
    # tolerance scaled to the whole gradient (some exact gradients are zero: see assert_gradients_close)
    assert_gradients_close({p: torch.as_tensor(g) for p, g in rank0["grads"].items()},
                           {p: torch.as_tensor(g) for p, g in single["grads"].items()})
