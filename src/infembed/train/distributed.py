"""Cross-device negatives with torch.distributed.

:func:`gather_with_grad` all-gathers a tensor whose first dimension may differ between ranks; the local slice
keeps its autograd graph, the other ranks' slices are constants. Every rank then computes the *same* global loss
and back-propagates into its own slice only, so summing (not averaging) the parameter gradients over ranks gives
exactly the single-process gradient of the global batch (the reference code gets the same by averaging with DDP
and multiplying the loss by the world size). :func:`sum_gradients` does that sum in buckets of ~25 MiB, as DDP
does, rather than one collective per parameter.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def world() -> tuple[int, int]:
    if is_distributed():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_env(device: torch.device | None = None) -> bool:
    """Initialise the process group when launched by torchrun (``WORLD_SIZE`` > 1); gloo on CPU, nccl on CUDA."""
    if is_distributed() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return is_distributed()
    backend = "nccl" if (device is not None and device.type == "cuda") else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend)
    return True


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    if not is_distributed():
        return tensor
    rank, size = world()
    n = torch.tensor([tensor.shape[0]], device=tensor.device)
    sizes = [torch.zeros_like(n) for _ in range(size)]
    dist.all_gather(sizes, n)
    sizes = [int(s.item()) for s in sizes]
    longest = max(sizes)
    padded = tensor.detach()
    if tensor.shape[0] < longest:
        pad = torch.zeros(
            (longest - tensor.shape[0], *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device
        )
        padded = torch.cat([padded, pad])
    parts = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded.contiguous())
    parts = [p[:s] for p, s in zip(parts, sizes)]
    parts[rank] = tensor
    return torch.cat(parts)


def offsets(*counts: int, device: torch.device | None = None) -> tuple[torch.Tensor, ...]:
    """For each local count: how many the lower ranks hold in all (0 in a single process); a tensor each."""
    device = device or torch.device("cpu")
    local = torch.tensor(counts, dtype=torch.long, device=device)
    if not is_distributed():
        return tuple(torch.zeros((), dtype=torch.long, device=device) for _ in counts)
    rank, size = world()
    parts = [torch.zeros_like(local) for _ in range(size)]
    dist.all_gather(parts, local)
    below = torch.stack(parts[:rank]).sum(0) if rank else torch.zeros_like(local)
    return tuple(below)


#: Size of one all-reduce bucket in MiB (DDP's default, ``bucket_cap_mb=25``). ``0``: one collective per
#: parameter, the unbucketed reference (``bench/train.py`` times both under torchrun).
BUCKET_MB: float = 25.0


def sum_gradients(parameters, bucket_mb: float | None = None) -> int:
    """Sum every parameter's gradient over all ranks, in place; returns the number of collectives issued.

    Gradients are flattened into buckets of about ``bucket_mb`` MiB (default :data:`BUCKET_MB`) and each
    bucket is all-reduced in one call, as DDP does: a model has hundreds of small tensors (biases, norms), and
    one collective per tensor pays the launch and network latency hundreds of times per step. A tensor larger
    than the bucket gets a bucket of its own; buckets never mix devices or dtypes. ``bucket_mb=0`` keeps one
    collective per parameter. Parameters without a gradient are skipped, so every rank must hold gradients
    for the same parameters (they do: every rank back-propagates the same global loss through the same model).
    """
    if not is_distributed():
        return 0
    grads = [p.grad for p in parameters if p.grad is not None]
    cap_mb = BUCKET_MB if bucket_mb is None else bucket_mb
    if cap_mb <= 0:
        for grad in grads:
            dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return len(grads)
    calls = 0
    for bucket in _buckets(grads, int(cap_mb * 2**20)):
        if len(bucket) == 1:  # nothing to flatten (and a sparse gradient always stands alone)
            dist.all_reduce(bucket[0], op=dist.ReduceOp.SUM)
            calls += 1
            continue
        flat = _flatten_dense_tensors(bucket)
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        calls += 1
        for grad, summed in zip(bucket, _unflatten_dense_tensors(flat, bucket)):
            grad.copy_(summed)
    return calls


def _buckets(grads: list[torch.Tensor], cap_bytes: int) -> list[list[torch.Tensor]]:
    """Consecutive gradients grouped by (device, dtype, sparse), each group cut into runs of at most
    ``cap_bytes`` (a larger tensor alone). The grouping depends only on the shapes and dtypes, so every rank
    builds the same buckets in the same order, which the collectives require."""
    groups: dict[tuple, list[list[torch.Tensor]]] = {}
    sizes: dict[tuple, int] = {}
    for grad in grads:
        key = (grad.device, grad.dtype, grad.is_sparse)
        nbytes = grad.numel() * grad.element_size()
        runs = groups.setdefault(key, [])
        if grad.is_sparse or not runs or sizes[key] + nbytes > cap_bytes:
            runs.append([])
            sizes[key] = 0
        runs[-1].append(grad)
        sizes[key] += nbytes
    return [run for runs in groups.values() for run in runs]


def all_reduce_mean(value: float, device: torch.device) -> float:
    if not is_distributed():
        return value
    t = torch.tensor([value], device=device, dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item()) / world()[1]
