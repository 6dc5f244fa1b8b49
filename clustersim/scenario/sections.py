"""The scenario file's sections as pydantic models: keys, types and bounds (unknown keys are errors).

What spans fields (the product rule, divisibility) is checked after them (clustersim.scenario.checks).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from clustersim.compute.precision import TRAINING_DTYPES
from clustersim.frameworks import DEFAULT_FRAMEWORK, REDUCE_DTYPES
from clustersim.goodput.config import GoodputSection
from clustersim.limits import (
    MAX_COUNT,
    MAX_EXPERTS,
    MAX_GPUS,
    MAX_LAYERS,
    MAX_MODEL_DIM,
    MAX_NODE_GROUPS,
    MAX_OVERSUBSCRIPTION,
    MAX_PUE,
    MIN_PUE,
)
from clustersim.scenario.faults import FaultsSection
from clustersim.scenario.node_groups import ClusterGroupSection, NodeHardware
from clustersim.section_model import Section

DTYPES = ("bf16", "fp16", "fp8", "fp4", "fp32")

PosInt = Field(ge=1)




class MoeSection(Section):
    experts: int = Field(0, ge=0, le=MAX_EXPERTS)
    top_k: int = Field(0, ge=0, le=MAX_EXPERTS)
    shared_experts: int = Field(0, ge=0, le=MAX_EXPERTS)
    shared_ffn_hidden: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)  # None: shared_experts x expert_ffn_hidden
    expert_ffn_hidden: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)  # None: model.ffn_hidden
    first_dense_layers: int = Field(0, ge=0, le=MAX_LAYERS)
    capacity_factor: float | None = Field(None, gt=0)      # None: dropless
    pad_to_capacity: bool = False    # every expert's input padded to its capacity (needs capacity_factor)
    imbalance: float = Field(1.0, ge=1.0, le=MAX_EXPERTS)   # at most every token at one expert
    router_num_groups: int = Field(0, ge=0, le=MAX_EXPERTS)  # node-limited routing (Megatron names)
    router_group_topk: int = Field(0, ge=0, le=MAX_EXPERTS)
    token_dispatcher: Literal["alltoall", "flex"] = "alltoall"
    every: int = Field(1, ge=1, le=MAX_LAYERS)      # every N-th layer after the dense ones is MoE (Llama 4)
    # any per-layer layout, one entry per layer (1: MoE, 0: dense; Megatron's --moe-layer-freq list form)
    pattern: tuple[Literal[0, 1], ...] | None = Field(None, max_length=MAX_LAYERS)
    expert_bias: bool = False    # biases on the routed experts' linear layers (gpt-oss)


class ModelSection(Section):
    preset: str | None = None
    hf_config: str | None = None
    name: str | None = None
    layers: int | None = Field(None, ge=1, le=MAX_LAYERS)
    hidden: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    heads: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    kv_heads: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    ffn_hidden: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    ffn_act: Literal["gelu", "swiglu", "geglu", "squared-relu", "relu"] | None = None
    vocab: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    seq_len: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    moe: MoeSection | None = None
    tie_embeddings: bool | None = None
    attention: Literal["mha", "gqa", "mla"] | None = None
    q_lora_rank: int | None = Field(None, ge=0, le=MAX_MODEL_DIM)
    kv_lora_rank: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    qk_rope_head_dim: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    qk_nope_head_dim: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    v_head_dim: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    mtp_layers: int | None = Field(None, ge=0, le=MAX_LAYERS)
    # the model language of clustersim.workload.model_fields (docs/compute.md, "Model fields")
    head_dim: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    query_width: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    qk_norm: bool | None = None
    attention_pattern: Literal["full", "sliding", "chunked"] | None = None
    attention_window: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    global_every: int | None = Field(None, ge=0, le=MAX_LAYERS)
    attention_sinks: bool | None = None
    sandwich_norm: bool | None = None
    dropout: bool | None = None   # None: the activation family's convention (docs/compute.md)
    # a vision tower's parameters that the owner's total counts and clustersim does not simulate (Llama 4)
    vision_params: int | None = Field(None, ge=0, le=MAX_MODEL_DIM ** 3)
    # clamp of a gated activation's halves (gpt-oss swiglu_limit 7.0); 0 = none (model_fields checks it)
    activation_clamp: float | None = Field(None, ge=0, allow_inf_nan=False)


class ClusterSection(NodeHardware):
    """``cluster:``: the node hardware keys (preset None: dgx-h100 or the groups' presets; nodes None:
    the preset's own `nodes` (a profile's; 1 if it has none) or the groups' total), node groups, and the fabric."""

    groups: list[ClusterGroupSection] | None = Field(None, max_length=MAX_NODE_GROUPS)  # mixed GPUs (perrank.hetero)
    nodes_per_leaf: int | None = Field(None, ge=1, le=MAX_GPUS)
    oversubscription: float | None = Field(None, ge=1.0, le=MAX_OVERSUBSCRIPTION, allow_inf_nan=False)
    scale_up_domain: int | None = Field(None, ge=1, le=MAX_GPUS)  # GPUs per NVLink/xGMI domain (default: the preset's)
    topology: Literal["fat-tree", "rail-only"] | None = None
    nodes_per_pod: int | None = Field(None, ge=1, le=MAX_GPUS)     # a third switch tier above pods of this many nodes
    pod_oversubscription: float | None = Field(None, ge=1.0, le=MAX_OVERSUBSCRIPTION, allow_inf_nan=False)
    # data-centre power usage effectiveness (1.1 hyperscale to about 2; 100 is no data centre)
    pue: float | None = Field(None, ge=MIN_PUE, le=MAX_PUE, allow_inf_nan=False)


