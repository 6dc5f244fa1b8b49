"""The model being trained, as a frozen spec. Field names follow the scenario file (docs/scenario.md)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

from clustersim.hashcache import HashMemo, cache_hash

FFN_ACTS = ("gelu", "swiglu", "geglu", "squared-relu", "relu")
GATED_ACTS = ("swiglu", "geglu")          # three MLP matrices (gate, up, down)
LAYERNORM_ACTS = ("gelu", "relu", "squared-relu")  # families that normalise with LayerNorm; the rest RMSNorm
ATTENTION_KINDS = ("mha", "gqa", "mla")
ATTENTION_PATTERNS = ("full", "sliding", "chunked")
TOKEN_DISPATCHERS = ("alltoall", "flex")


class LayerKind(NamedTuple):
    """What sets one transformer layer's cost apart from another's: a MoE MLP (else dense) and a
    local attention span (the model's sliding window or chunk; else full causal attention)."""

    moe: bool
    local: bool = False


@cache_hash
@dataclass(frozen=True, slots=True)
class ModelSpec(HashMemo):
    """A decoder-only transformer.

    ``kv_heads`` < ``heads`` is grouped-query attention; ``ffn_act`` "swiglu" has three MLP
    matrices (gate, up, down), "gelu" two; "geglu" (Gemma: GELU-gated) has three, "relu" and
    "squared-relu" (Nemotron-4, So et al. 2021 arXiv 2109.08668 "Primer") two.

    Attention widths (``head_dim``, 0 = hidden / heads): queries are ``heads x head_dim`` wide and
    keys and values ``kv_heads x head_dim`` (Qwen3, Gemma 3, gpt-oss and GLM-4.5 state a head_dim
    whose product with the heads differs from the hidden size). ``qk_norm``: an RMSNorm over each
    query and key head before RoPE (Qwen3; OLMo 2). ``attention_sinks``: a learned logit per head
    added to the softmax denominator (gpt-oss). ``sandwich_norm``: a second norm after the
    attention and after the MLP, before the residual adds (Gemma 2/3).
    ``dropout``: whether the model trains with attention and hidden dropout (masks written and
    kept for the backward); None leaves it to the activation family (clustersim.compute.conventions).

    Attention pattern (``attention_pattern``): "full" causal attention in every layer, or local
    layers of span ``attention_window``: "sliding" (each query sees the last W keys, Mistral 7B
    arXiv 2310.06825 §2) or "chunked" (the sequence is cut into chunks of W tokens and each query
    sees the keys of its own chunk, Llama 4's attention_chunk_size). ``global_every`` N > 0 makes
    layers N-1, 2N-1, ... (0-based) full-attention layers between the local ones: Gemma 3's
    sliding_window_pattern (N = 6), gpt-oss's alternation (N = 2), Llama 4's NoPE layers (N = 4).

    Attention (``attention``): "mha" / "gqa" (resolved from kv_heads when left empty) or "mla",
    DeepSeek-V2/V3's multi-head latent attention (arXiv 2405.04434 §2.1): queries through a
    ``q_lora_rank`` latent (0 = a plain query projection, as DeepSeek-V2-Lite), keys and values
    through a ``kv_lora_rank`` latent, query/key heads of ``qk_nope_head_dim + qk_rope_head_dim``
    and value heads of ``v_head_dim``.

    Mixture of experts (``moe_experts`` > 0; DeepSeekMoE, arXiv 2401.06066, and Megatron-Core MoE
    names): every layer after the first ``moe_first_dense_layers`` (dense MLPs of width
    ``ffn_hidden``) replaces its MLP by ``moe_experts`` routed experts of width
    ``moe_expert_ffn_hidden`` (0 = ``ffn_hidden``), ``moe_top_k`` of them per token, plus
    ``moe_shared_experts`` always-active experts of the same width, or shared experts of total width
    ``moe_shared_ffn_hidden`` (Megatron-Core's ``--moe-shared-expert-intermediate-size``, the
    total size of its one SharedExpertMLP; 0 = ``moe_shared_experts x moe_expert_ffn_hidden``).
    ``moe_capacity_factor`` > 0
    caps each expert at that multiple of its average load (0 = dropless); ``moe_imbalance`` is
    the load of the busiest expert-parallel rank over the average (1 = perfectly balanced).
    ``moe_pad_to_capacity``: every expert's input is padded to its capacity (Megatron
    ``--moe-pad-expert-input-to-capacity``), so every rank computes and exchanges the capacity.
    ``moe_every`` N > 1: layer i (0-based, counted over the whole stack) is MoE when (i + 1) is a
    multiple of N and i is past the first dense ones: layers N-1, 2N-1, ... from the first
    MoE-eligible one on (Llama 4 Maverick's interleave_moe_layer_step 2, Qwen-MoE's
    decoder_sparse_step; Megatron's --moe-layer-freq as a list). ``moe_pattern``: any other
    per-layer pattern, one entry per layer (1: MoE, 0: dense; Megatron's --moe-layer-freq list
    form), for the layouts the first_dense/every rule cannot state (DeepSeek's moe_layer_freq N > 1,
    MoE where i % N == 0; Qwen-MoE's mlp_only_layers; Llama 4's moe_layers; Megatron's int N, MoE
    on layers 0, N, 2N, ...); empty: the rule. ``is_moe_layer`` is the one place that says which
    layers are MoE; ``moe_layer_fields`` turns a pattern into the fields that state it.
    Node-limited routing (DeepSeek-V3 §2.1.2; Megatron ``--moe-router-num-groups`` /
    ``--moe-router-group-topk``): the experts form ``moe_router_num_groups`` groups and a token
    picks experts from at most ``moe_router_group_topk`` of them (0 = no limit).
    ``moe_token_dispatcher``: "alltoall" (Megatron's NCCL all-to-all dispatcher) or "flex"
    (Megatron's flex dispatcher with the DeepEP backend: one copy per destination node over the
    scale-out fabric, forwarded over NVLink). ``mtp_layers``: multi-token-prediction modules
    (DeepSeek-V3 §2.2, Megatron ``--mtp-num-layers``), each one more layer plus the output head
    on the last pipeline stage. ``vision_params``: a vision tower that the owner's published total
    counts (Llama 4's 109B and 400B): counted in ``main_params`` and the checkpoint, never
    simulated (no compute, no memory: clustersim times the language model).

    Element-wise work the shape alone does not give: ``activation_clamp`` > 0 clamps the two
    halves of a gated activation's input before it (the gate half from above, the linear half on
    both sides, at that value: gpt-oss's ``swiglu_limit`` 7.0; 0 = no clamp), priced as the
    kernels the frameworks run for it (clustersim.compute.glu_clamp). ``moe_expert_bias``: the
    routed experts' linear layers carry biases (gpt-oss's ``gate_up_proj_bias`` and
    ``down_proj_bias``), whose fc2 bias Megatron-Core adds expert by expert
    (clustersim.compute.expert_bias).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    kv_heads: int = 0  # 0 -> heads
    ffn_hidden: int = 0  # 0 -> 4 * hidden
    ffn_act: str = "gelu"
    moe_experts: int = 0
    moe_top_k: int = 0
    tie_embeddings: bool = False
    moe_shared_experts: int = 0
    moe_shared_ffn_hidden: int = 0  # total width of the shared experts; 0 -> moe_shared_experts x moe_expert_ffn_hidden
    moe_expert_ffn_hidden: int = 0  # 0 -> ffn_hidden
    moe_first_dense_layers: int = 0
    moe_capacity_factor: float = 0.0  # 0 -> dropless
    moe_imbalance: float = 1.0
    moe_pad_to_capacity: bool = False
    moe_router_num_groups: int = 0
    moe_router_group_topk: int = 0
    moe_token_dispatcher: str = "alltoall"
    attention: str = ""  # "" -> "gqa" if kv_heads < heads else "mha"
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0
    head_dim: int = 0  # 0 -> hidden // heads (MLA: qk_nope_head_dim + qk_rope_head_dim)
    qk_norm: bool = False
    attention_pattern: str = "full"
    attention_window: int = 0
    global_every: int = 0
    attention_sinks: bool = False
    sandwich_norm: bool = False
    moe_every: int = 1
    dropout: bool | None = None  # None: the activation family's convention (clustersim.compute.conventions)
    notes: tuple[str, ...] = ()  # how the shape was read (an HF config, defaulted fields); shown in the report
    vision_params: int = 0  # a vision tower the owner's total counts; not simulated
    activation_clamp: float = 0.0  # clamp of a gated activation's halves (gpt-oss swiglu_limit); 0 = none
    moe_expert_bias: bool = False  # biases on the routed experts' linear layers (gpt-oss)
    moe_pattern: tuple[int, ...] = ()  # per layer 1 = MoE, 0 = dense; () -> moe_first_dense_layers / moe_every

    def __post_init__(self) -> None:
        if len(self.moe_pattern) > self.layers:   # a shortened copy of the model keeps its first layers' kinds
            object.__setattr__(self, "moe_pattern", self.moe_pattern[:self.layers])
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.moe_expert_ffn_hidden == 0:
            object.__setattr__(self, "moe_expert_ffn_hidden", self.ffn_hidden)
        if self.moe_shared_ffn_hidden == 0:
            object.__setattr__(self, "moe_shared_ffn_hidden", self.moe_shared_experts * self.moe_expert_ffn_hidden)
        if not self.attention:
            object.__setattr__(self, "attention", "gqa" if self.kv_heads < self.heads else "mha")
        if self.attention == "mla":
            object.__setattr__(self, "head_dim", self.qk_nope_head_dim + self.qk_rope_head_dim)
        elif self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.hidden // self.heads)

    # -- attention ------------------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.head_dim

    @property
    def q_width(self) -> int:
        """Width of the queries (and of the attention output): heads * head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_hidden(self) -> int:
        """Width of K (and of V): kv_heads * head_dim (MLA: every head has its own K and V)."""
        return self.kv_heads * self.head_dim

    def attention_params(self) -> int:
        """Attention projections of one layer (biases ignored; MLA: with its two latent norms)."""
        h = self.hidden
        if not self.is_mla:
            q = self.q_width
            extra = (2 * self.head_dim if self.qk_norm else 0) + (self.heads if self.attention_sinks else 0)
            return h * (q + 2 * self.kv_hidden) + q * h + extra
        qk = self.heads * self.head_dim
        q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * qk if self.q_lora_rank else h * qk
        kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank \
            + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + self.heads * self.v_head_dim * h

    # -- MLP / MoE ---------------------------------------------------------------------------
    @property
    def num_mlp_matrices(self) -> int:
        return 3 if self.ffn_act in GATED_ACTS else 2

    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

    @property
    def num_moe_layers(self) -> int:
        if not self.is_moe:
            return 0
        if self.moe_every <= 1 and not self.moe_pattern:
            return self.layers - self.moe_first_dense_layers
        return sum(n for kind, n in self.layer_kind_counts() if kind.moe)

    @property
    def num_dense_layers(self) -> int:
        return self.layers - self.num_moe_layers

    def is_moe_layer(self, index: int) -> bool:
        """Whether transformer layer ``index`` (0-based) has a MoE MLP: the explicit ``moe_pattern``
        where one is given, else the first_dense/every rule (``moe_rule``). Every consumer (parameter
        counts, layer kinds per pipeline stage, the sweep's profiles, memory) asks this."""
        if not self.is_moe:
            return False
        if self.moe_pattern:
            return index < len(self.moe_pattern) and self.moe_pattern[index] == 1
        return moe_rule(index, self.moe_first_dense_layers, self.moe_every)

    def moe_layer_flags(self) -> tuple[bool, ...]:
        """``is_moe_layer`` of every layer, in order (cached)."""
        return _moe_flags(self)

    @property
    def has_local_attention(self) -> bool:
        return self.attention_pattern != "full"

    def is_local_layer(self, index: int) -> bool:
        """Whether layer ``index`` (0-based) attends over the local span (sliding window or chunk)."""
        if not self.has_local_attention:
            return False
        return not (self.global_every and (index + 1) % self.global_every == 0)

    def layer_kind(self, index: int) -> LayerKind:
        return LayerKind(self.is_moe_layer(index), self.is_local_layer(index))

    def layer_kind_counts(self) -> tuple[tuple[LayerKind, int], ...]:
        """How many layers of each kind, MoE before dense and full attention before local ones
        (the kinds present only)."""
        return _kind_counts(self)

    def layers_covering_kinds(self) -> int:
        """The fewest leading layers that hold one layer of every kind the model has, ending on a
        MoE layer when the model has one (what a shortened copy of the model must keep)."""
        seen: set[LayerKind] = set()
        wanted = {k for k, _ in self.layer_kind_counts()}
        n = 0
        for i in range(self.layers):
            seen.add(self.layer_kind(i))
            n = i + 1
            if seen == wanted and (not self.is_moe or self.is_moe_layer(i)):
                break
        return n

    def mlp_params(self) -> int:
        """One dense MLP of width ffn_hidden."""
        return self.num_mlp_matrices * self.hidden * self.ffn_hidden

    def expert_params(self) -> int:
        """One (routed or shared) expert of width moe_expert_ffn_hidden."""
        return self.num_mlp_matrices * self.hidden * self.moe_expert_ffn_hidden

    def shared_expert_params(self) -> int:
        """The shared experts of one MoE layer: a dense MLP of width moe_shared_ffn_hidden."""
        return self.num_mlp_matrices * self.hidden * self.moe_shared_ffn_hidden

    def moe_mlp_params(self) -> int:
        """Routed and shared experts and the router of one MoE layer."""
        return self.moe_experts * self.expert_params() + self.shared_expert_params() + self.hidden * self.moe_experts

    def layer_params(self, moe: bool | None = None) -> int:
        """One transformer layer: attention, MLP (all experts and the router for MoE), two norms.
        ``moe`` None: a MoE layer for a MoE model."""
        moe = self.is_moe if moe is None else moe
        mlp = self.moe_mlp_params() if moe else self.mlp_params()
        return self.attention_params() + mlp + self.norm_params()

    @property
    def uses_layernorm(self) -> bool:
        """LayerNorm (weight and bias) rather than RMSNorm (weight only), by activation family:
        GPT-3, OPT and Nemotron-4 normalise with LayerNorm; Llama, Mistral, Qwen3, gpt-oss, Gemma 3
        and DeepSeek with RMSNorm (clustersim.compute.conventions has the family table)."""
        return self.ffn_act in LAYERNORM_ACTS

    def norm_width_params(self) -> int:
        """One norm over the hidden width: weight and bias (LayerNorm) or weight (RMSNorm)."""
        return (2 if self.uses_layernorm else 1) * self.hidden

    def norm_params(self) -> int:
        """The norms of one layer: two, four with sandwich norms."""
        return (4 if self.sandwich_norm else 2) * self.norm_width_params()

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def end_params(self) -> int:
        """Outside the layers: the embedding, the final norm and an untied output layer (a second
        vocab x hidden matrix)."""
        out = 0 if self.tie_embeddings else self.vocab * self.hidden
        return self.embedding_params() + self.norm_width_params() + out

    def mtp_params(self) -> int:
        """One multi-token-prediction module (DeepSeek-V3 §2.2): two RMSNorms, the 2h -> h
        projection and one transformer layer; embedding and output head are shared."""
        return self.mtp_extra_params() + self.layer_params()

    def mtp_extra_params(self, tp: int = 1) -> int:
        """What one MTP module holds beside its transformer layer, on one of ``tp`` ranks: its two
        norms (whole on every rank) and its 2h -> h projection (column-parallel: its h outputs
        split over tp)."""
        return 2 * self.norm_width_params() + 2 * self.hidden * -(-self.hidden // tp)

    def main_params(self) -> int:
        """The parameters of the model as its owner counts them: every layer and the ends
        (``end_params``), without the multi-token-prediction modules (DeepSeek-V3 model card:
        "685B = 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module
        weights"; GLM-4.5-Air's 106B likewise leaves its MTP layer out), with a vision tower
        where the owner's total counts it (``vision_params``: Llama 4's model card)."""
        layers = self.num_moe_layers * self.layer_params(True) + self.num_dense_layers * self.layer_params(False)
        return layers + self.end_params() + self.vision_params

    def mtp_modules_params(self) -> int:
        """All ``mtp_layers`` multi-token-prediction modules (0 without MTP): ``model.mtp_params``."""
        return self.mtp_layers * self.mtp_params()

    def total_params(self) -> int:
        """Every parameter trained and stored: the main model and the MTP modules."""
        return self.main_params() + self.mtp_modules_params()

    def active_params(self) -> int:
        """Parameters one text token passes through (routed experts: top_k of them; MTP and the vision
        tower excluded: ``main_params() - vision_params`` for a dense model)."""
        moe = self.attention_params() + self.moe_top_k * self.expert_params() + self.shared_expert_params() \
            + self.hidden * self.moe_experts + self.norm_params()
        layers = self.num_moe_layers * moe + self.num_dense_layers * self.layer_params(False)
        return layers + self.end_params()

    def active_params_without_embedding(self) -> int:
        """``active_params`` less an untied embedding table, of which a token reads one row (the
        count gpt-oss's model card gives as "active", and DeepSeek's "37B activated" rounds); a
        tied table stays: every token multiplies by it as the output layer."""
        return self.active_params() - (0 if self.tie_embeddings else self.embedding_params())


def moe_rule(index: int, first_dense: int, every: int) -> bool:
    """The scenario's rule: layer ``index`` (0-based) is MoE when it is past the first ``first_dense``
    layers and (index + 1) is a multiple of ``every`` (layers N-1, 2N-1, ...: Llama 4's
    interleave_moe_layer_step, HF Llama4TextConfig moe_layers = range(N - 1, layers, N))."""
    return index >= first_dense and (index + 1) % max(1, every) == 0


def moe_layer_fields(flags: list[bool] | list[int] | tuple[int, ...]) -> dict[str, object] | None:
    """The ``model.moe`` fields that state a per-layer MoE pattern (1 / True: MoE): the rule's
    ``first_dense_layers`` and ``every`` where it gives exactly these layers (defaults left out;
    leading dense layers preferred as 0, else as the first MoE layer's index), else the explicit
    ``pattern``. {} when every layer is MoE; None when no layer is. Deterministic: one pattern, one
    answer (the importers and the scenario's own ``pattern`` go through it, so a pattern the rule
    can state is stored as the rule)."""
    pattern = [1 if f else 0 for f in flags]
    on = [i for i, x in enumerate(pattern) if x]
    if not on:
        return None
    gaps = {b - a for a, b in zip(on, on[1:], strict=False)}
    # under the rule consecutive MoE layers are ``every`` apart; a single MoE layer at index j fits
    # any ``every`` dividing j + 1
    everys = sorted(gaps) if len(gaps) == 1 else [] if gaps else [d for d in range(1, on[0] + 2) if (on[0] + 1) % d == 0]
    for every in everys:
        for first in sorted({0, on[0]}):
            if [int(moe_rule(i, first, every)) for i in range(len(pattern))] == pattern:
                return {**({"first_dense_layers": first} if first else {}), **({"every": every} if every > 1 else {})}
    return {"pattern": pattern}


@functools.lru_cache(maxsize=1024)
def _moe_flags(model: ModelSpec) -> tuple[bool, ...]:
    return tuple(model.is_moe_layer(i) for i in range(model.layers))


@functools.lru_cache(maxsize=1024)
def _kind_counts(model: ModelSpec) -> tuple[tuple[LayerKind, int], ...]:
    counts: dict[LayerKind, int] = {}
    for i in range(model.layers):
        kind = model.layer_kind(i)
        counts[kind] = counts.get(kind, 0) + 1
    order = (LayerKind(True, False), LayerKind(False, False), LayerKind(True, True), LayerKind(False, True))
    return tuple((k, counts[k]) for k in order if k in counts)


def scenario_key(spec_field: str) -> str:
    """The scenario key of a ModelSpec field: ``moe_X`` is ``model.moe.X`` (MoeSection), any other
    ``model.X`` (ModelSection); a message names what the user writes, not the spec's field."""
    return f"model.moe.{spec_field.removeprefix('moe_')}" if spec_field.startswith("moe_") else f"model.{spec_field}"
