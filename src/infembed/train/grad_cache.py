"""Gradient caching (GradCache, Gao et al. 2021): the loss and gradients of a whole batch with the encoder's
memory bounded by a chunk of texts.

Three passes: embed every chunk without a graph (remembering each chunk's RNG state), compute the loss on the
cached embeddings and back-propagate it to them, then re-embed each chunk with a graph under the same RNG
state (same dropout) and push the cached gradient through it. The gradients equal the plain batch's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from infembed.train.batching import TrainingBatch


class RandState:
    """Captures the RNG state before a chunk's no-grad forward so the re-forward with grad sees the same dropout."""

    def __init__(self, device: torch.device):
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        self.device = device

    @contextlib.contextmanager
    def restore(self):
        devices = [self.device] if self.cuda is not None else []
        with torch.random.fork_rng(devices=devices):
            torch.set_rng_state(self.cpu)
            if self.cuda is not None:
                torch.cuda.set_rng_state(self.cuda, self.device)
            yield


def grad_cache_step(
    model: Any,
    batch: TrainingBatch,
    chunk: int,
    scale: float,
    loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    autocast: Any,
    device: torch.device,
) -> float:
    """Forward + backward of ``batch`` in chunks of ``chunk`` texts; ``loss_of(queries, passages)`` is the loss
    of the batch's embeddings (``queries``: its query rows, then its aspects: ``TrainingBatch.embedding_inputs``). Gradients (times ``scale``) accumulate in ``.grad``; returns the loss value."""
    # 1. embeddings without a graph, chunk by chunk, remembering the RNG state of each chunk
    q_items = list(zip(*batch.embedding_inputs()))  # query rows, then excluded aspects (exclusion-aware)
    q_chunks = [q_items[i : i + chunk] for i in range(0, len(q_items), chunk)]
    p_chunks = [batch.passages[i : i + chunk] for i in range(0, len(batch.passages), chunk)]
    q_states, p_states, q_reps, p_reps = [], [], [], []
    with torch.no_grad():
        for items in q_chunks:
            q_states.append(RandState(device))
            with autocast:
                q_reps.append(model.embed_queries([q for q, _ in items], [i for _, i in items]).float())
        for texts in p_chunks:
            p_states.append(RandState(device))
            with autocast:
                p_reps.append(model.embed_passages(texts).float())
    queries = torch.cat(q_reps).requires_grad_(True)
    passages = torch.cat(p_reps).requires_grad_(True)
    # 2. the loss on the cached embeddings; gradients w.r.t. the embeddings (and the temperature)
    loss = loss_of(queries, passages)
    (loss * scale).backward()
    q_grads = queries.grad.split([len(c) for c in q_chunks])
    p_grads = passages.grad.split([len(c) for c in p_chunks])
    # 3. re-encode each chunk with a graph (same dropout) and push the cached gradient through it
    for items, state, grad in zip(q_chunks, q_states, q_grads):
        with state.restore(), autocast:
            reps = model.embed_queries([q for q, _ in items], [i for _, i in items]).float()
        reps.backward(grad)
    for texts, state, grad in zip(p_chunks, p_states, p_grads):
        with state.restore(), autocast:
            reps = model.embed_passages(texts).float()
        reps.backward(grad)
    return float(loss.detach())
