"""The model being trained, as a frozen spec. Field names follow the scenario file (CONTRACT.md §1, §4)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clustersim.hashcache import HashMemo, cache_hash

FFN_ACTS = ("gelu", "swiglu")
ATTENTION_KINDS = ("mha", "gqa", "mla")
TOKEN_DISPATCHERS = ("alltoall", "flex")


@cache_hash
@dataclass(frozen=True, slots=True)
class ModelSpec(HashMemo):
    """A decoder-only transformer.

    ``kv_heads`` < ``heads`` is grouped-query attention; ``ffn_act`` "swiglu" has three MLP
    matrices (gate, up, down), "gelu" two.

    Attention (``attention``): "mha" / "gqa" (resolved from kv_heads when left empty) or "mla",
    DeepSeek-V2/V3's multi-head latent attention (arXiv 2405.04434 §2.1): queries through a
    ``q_lora_rank`` latent (0 = a plain query projection, as DeepSeek-V2-Lite), keys and values
    through a ``kv_lora_rank`` latent, query/key heads of ``qk_nope_head_dim + qk_rope_head_dim``
    and value heads of ``v_head_dim``.

    Mixture of experts (``moe_experts`` > 0; DeepSeekMoE, arXiv 2401.06066, and Megatron-Core MoE
    names): every layer after the first ``moe_first_dense_layers`` (dense MLPs of width
    ``ffn_hidden``) replaces its MLP by ``moe_experts`` routed experts of width
    ``moe_expert_ffn_hidden`` (0 = ``ffn_hidden``), ``moe_top_k`` of them per token, plus
    ``moe_shared_experts`` always-active experts of the same width. ``moe_capacity_factor`` > 0
    caps each expert at that multiple of its average load (0 = dropless); ``moe_imbalance`` is
    the load of the busiest expert-parallel rank over the average (1 = perfectly balanced).
    Node-limited routing (DeepSeek-V3 §2.1.2; Megatron ``--moe-router-num-groups`` /
    ``--moe-router-group-topk``): the experts form ``moe_router_num_groups`` groups and a token
    picks experts from at most ``moe_router_group_topk`` of them (0 = no limit).
    ``moe_token_dispatcher``: "alltoall" (Megatron's NCCL all-to-all dispatcher) or "flex"
    (Megatron's flex dispatcher with the DeepEP backend: one copy per destination node over the
    scale-out fabric, forwarded over NVLink). ``mtp_layers``: multi-token-prediction modules
    (DeepSeek-V3 §2.2, Megatron ``--mtp-num-layers``), each one more layer plus the output head
    on the last pipeline stage.
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
    moe_expert_ffn_hidden: int = 0  # 0 -> ffn_hidden
    moe_first_dense_layers: int = 0
    moe_capacity_factor: float = 0.0  # 0 -> dropless
    moe_imbalance: float = 1.0
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

    def __post_init__(self) -> None:
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.moe_expert_ffn_hidden == 0:
            object.__setattr__(self, "moe_expert_ffn_hidden", self.ffn_hidden)
        if not self.attention:
            object.__setattr__(self, "attention", "gqa" if self.kv_heads < self.heads else "mha")

    # -- attention ------------------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    @property
    def head_dim(self) -> int:
        """Width of one query/key head (MLA: nope + rope part)."""
        if self.is_mla:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.hidden // self.heads

    @property
    def value_head_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of K (and of V): kv_heads * head_dim (MLA: every head has its own K and V)."""
        return self.kv_heads * self.head_dim

    def attention_params(self) -> int:
        """Attention projections of one layer (biases ignored; MLA: with its two latent norms)."""
        h = self.hidden
        if not self.is_mla:
            return h * (h + 2 * self.kv_hidden) + h * h
        qk = self.heads * self.head_dim
        q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * qk if self.q_lora_rank else h * qk
        kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank \
            + self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + self.heads * self.v_head_dim * h

    # -- MLP / MoE ---------------------------------------------------------------------------
    @property
    def num_mlp_matrices(self) -> int:
        return 3 if self.ffn_act == "swiglu" else 2

    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

    @property
    def num_moe_layers(self) -> int:
        return self.layers - self.moe_first_dense_layers if self.is_moe else 0

    @property
    def num_dense_layers(self) -> int:
        return self.layers - self.num_moe_layers

    def is_moe_layer(self, index: int) -> bool:
        """Whether transformer layer ``index`` (0-based) has a MoE MLP."""
        return self.is_moe and index >= self.moe_first_dense_layers

    def mlp_params(self) -> int:
        """One dense MLP of width ffn_hidden."""
        return self.num_mlp_matrices * self.hidden * self.ffn_hidden

    def expert_params(self) -> int:
        """One (routed or shared) expert of width moe_expert_ffn_hidden."""
        return self.num_mlp_matrices * self.hidden * self.moe_expert_ffn_hidden

    def moe_mlp_params(self) -> int:
        """Routed and shared experts and the router of one MoE layer."""
        return (self.moe_experts + self.moe_shared_experts) * self.expert_params() + self.hidden * self.moe_experts

    def layer_params(self, moe: bool | None = None) -> int:
        """One transformer layer: attention, MLP (all experts and the router for MoE), two norms.
        ``moe`` None: a MoE layer for a MoE model."""
        moe = self.is_moe if moe is None else moe
        mlp = self.moe_mlp_params() if moe else self.mlp_params()
        return self.attention_params() + mlp + 4 * self.hidden

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def mtp_params(self) -> int:
        """One multi-token-prediction module (DeepSeek-V3 §2.2): two RMSNorms, the 2h -> h
        projection and one transformer layer; embedding and output head are shared."""
        return 2 * self.hidden + 2 * self.hidden * self.hidden + self.layer_params()

    def total_params(self) -> int:
        """All parameters; an untied output layer counts a second vocab x hidden matrix."""
        out = 0 if self.tie_embeddings else self.vocab * self.hidden
        layers = self.num_moe_layers * self.layer_params(True) + self.num_dense_layers * self.layer_params(False)
        return layers + self.embedding_params() + out + 2 * self.hidden + self.mtp_layers * self.mtp_params()

    def active_params(self) -> int:
        """Parameters one token passes through (routed experts: top_k of them; MTP excluded)."""
        out = 0 if self.tie_embeddings else self.vocab * self.hidden
        moe = self.attention_params() + (self.moe_top_k + self.moe_shared_experts) * self.expert_params() \
            + self.hidden * self.moe_experts + 4 * self.hidden
        layers = self.num_moe_layers * moe + self.num_dense_layers * self.layer_params(False)
        return layers + self.embedding_params() + out + 2 * self.hidden


def model_from_fields(name: str, fields: dict[str, Any]) -> ModelSpec:
    """A ModelSpec from the fields of a scenario's ``model:`` section (or a preset's), by their file names."""
    moe = fields.get("moe") or {}
    if hasattr(moe, "model_dump"):
        moe = moe.model_dump()
    return ModelSpec(
        name=name,
        layers=fields["layers"], hidden=fields["hidden"], heads=fields["heads"], vocab=fields["vocab"],
        seq_len=fields["seq_len"], kv_heads=fields.get("kv_heads") or 0, ffn_hidden=fields.get("ffn_hidden") or 0,
        ffn_act=fields.get("ffn_act") or "gelu", moe_experts=moe.get("experts", 0) or 0,
        moe_top_k=moe.get("top_k", 0) or 0, tie_embeddings=bool(fields.get("tie_embeddings") or False),
        moe_shared_experts=moe.get("shared_experts") or 0,
        moe_expert_ffn_hidden=moe.get("expert_ffn_hidden") or 0,
        moe_first_dense_layers=moe.get("first_dense_layers") or 0,
        moe_capacity_factor=float(moe.get("capacity_factor") or 0.0),
        moe_imbalance=float(moe.get("imbalance") or 1.0),
        moe_router_num_groups=moe.get("router_num_groups") or 0,
        moe_router_group_topk=moe.get("router_group_topk") or 0,
        moe_token_dispatcher=moe.get("token_dispatcher") or "alltoall",
        attention=fields.get("attention") or "",
        q_lora_rank=fields.get("q_lora_rank") or 0, kv_lora_rank=fields.get("kv_lora_rank") or 0,
        qk_rope_head_dim=fields.get("qk_rope_head_dim") or 0, qk_nope_head_dim=fields.get("qk_nope_head_dim") or 0,
        v_head_dim=fields.get("v_head_dim") or 0, mtp_layers=fields.get("mtp_layers") or 0,
    )