class OffloadSection(Section):
    optimizer: bool = False
    activations: bool = False
    params: bool = False


class FsdpSection(Section):
    """ZeRO-3 as torch FSDP (docs/scenario.md, docs/memory.md): ``version`` 1 (FlatParameter per wrapped unit) or
    2 (per-parameter sharding, ``fully_shard``); left out, the framework's own ZeRO-3 runs."""

    version: Literal[1, 2] | None = None
    prefetch: int = Field(1, ge=0, le=MAX_LAYERS)  # units whose gather may be in flight ahead of use
    # free gathered parameters after forward (re-gather in backward); None: the framework's default
    # (torchtitan under PP: false; clustersim.frameworks.reshards_after_forward)
    reshard_after_forward: bool | None = None
    hsdp_replicas: int = Field(1, ge=1, le=MAX_GPUS)  # HSDP: shard within dp / replicas ranks, replicate across


class ParallelSection(Section):
    tp: int = Field(1, ge=1, le=MAX_GPUS)
    pp: int = Field(1, ge=1, le=MAX_LAYERS)  # at most one stage per layer
    dp: int | None = Field(None, ge=1, le=MAX_GPUS)  # None: the GPUs left over after tp * pp * cp
    cp: int = Field(1, ge=1, le=MAX_GPUS)
    ep: int = Field(1, ge=1, le=MAX_GPUS)
    # None: on for a MoE model with tp > 1 (Megatron-Core requires it: clustersim.parallel.rules), else off
    sequence_parallel: bool | None = None
    zero_stage: Literal[0, 1, 2, 3] = 0
    micro_batch: int = Field(1, ge=1, le=MAX_COUNT)
    global_batch: int | None = Field(None, ge=1, le=MAX_COUNT)  # None: dp * micro_batch * 4 * pp (documented default)
    schedule: Literal["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-2p", "zb-v", "dualpipe",
                      "dualpipe-v"] = "1f1b"
    virtual_stages: int = Field(1, ge=1, le=MAX_LAYERS)
    recompute: Literal["none", "selective", "selective-op", "full"] = "none"
    # Megatron --recompute-modules (with recompute: selective): extra fine-grained recompute
    recompute_modules: tuple[Literal["core_attn", "mla_up_proj", "layernorm", "moe_act"], ...] = ()
    recompute_every: int | None = None        # full recompute of every N-th layer (torchtitan layer AC)
    recompute_method: Literal["uniform", "block"] | None = None   # Megatron, with recompute: full
    recompute_num_layers: int | None = None
    overlap_grad_reduce: bool | None = None     # None: the framework's default
    overlap_param_gather: bool | None = None    # None: the framework's default
    # pipeline sends overlapped with the next compute (true) or holding the sender until done (false);
    # None: the framework's (clustersim.frameworks.blocking_sends)
    overlap_p2p_comm: bool | None = None
    tp_comm_overlap: bool = False
    dp_bucket_params: int = Field(0, ge=0, le=MAX_COUNT)
    expert_tp: int | None = Field(None, ge=1, le=MAX_GPUS)  # None: tp (Megatron's default ETP)
    cp_comm: Literal["p2p", "a2a", "a2a+p2p"] = "p2p"
    hierarchical_cp_sizes: tuple[int, int] | None = None    # (a2a, p2p) for cp_comm a2a+p2p
    offload: OffloadSection = OffloadSection()
    overlap_moe_expert_parallel_comm: bool = False
    fsdp: FsdpSection | None = None
    layers_per_stage: list[int] | None = None   # per model stage (StageGraph.stage_order); None: even or balanced
    # the frameworks' own splits (clustersim.parallel.split, docs/parallel.md)
    first_stage_layers: int | None = Field(None, ge=1, le=MAX_LAYERS)   # Megatron --decoder-first-pipeline-num-layers
    last_stage_layers: int | None = Field(None, ge=1, le=MAX_LAYERS)    # Megatron --decoder-last-pipeline-num-layers
    account_for_embedding: bool | int = False   # the embedding counted as 1 (true) or N layers in the split
    account_for_loss: bool | int = False        # the loss counted as 1 (true) or N layers in the split
    pipeline_layout: str | None = Field(None, min_length=1, max_length=MAX_LAYERS * 4)  # Megatron layout string
    balance: Literal["auto", "even"] = "auto"   # mixed GPUs: split layers and micro-batches to speed, or evenly


