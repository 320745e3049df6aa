"""Cross-device negatives with torch.distributed.

:func:`gather_with_grad` all-gathers a tensor whose first dimension may differ between ranks; the local slice
keeps its autograd graph, the other ranks' slices are constants. Every rank then computes the *same* global loss
and back-propagates into its own slice only, so summing (not averaging) the parameter gradients over ranks gives
exactly the single-process gradient of the global batch (the reference code gets the same by averaging with DDP
and multiplying the loss by the world size).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


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
        pad = torch.zeros((longest - tensor.shape[0], *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
        padded = torch.cat([padded, pad])
    parts = [torch.empty_like(padded) for _ in range(size)]
    dist.all_gather(parts, padded.contiguous())
    parts = [p[:s] for p, s in zip(parts, sizes)]
    parts[rank] = tensor
    return torch.cat(parts)


def sum_gradients(parameters) -> None:
    if not is_distributed():
        return
    for p in parameters:
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)


def all_reduce_mean(value: float, device: torch.device) -> float:
    if not is_distributed():
        return value
    t = torch.tensor([value], device=device, dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item()) / world()[1]
