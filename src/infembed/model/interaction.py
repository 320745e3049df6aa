"""How instruction and query meet.

* :func:`join` (concatenation): one text from a template such as ``"{query} {instruction}"``; the backbone's
  own self-attention does the interaction. Used at train, eval and search time alike (the template is saved
  with the model).
* :class:`CrossAttentionInteraction`: the tokens of a *base* encoding attend to the instruction's own tokens
  (encoded separately) through learned projections; a gated residual adds the result to the base tokens, and
  the usual pooling makes the instruction-aware query vector. The base (``ModelConfig.cross_attention_base``):

  - ``"concat"`` (the default since 0.x): the concatenated ``template`` text, so an untrained block (gate 0)
    gives *exactly* the concatenation model's embedding and training can only add to it. The value and output
    projections start as the identity, so once the gate opens the residual is a learned, attention-weighted
    mix of the instruction's token states (re-emphasising the instruction), not random noise.
  - ``"query"`` (models saved before that change; loaded as they were): the query text alone, so an untrained
    block ignores the instruction. Measured in docs/training.md: far below concatenation after a short
    fine-tuning (p-MRR 0.1, MAP 26.5 vs 7.8, 44.5 on followir-cranfield), hence the change.

Why token level: the paper's equation (4) writes the attention over pooled vectors ``i`` and ``q``; a softmax
over a single 1x1 score is always 1, so that formula returns ``q W_{q,2}`` and ignores the instruction. We
attend from every base token to every instruction token (masking padding with -inf, not the reference code's
-1e-8), with query/key/value/output projections and a zero-initialised gate.

The gate is ``tanh(GATE_SCALE * g)``: Adam moves a parameter by about its learning rate per step, so a plain
zero-initialised scalar gate fine-tuned at 5e-5 for 60 steps stays below 1e-4 and the block is never used
(measured: p-MRR exactly 0.0 in the objective ablation of the "query" base). The scale (and the trainer's
separate, larger learning rate for this freshly initialised block, ``interaction_lr_multiplier``) let it open
within a short fine-tuning while an untrained block still leaves the base path untouched.
"""

from __future__ import annotations

import torch
from torch import nn

from infembed.data.errors import SettingsError
from infembed.templates import DEFAULT_TEMPLATE, TEMPLATES, join, resolve_template  # noqa: F401  (re-exported)

#: What the instruction tokens are added to: the concatenated text (default) or, for old models, the query alone.
CROSS_ATTENTION_BASES = ("concat", "query")


class CrossAttentionInteraction(nn.Module):
    """Base tokens attend to instruction tokens (multi-head, learned projections, gated residual)."""

    GATE_SCALE = 10.0

    def __init__(self, dim: int, heads: int = 4, dropout: float = 0.0, base: str = "concat"):
        super().__init__()
        if dim % heads:
            raise SettingsError(f"hidden size {dim} is not divisible by heads={heads}")
        if base not in CROSS_ATTENTION_BASES:
            raise SettingsError(f"cross_attention_base must be one of {CROSS_ATTENTION_BASES}, got {base!r}")
        self.dim, self.heads, self.base = dim, heads, base
        # the block's random initialisation must not move the global RNG: a training run's dropout masks (and so
        # its backbone) then follow the concatenation run of the same seed until the gate opens
        with torch.random.fork_rng(devices=[]):
            self.attention = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.gate = nn.Parameter(torch.zeros(1))
        if base == "concat":
            # value and output projections = identity: the residual starts as the instruction's own states
            with torch.no_grad():
                self.attention.in_proj_weight[2 * dim :].copy_(torch.eye(dim))
                self.attention.in_proj_bias.zero_()
                self.attention.out_proj.weight.copy_(torch.eye(dim))
                self.attention.out_proj.bias.zero_()

    def gate_value(self) -> float:
        """The residual's current weight, ``tanh(GATE_SCALE * g)``: 0 for an untrained block."""
        return float(torch.tanh(self.GATE_SCALE * self.gate.detach()).item())

    def forward(
        self,
        query_states: torch.Tensor,
        query_mask: torch.Tensor,
        instruction_states: torch.Tensor,
        instruction_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Instruction-aware token states, shape of ``query_states`` (the base tokens). Rows whose instruction is
        empty (all-zero mask) get no update."""
        instruction_states = instruction_states.to(self.norm.weight.dtype)
        query_states_c = query_states.to(self.norm.weight.dtype)
        empty = instruction_mask.sum(1) == 0
        key_padding = instruction_mask == 0
        if empty.any():  # an all-masked row would give NaN; let it attend to position 0 and zero it below
            key_padding = key_padding.clone()
            key_padding[empty, 0] = False
        attended, _ = self.attention(
            self.norm(query_states_c),
            instruction_states,
            instruction_states,
            key_padding_mask=key_padding,
            need_weights=False,
        )
        attended = attended.masked_fill(empty[:, None, None], 0.0)
        return (query_states_c + torch.tanh(self.GATE_SCALE * self.gate) * attended).to(query_states.dtype)

    def get_config_dict(self) -> dict:
        return {"dim": self.dim, "heads": self.heads, "base": self.base}
