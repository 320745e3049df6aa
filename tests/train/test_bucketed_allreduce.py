"""Bucketed gradient all-reduce: under a real ``torchrun --nproc_per_node 2`` (gloo, CPU), summing the gradients
in flattened buckets gives the same gradients as one collective per parameter.

Invariant: :func:`infembed.train.distributed.sum_gradients` with buckets (the default 25 MiB; 1 MiB, so that
the small tensors share buckets and the large ones stand alone) leaves every parameter's gradient equal to the
per-parameter sum (``bucket_mb=0``), up to 1e-6 of the norm of the whole model's gradient, on both ranks, in far
fewer collectives. Checked on the real MiniLM gradients of one training step (the ranks' different slices of the
batch give different local gradients) and on loose tensors of mixed dtypes, sizes and missing gradients.

This file is also the worker that torchrun starts: ``python -m torch.distributed.run --nproc_per_node 2
test_bucketed_allreduce.py ROWS.jsonl OUT_DIR``.
"""

from __future__ import annotations

import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

BUCKET_SIZES_MB = (25.0, 1.0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _loose_parameters(rank: int) -> list[torch.nn.Parameter]:
    """Parameters of mixed dtypes and sizes (one larger than a 1 MiB bucket, one without a gradient), with
    gradients that differ between ranks."""
    generator = torch.Generator().manual_seed(100 + rank)
    shapes = [((7,), torch.float32), ((300, 1000), torch.float32), ((3, 5), torch.float64), ((4,), torch.float32),
              ((11, 2), torch.bfloat16), ((2,), torch.float32)]  # fmt: skip
    params = []
    for index, (shape, dtype) in enumerate(shapes):
        param = torch.nn.Parameter(torch.zeros(shape, dtype=dtype))
        if index != 3:  # the 4th never gets a gradient
            param.grad = torch.randn(shape, generator=generator).to(dtype)
        params.append(param)
    return params


def _grads(params) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.clone() for p in params]


def _set_grads(params, grads) -> None:
    for param, grad in zip(params, grads):
        param.grad = None if grad is None else grad.clone()


def _sum_both_ways(params, local, bucket_mb: float) -> dict[str, object]:
    """The per-parameter and the bucketed sums of the same local gradients, and the number of collectives."""
    from infembed.train import distributed

    _set_grads(params, local)
    reference_calls = distributed.sum_gradients(params, bucket_mb=0)
    reference = _grads(params)
    _set_grads(params, local)
    calls = distributed.sum_gradients(params, bucket_mb=bucket_mb)
    bucketed = _grads(params)
    return {"reference": reference, "bucketed": bucketed, "local": local,
            "reference_calls": reference_calls, "calls": calls}  # fmt: skip


def worker(rows_path: str, out_dir: str) -> None:
    from dist_worker import make_config, make_trainer, rank_batch

    from infembed.data.inf_ir import read_triplets
    from infembed.train import distributed

    torch.set_num_threads(1)
    if not distributed.init_from_env(torch.device("cpu")):
        raise SystemExit("run me with torchrun (WORLD_SIZE > 1)")
    rank, world_size = distributed.world()
    rows = read_triplets(rows_path)
    config = make_config(interaction="cross_attention", objective="multi", negatives="P,I")
    trainer = make_trainer(config, rows)
    trainer.backward_step(rank_batch(rows, config, world_size, rank))
    results = {}
    for case, params in (("model", trainer.trainable_parameters()), ("loose", _loose_parameters(rank))):
        local = _grads(params)
        results[case] = {mb: _sum_both_ways(params, local, mb) for mb in BUCKET_SIZES_MB}
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def torchrun_results(rows, tmp_path_factory):
    from infembed.data.inf_ir import write_triplets

    tmp = tmp_path_factory.mktemp("bucketed")
    rows_file = tmp / "rows.jsonl"
    write_triplets(rows_file, rows[:6])
    command = [
        sys.executable, "-m", "torch.distributed.run",
        "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(_free_port()),
        __file__, str(rows_file), str(tmp),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return [torch.load(tmp / f"rank{rank}.pt", weights_only=False) for rank in (0, 1)]


def _norm(grads) -> float:
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads if g is not None))


@pytest.mark.slow
@pytest.mark.distributed
@pytest.mark.parametrize("case", ["model", "loose"])
@pytest.mark.parametrize("bucket_mb", BUCKET_SIZES_MB)
def test_bucketed_sum_equals_per_parameter_sum(case, bucket_mb, torchrun_results):
    rank0, rank1 = (r[case][bucket_mb] for r in torchrun_results)
    # the ranks held different local gradients, so the sum is a real one
    assert _norm(a - b for a, b in zip(rank0["local"], rank1["local"]) if a is not None) > 0
    for result in (rank0, rank1):
        reference, bucketed = result["reference"], result["bucketed"]
        total = _norm(reference)
        assert total > 0
        assert [g is None for g in bucketed] == [g is None for g in reference]  # no gradient created or lost
        for got, want in zip(bucketed, reference):
            if want is None:
                continue
            assert got.dtype == want.dtype and got.shape == want.shape
            assert float((got.double() - want.double()).norm()) <= 1e-6 * total
        # the reference is the real sum of the two ranks' local gradients (to the dtype's precision)
        for got, a, b in zip(reference, rank0["local"], rank1["local"]):
            if got is not None:
                tolerance = 1e-2 if got.dtype == torch.bfloat16 else 1e-6
                assert float((got.double() - (a.double() + b.double())).norm()) <= tolerance * total
    # identical on both ranks
    for a, b in zip(rank0["bucketed"], rank1["bucketed"]):
        assert (a is None and b is None) or torch.equal(a, b)
    # one collective per gradient against at most two per full bucket: consecutive buckets of one dtype hold
    # more than bucket_mb together, or the second would not have been started
    assert rank0["calls"] == rank1["calls"]
    grads = [g for g in rank0["reference"] if g is not None]
    assert rank0["reference_calls"] == len(grads)
    sizes: dict[torch.dtype, int] = {}
    for grad in grads:
        sizes[grad.dtype] = sizes.get(grad.dtype, 0) + grad.numel() * grad.element_size()
    cap = bucket_mb * 2**20
    assert rank0["calls"] <= sum(2 * math.ceil(size / cap) for size in sizes.values())
    if case == "model":  # MiniLM + cross-attention: 100+ tensors, ~92 MB of float32
        assert len(grads) > 100 and rank0["calls"] < len(grads) / 2
    else:  # float32 x3 (one of them 1.2 MB), float64, bfloat16: one bucket per dtype at 25 MiB
        assert rank0["calls"] == (3 if bucket_mb == 25.0 else 5)  # at 1 MiB the large one stands alone


def test_without_a_process_group_nothing_is_summed():
    from infembed.train import distributed

    params = _loose_parameters(0)
    before = _grads(params)
    assert distributed.sum_gradients(params) == 0
    for param, grad in zip(params, before):
        assert (param.grad is None and grad is None) or torch.equal(param.grad, grad)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))  # dist_worker.py
    worker(*sys.argv[1:])
