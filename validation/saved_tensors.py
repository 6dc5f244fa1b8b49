"""What autograd keeps for the backward pass of one transformer block, counted on CPU.

Two reference blocks, written op for op after the implementations they stand for:

* ``LlamaBlock``: torchtitan's Llama 3 block (torchtitan/models/llama3/model/model.py at
  torchtitan commit 8a6c9fe6e, 2025-08; torchtitan/models/common/{attention,rope,feed_forward}.py
  at HEAD): ``nn.RMSNorm``, separate ``wq``/``wk``/``wv``/``wo`` without bias, complex RoPE in
  fp32 (``view_as_complex(x.float())``), GQA through ``F.scaled_dot_product_attention(...,
  enable_gqa=True)`` (HEAD; the 2025 file repeated K/V with ``repeat_kv``), the attention output
  transposed back and made contiguous, SwiGLU ``w2(silu(w1(x)) * w3(x))``, no dropout.
* ``GptBlock``: Megatron-LM as in its 2021-22 papers (megatron/model/transformer.py
  ParallelAttention / ParallelMLP, the layout Korthikanti et al. 2022 count): ``[s, b, h]``
  layout, LayerNorm with bias, one fused QKV linear with bias, unfused attention core
  (``baddbmm`` of Q and K^T with the 1/sqrt(d) scale, causal mask, softmax, dropout 0.1,
  ``bmm`` with V), output projection, dropout, residual; MLP ``fc2(gelu(fc1(x)))``, dropout,
  residual.

The blocks of today's families are variants of these two (``Shape`` fields):

* ``head_dim`` other than hidden / heads (Qwen3, Gemma 3, gpt-oss): wq / wk / wv / wo of
  ``heads x head_dim`` and ``kv_heads x head_dim``;
* ``qk_norm``: ``nn.RMSNorm(head_dim)`` on Q and K before RoPE (HF Qwen3Attention ``q_norm`` /
  ``k_norm``; torchtitan's Qwen3 model);
* ``act`` "geglu": ``w2(gelu(w1 x, approximate="tanh") * w3 x)`` (HF GemmaMLP,
  gelu_pytorch_tanh); on the GPT block "relu" ``fc2(relu(fc1 x))`` and "squared-relu"
  ``fc2(relu(fc1 x) ** 2)`` (Megatron-LM's squared_relu, Nemotron-4), the latter without dropout
  as Nemotron-4 trains;
* ``sandwich``: Gemma 2/3's RMSNorm on the attention and MLP outputs before the residual adds;
* ``window``: a sliding window through SDPA's boolean ``attn_mask`` (a module buffer), which CPU
  runs with the same flash kernel (``_scaled_dot_product_flash_attention_for_cpu``) and so keeps
  the same tensors as full causal attention.

Counting (``measure``): every storage created during the block's forward is tracked through a
TorchDispatchMode with ``StorageWeakRef``; after the forward, the storages still alive (other
than the block's output) are what the backward will need: tensors autograd saved, the outputs a
selective-checkpoint policy cached, and nothing else (the intermediates of a checkpointed
region die). The block input counts when autograd saved it or a checkpoint keeps it for the
recompute. Parameters and module buffers (the causal mask, RoPE tables) are not activations
and are left out. For the no-checkpoint case a second count through
``torch.autograd.graph.saved_tensors_hooks`` (bytes of the unique storages that autograd packs)
must agree exactly; ``tests/memory/test_saved_tensors.py`` checks that, and compares the
simulator's per-layer bytes (clustersim/memory/saved.py) with these counts.

Policies: ``none``; ``full`` = ``torch.utils.checkpoint.checkpoint(use_reentrant=False)``
around the block (torchtitan's ``ptd_checkpoint_wrapper``); ``selective-op`` = the same with
``context_fn=create_selective_checkpoint_contexts(policy)`` and torchtitan's op policy
(torchtitan/distributed/activation_checkpoint.py at 8a6c9fe6e: save the outputs of ``mm``
except every second one, and of the flash/efficient SDPA kernels; recompute the rest). On CPU the
SDPA kernel is ``_scaled_dot_product_flash_attention_for_cpu``, which torchtitan's list does not
name (it lists the CUDA kernels); the measurement adds it to the list so that the policy acts
on CPU as it does on GPU.

Run ``python -m validation.saved_tensors`` for the table of docs/memory.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

POLICIES = ("none", "selective", "selective-op", "full")
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


# ---------------------------------------------------------------------------------------------
# reference blocks

def _rope_table(seq_len: int, head_dim: int, theta: float = 10000.0) -> torch.Tensor:
    """complex64 [s, d/2] rotation table (torchtitan precompute_freqs_cis)."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: head_dim // 2].float() / head_dim))
    angles = torch.outer(torch.arange(seq_len).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def _apply_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """torchtitan apply_rotary_emb for one tensor [b, s, heads, d]: fp32 complex multiply."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rot = table[: x.shape[1]].view(1, x.shape[1], 1, xc.shape[-1])
    return torch.view_as_real(xc * rot).flatten(3).type_as(x)


class LlamaBlock(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, ffn: int, seq_len: int, head_dim: int = 0,
                 qk_norm: bool = False, act: str = "swiglu", sandwich: bool = False, window: int = 0) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim or hidden // heads
        self.act, self.window = act, window
        self.q_norm = nn.RMSNorm(self.head_dim, eps=1e-6) if qk_norm else None
        self.k_norm = nn.RMSNorm(self.head_dim, eps=1e-6) if qk_norm else None
        self.post_attention_norm = nn.RMSNorm(hidden, eps=1e-6) if sandwich else None
        self.post_ffn_norm = nn.RMSNorm(hidden, eps=1e-6) if sandwich else None
        if window:   # query i sees keys i - window + 1 .. i
            i = torch.arange(seq_len)
            self.register_buffer("band", (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - window),
                                 persistent=False)
        self.attention_norm = nn.RMSNorm(hidden, eps=1e-5)
        self.wq = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.ffn_norm = nn.RMSNorm(hidden, eps=1e-5)
        self.w1 = nn.Linear(hidden, ffn, bias=False)
        self.w2 = nn.Linear(ffn, hidden, bias=False)
        self.w3 = nn.Linear(hidden, ffn, bias=False)
        self.rope = _rope_table(seq_len, self.head_dim)   # complex64, a constant (not cast by Module.to)

    checkpoint_core = False   # Megatron's selective recompute: checkpoint the attention core

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.window:
            s = q.shape[1]
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  attn_mask=self.band[:s, :s], enable_gqa=self.kv_heads != self.heads)
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=True, enable_gqa=self.kv_heads != self.heads)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim)
        k = self.wk(x).view(b, s, -1, self.head_dim)
        v = self.wv(x).view(b, s, -1, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = _apply_rope(q, self.rope), _apply_rope(k, self.rope)
        out = _run_core(self, q, k, v)
        return self.wo(out.transpose(1, 2).contiguous().view(b, s, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attention(self.attention_norm(x))
        h = x + (self.post_attention_norm(a) if self.post_attention_norm is not None else a)
        y = self.ffn_norm(h)
        gate = F.silu(self.w1(y)) if self.act == "swiglu" else F.gelu(self.w1(y), approximate="tanh")
        m = self.w2(gate * self.w3(y))
        return h + (self.post_ffn_norm(m) if self.post_ffn_norm is not None else m)


class GptBlock(nn.Module):
    """Input and output ``[s, b, h]`` (Megatron's layout)."""

    def __init__(self, hidden: int, heads: int, seq_len: int, dropout: float = 0.1, act: str = "gelu") -> None:
        super().__init__()
        self.heads, self.head_dim, self.p, self.act = heads, hidden // heads, dropout, act
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    checkpoint_core = False

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        s, b, h = x.shape
        n, d = self.heads, self.head_dim
        q, k, v = self.qkv(x).view(s, b, n, 3 * d).split(d, dim=-1)        # views of one buffer
        q, k, v = (t.reshape(s, b * n, d).transpose(0, 1) for t in (q, k, v))   # [b n, s, d] views
        return self.drop(self.proj(_run_core(self, q, k, v)))

    def drop(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.p, training=True) if self.p else x

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Megatron's CoreAttention: scores, scale, mask, softmax, dropout, context, back to [s, b, h]."""
        bn, s, d = q.shape
        n = self.heads
        b = bn // n
        scores = torch.baddbmm(torch.empty(b * n, s, s, dtype=q.dtype), q, k.transpose(1, 2),
                               beta=0.0, alpha=1.0 / math.sqrt(d))
        probs = torch.softmax(scores.view(b, n, s, s).masked_fill(self.mask[:s, :s], float("-inf")), dim=-1)
        probs = self.drop(probs).view(b * n, s, s)
        ctx = torch.bmm(probs, v)                                              # [b n, s, d]
        return ctx.view(b, n, s, d).permute(2, 0, 1, 3).contiguous().view(s, b, n * d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.ln1(x))
        f = self.fc1(self.ln2(h))
        f = F.gelu(f) if self.act == "gelu" else F.relu(f) if self.act == "relu" else torch.pow(F.relu(f), 2)
        return h + self.drop(self.fc2(f))


def _run_core(block: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    if block.checkpoint_core:   # Megatron: tensor_parallel.checkpoint(core_attention, q, k, v, ...)
        return checkpoint(block.core, q, k, v, use_reentrant=False, preserve_rng_state=False)
    return block.core(q, k, v)


# ---------------------------------------------------------------------------------------------
# counting

class _StorageTracker(TorchDispatchMode):
    """Records every storage an op returns (weakly), with its size in bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, tuple[StorageWeakRef, int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                st = t.untyped_storage()
                ref = StorageWeakRef(st)
                self.refs.setdefault(ref.cdata, (ref, st.nbytes()))
        return out


def _sdpa_ops() -> set:
    names = ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_cudnn_attention")
    return {getattr(torch.ops.aten, n).default for n in names if hasattr(torch.ops.aten, n)}


def torchtitan_op_policy():
    """torchtitan's per-op SAC policy (activation_checkpoint.py, 8a6c9fe6e): save mm outputs
    except every second one, and the SDPA kernels' outputs; recompute everything else."""
    save = {torch.ops.aten.mm.default, *_sdpa_ops()}
    meta = {"forward": 0, "recompute": 0}

    def policy(ctx, func, *args, **kwargs):  # noqa: ANN001, ANN202
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            meta[mode] += 1
        if func in save and not (func == torch.ops.aten.mm.default and meta[mode] % 2 == 0):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE
    return policy


@dataclass(frozen=True)
class Count:
    alive_bytes: int        # storages alive after the forward (+ the input when kept)
    hooked_bytes: int       # unique storages packed by saved_tensors_hooks (no-checkpoint only; else -1)
    input_kept: bool


def _static_storages(block: nn.Module) -> set[int]:
    """Parameters, buffers and plain tensor constants (the RoPE table): not activations."""
    consts = [t for t in vars(block).values() if isinstance(t, torch.Tensor)]
    return {StorageWeakRef(t.untyped_storage()).cdata for t in (*block.parameters(), *block.buffers(), *consts)}


def measure(block: nn.Module, x: torch.Tensor, policy: str) -> Count:
    """Bytes the backward of ``block(x)`` needs, kept in memory after its forward (module docstring)."""
    if policy not in POLICIES:
        raise ValueError(f"policy {policy!r} not in {POLICIES}")
    static = _static_storages(block)
    x_key = StorageWeakRef(x.untyped_storage()).cdata
    packed: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        packed[StorageWeakRef(st).cdata] = st.nbytes()
        return t

    tracker = _StorageTracker()
    block.checkpoint_core = policy == "selective"
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), tracker:
        if policy in ("none", "selective"):
            out = block(x)
        elif policy == "full":
            out = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False)
        else:
            ctx_fn = partial(create_selective_checkpoint_contexts, torchtitan_op_policy())
            out = checkpoint(block, x, use_reentrant=False, preserve_rng_state=False, context_fn=ctx_fn)
    out_key = StorageWeakRef(out.untyped_storage()).cdata
    alive = sum(nbytes for key, (ref, nbytes) in tracker.refs.items()
                if not ref.expired() and key not in static and key != out_key)
    input_kept = policy in ("full", "selective-op") or x_key in packed
    alive += x.untyped_storage().nbytes() if input_kept else 0
    hooked = sum(n for k, n in packed.items() if k not in static) if policy == "none" else -1
    block.checkpoint_core = False
    del out
    return Count(alive, hooked, input_kept)


# ---------------------------------------------------------------------------------------------
# the table

@dataclass(frozen=True)
class Shape:
    """One block shape: ``kind`` llama | gpt."""

    kind: str
    batch: int
    seq: int
    hidden: int
    heads: int
    kv_heads: int = 0
    ffn: int = 0
    head_dim: int = 0       # 0: hidden / heads
    qk_norm: bool = False
    act: str = ""           # "": swiglu (llama) | gelu (gpt); geglu (llama); relu, squared-relu (gpt)
    sandwich: bool = False
    window: int = 0

    @property
    def ffn_act(self) -> str:
        return self.act or ("swiglu" if self.kind == "llama" else "gelu")

    def build(self, dtype: torch.dtype) -> tuple[nn.Module, torch.Tensor]:
        torch.manual_seed(0)
        if self.kind == "llama":
            block: nn.Module = LlamaBlock(self.hidden, self.heads, self.kv_heads or self.heads,
                                          self.ffn or 4 * self.hidden, self.seq, self.head_dim, self.qk_norm,
                                          self.ffn_act, self.sandwich, self.window)
            x = torch.randn(self.batch, self.seq, self.hidden)
        else:
            dropout = 0.0 if self.ffn_act == "squared-relu" else 0.1   # clustersim.compute.conventions
            block = GptBlock(self.hidden, self.heads, self.seq, dropout, self.ffn_act)
            x = torch.randn(self.seq, self.batch, self.hidden)
        block = block.to(dtype)
        return block, x.to(dtype).requires_grad_(True)


# small shapes (seconds on two CPU cores) that still separate every term: GQA and MHA, several
# batch / sequence / width ratios (the s^2 terms of the unfused core against the s h terms)
SHAPES = (
    Shape("llama", batch=2, seq=64, hidden=128, heads=4, kv_heads=2, ffn=352),
    Shape("llama", batch=1, seq=96, hidden=192, heads=6, kv_heads=6, ffn=512),
    Shape("gpt", batch=2, seq=64, hidden=128, heads=4),
    Shape("gpt", batch=3, seq=96, hidden=64, heads=2),
    # today's families: Qwen3 (head_dim 128-style wider heads, QK-norm), Gemma 3 (GeGLU, sandwich
    # norms, a sliding window), a sliding window alone, Nemotron-4 (squared ReLU) and ReLU
    Shape("llama", batch=2, seq=64, hidden=128, heads=4, kv_heads=2, ffn=352, head_dim=48, qk_norm=True),
    Shape("llama", batch=1, seq=96, hidden=96, heads=4, kv_heads=2, ffn=256, head_dim=32, qk_norm=True,
          act="geglu", sandwich=True, window=32),
    Shape("llama", batch=2, seq=64, hidden=128, heads=4, kv_heads=4, ffn=352, window=16),
    Shape("gpt", batch=2, seq=64, hidden=128, heads=4, act="squared-relu"),
    Shape("gpt", batch=2, seq=64, hidden=128, heads=4, act="relu"),
)
# the policies each block runs: torchtitan's per-op policy is written for its bias-free Llama block
POLICIES_OF = {"llama": ("none", "selective", "selective-op", "full"), "gpt": ("none", "selective", "full")}


def count(shape: Shape, dtype: str, policy: str) -> Count:
    block, x = shape.build(DTYPES[dtype])
    return measure(block, x, policy)


def model_bytes(shape: Shape, dtype: str, policy: str) -> float:
    """clustersim's per-layer bytes for this block as it runs on CPU (clustersim.memory.saved)."""
    from clustersim.memory.saved import cpu_kernels, saved_bytes
    from clustersim.parallel.layout import ParallelLayout
    from clustersim.workload.model_spec import ModelSpec

    model = ModelSpec(name=f"{shape.kind}-block", layers=1, hidden=shape.hidden, heads=shape.heads, vocab=2,
                      seq_len=shape.seq, kv_heads=shape.kv_heads or shape.heads, ffn_hidden=shape.ffn or 4 * shape.hidden,
                      ffn_act=shape.ffn_act, head_dim=shape.head_dim, qk_norm=shape.qk_norm,
                      sandwich_norm=shape.sandwich, attention_pattern="sliding" if shape.window else "full",
                      attention_window=shape.window)
    kernels = cpu_kernels(dtype, attention="flash" if shape.kind == "llama" else "standard")
    return saved_bytes(model, ParallelLayout(micro_batch=shape.batch), dtype, kernels, policy)


def table() -> list[tuple[Shape, str, str, Count, float]]:
    """(shape, dtype, policy, measured count, model bytes) for every shape, dtype and policy."""
    return [(shape, dtype, policy, count(shape, dtype, policy), model_bytes(shape, dtype, policy))
            for shape in SHAPES for dtype in DTYPES for policy in POLICIES_OF[shape.kind]]


def main() -> None:
    print("| block | b x s x h (heads/kv, ffn) | dtype | policy | measured bytes | model bytes | error |")
    print("|---|---|---|---|---:|---:|---:|")
    for shape, dtype, policy, c, model in table():
        dims = f"{shape.batch} x {shape.seq} x {shape.hidden} ({shape.heads}/{shape.kv_heads or shape.heads}, " \
               f"{shape.ffn or 4 * shape.hidden})"
        extra = [f"head_dim {shape.head_dim}" if shape.head_dim else "", "QK-norm" if shape.qk_norm else "",
                 shape.act, "sandwich" if shape.sandwich else "", f"window {shape.window}" if shape.window else ""]
        kind = shape.kind + "".join(f", {e}" for e in extra if e)
        print(f"| {kind} | {dims} | {dtype} | {policy} | {c.alive_bytes:,} | {model:,.0f} | "
              f"{model / c.alive_bytes - 1:+.2%} |")


if __name__ == "__main__":
    main()