class TrainingSection(Section):
    dtype: Literal[TRAINING_DTYPES] = "bf16"
    optimizer: Literal["adam", "sgd"] = "adam"
    attention: Literal["auto", "flash", "standard"] = "auto"
    adam_moments: Literal["fp32", "bf16"] = "fp32"   # Megatron --exp-avg-dtype / --exp-avg-sq-dtype
    # dtype of the data-parallel gradient reduction; None: the framework's (clustersim.frameworks.grad_reduce_dtype);
    # the dtypes a reduction may run in are frameworks.REDUCE_DTYPES, which of them a job may ask for reduce_dtypes_allowed
    grad_reduce_dtype: Literal[REDUCE_DTYPES] | None = None
    # dtype DeepSpeed's ZeRO-3 holds its gradient partitions in (data_types.grad_accum_dtype); None: the
    # model's (clustersim.frameworks.grad_accum_dtype)
    grad_accum_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    compile: bool = False   # torch.compile (torchtitan): fuses element-wise ops like Megatron's kernels
    # scaling of the low-precision GEMMs (clustersim.compute.precision); None: the GPU's default
    fp8_recipe: Literal["tensorwise", "delayed", "blockwise", "mxfp8"] | None = None
    fp4_recipe: Literal["nvfp4", "mxfp4"] | None = None


class ScenarioFile(Section):
    name: str = "scenario"
    framework: str = DEFAULT_FRAMEWORK
    model: ModelSection
    cluster: ClusterSection = ClusterSection()
    parallel: ParallelSection = ParallelSection()
    training: TrainingSection = TrainingSection()
    goodput: GoodputSection | None = None   # `clustersim goodput` only (docs/goodput.md)
    faults: FaultsSection | None = None     # slow GPUs and links within a step: per-rank mode (docs/engine.md)
