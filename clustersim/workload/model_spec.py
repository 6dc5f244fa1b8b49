"""The model being trained, as a frozen spec. Field names follow the scenario file (CONTRACT.md §1)."""

from __future__ import annotations

from dataclasses import dataclass

FFN_ACTS = ("gelu", "swiglu")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer.

    ``kv_heads`` < ``heads`` is grouped-query attention; ``ffn_act`` "swiglu" has three MLP
    matrices (gate, up, down), "gelu" two. ``moe_experts`` = 0 is a dense model; otherwise every
    layer's MLP is replaced by ``moe_experts`` experts of width ``ffn_hidden`` with ``moe_top_k``
    routed per token.
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

    def __post_init__(self) -> None:
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of K (and of V): kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def num_mlp_matrices(self) -> int:
        return 3 if self.ffn_act == "swiglu" else 2

    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer (biases ignored)."""
        return self.hidden * (self.hidden + 2 * self.kv_hidden) + self.hidden * self.hidden

    def mlp_params(self) -> int:
        """One dense MLP (one expert)."""
        return self.num_mlp_matrices * self.hidden * self.ffn_hidden

    def layer_params(self) -> int:
        """One transformer layer: attention, MLP (all experts and the router for MoE), two norms."""
        experts = max(1, self.moe_experts)
        router = self.hidden * self.moe_experts
        return self.attention_params() + experts * self.mlp_params() + router + 4 * self.hidden

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def total_params(self) -> int:
        """All parameters; an untied output layer counts a second vocab x hidden matrix."""
        out = 0 if self.tie_embeddings else self.vocab * self.hidden
        return self.layers * self.layer_params() + self.embedding_params() + out + 2 * self.hidden
