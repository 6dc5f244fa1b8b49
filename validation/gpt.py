"""A small GPT-style decoder (pre-LayerNorm, causal attention, 4h GELU MLP, untied embeddings),
the same structure as clustersim's ModelSpec with ffn_act=gelu, plus Megatron-style tensor
parallelism written directly with torch.distributed.

Tensor parallelism follows Shoeybi et al. 2019 (Megatron-LM, arXiv:1909.08053 §3, Fig. 3):
QKV and the first MLP matrix are column-parallel (input passes ``f``: identity forward,
all-reduce backward), the attention output and the second MLP matrix are row-parallel
(output passes ``g``: all-reduce forward, identity backward); embedding and output layer are
split over the vocabulary, with a vocabulary-parallel cross-entropy.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class _CopyToTP(torch.autograd.Function):
    """``f``: identity forward, all-reduce of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[override]
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """``g``: all-reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):  # type: ignore[override]
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        return grad, None


def _f(x: torch.Tensor, group: Any) -> torch.Tensor:
    return _CopyToTP.apply(x, group) if group is not None else x


def _g(x: torch.Tensor, group: Any) -> torch.Tensor:
    return _ReduceFromTP.apply(x, group) if group is not None else x


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, tp: int = 1, tp_group: Any = None) -> None:
        super().__init__()
        self.heads_local = heads // tp
        self.head_dim = hidden // heads
        self.tp_group = tp_group
        local = self.heads_local * self.head_dim
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * local)                     # column-parallel
        self.proj = nn.Linear(local, hidden, bias=(tp_group is None))  # row-parallel
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden // tp)              # column-parallel
        self.fc2 = nn.Linear(4 * hidden // tp, hidden, bias=(tp_group is None))  # row-parallel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        h = _f(self.ln1(x), self.tp_group)
        q, k, v = self.qkv(h).view(b, s, 3, self.heads_local, self.head_dim).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = a.transpose(1, 2).reshape(b, s, self.heads_local * self.head_dim)
        x = x + _g(self.proj(a), self.tp_group)
        h = _f(self.ln2(x), self.tp_group)
        return x + _g(self.fc2(F.gelu(self.fc1(h))), self.tp_group)


class GPT(nn.Module):
    """Layers ``[first_layer, last_layer)`` of the model; embedding on the first stage, final
    LayerNorm, output layer and loss on the last (pipeline stages hold slices)."""

    def __init__(self, cfg: dict[str, Any], tp: int = 1, tp_rank: int = 0, tp_group: Any = None,
                 first_layer: int = 0, last_layer: int | None = None) -> None:
        super().__init__()
        last = cfg["layers"] if last_layer is None else last_layer
        hidden, vocab = cfg["hidden"], cfg["vocab"]
        self.cfg, self.tp, self.tp_group = cfg, tp, tp_group
        self.is_first, self.is_last = first_layer == 0, last == cfg["layers"]
        self.vocab_local = vocab // tp
        self.vocab_start = tp_rank * self.vocab_local
        if self.is_first:
            self.wte = nn.Embedding(self.vocab_local, hidden)
            self.wpe = nn.Embedding(cfg["seq_len"], hidden)
        self.blocks = nn.ModuleList(Block(hidden, cfg["heads"], tp, tp_group) for _ in range(first_layer, last))
        if self.is_last:
            self.ln_f = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, self.vocab_local, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)  # GPT-2 initialisation (Radford et al. 2019)

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        if self.tp_group is None:
            tok = self.wte(idx)
        else:  # vocabulary-parallel embedding: look up own rows, zero elsewhere, sum over TP
            local = idx - self.vocab_start
            mask = (local < 0) | (local >= self.vocab_local)
            tok = self.wte(local.masked_fill(mask, 0)).masked_fill(mask.unsqueeze(-1), 0.0)
            tok = _g(tok, self.tp_group)
        return tok + self.wpe(torch.arange(idx.shape[1], device=idx.device))

    def body(self, x: torch.Tensor) -> torch.Tensor:
        for blk in self.blocks:
            x = blk(x)
        return x

    def loss(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        h = _f(self.ln_f(x), self.tp_group)
        logits = self.head(h).float()
        if self.tp_group is None:
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        # vocabulary-parallel cross-entropy (Megatron-LM, arXiv:1909.08053 §3): global max,
        # global sum of exponentials and the target logit, each one all-reduce over TP
        m = logits.max(dim=-1, keepdim=True).values.detach()
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=self.tp_group)
        z = logits - m
        sum_exp = _g(z.exp().sum(dim=-1), self.tp_group)
        local = targets - self.vocab_start
        mask = (local < 0) | (local >= self.vocab_local)
        tgt = z.gather(-1, local.masked_fill(mask, 0).unsqueeze(-1)).squeeze(-1).masked_fill(mask, 0.0)
        tgt = _g(tgt, self.tp_group)
        return (sum_exp.log() - tgt).mean()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss(self.body(self.embed(idx)), targets)


def batch(cfg: dict[str, Any], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg["vocab"], (cfg["micro_batch"], cfg["seq_len"] + 1), generator=g)
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
