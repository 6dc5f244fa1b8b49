"""Scenario files (CONTRACT.md §1): YAML -> validated, frozen Scenario.

Validation happens in two layers: pydantic checks each section's keys and types (unknown keys
are errors), then ``_check_consistency`` checks what spans fields (the product rule, divisibility).
Every failure is an InputError naming the field, the value and what is allowed.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clustersim.compute.precision import resolve_recipe
from clustersim.errors import InputError
from clustersim.frameworks import DEFAULT_FRAMEWORK, FrameworkSpec, load_framework
from clustersim.goodput.config import GoodputSection, GoodputSpec, goodput_spec
from clustersim.hardware.load import load_cluster
from clustersim.hardware.spec import ClusterSpec
from clustersim.hashcache import cache_hash
from clustersim.inputs import MAX_YAML_BYTES, parse_override_value, read_json_file, read_yaml_file
from clustersim.limits import (
    MAX_COUNT,
    MAX_EXPERTS,
    MAX_GPUS,
    MAX_LAYERS,
    MAX_MICRO_BATCHES,
    MAX_MODEL_DIM,
    MAX_OVERSUBSCRIPTION,
    MAX_PER_NODE,
)
from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.rules import check_extensions
from clustersim.perrank.faults import FaultSpec, FaultsSection, fault_spec
from clustersim.perrank.hetero import ClusterGroupSection, NodeGroup, load_groups
from clustersim.workload.model_spec import ModelSpec
from clustersim.workload.presets import MODEL_PRESETS

DTYPES = ("bf16", "fp16", "fp8", "fp4", "fp32")

PosInt = Field(ge=1)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)


class MoeSection(_Strict):
    experts: int = Field(0, ge=0, le=MAX_EXPERTS)
    top_k: int = Field(0, ge=0, le=MAX_EXPERTS)
    shared_experts: int = Field(0, ge=0, le=MAX_EXPERTS)
    expert_ffn_hidden: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)  # None: model.ffn_hidden
    first_dense_layers: int = Field(0, ge=0, le=MAX_LAYERS)
    capacity_factor: float | None = Field(None, gt=0)      # None: dropless
    imbalance: float = Field(1.0, ge=1.0)
    router_num_groups: int = Field(0, ge=0, le=MAX_EXPERTS)  # node-limited routing (Megatron names)
    router_group_topk: int = Field(0, ge=0, le=MAX_EXPERTS)
    token_dispatcher: Literal["alltoall", "flex"] = "alltoall"


class ModelSection(_Strict):
    preset: str | None = None
    hf_config: str | None = None
    name: str | None = None
    layers: int | None = Field(None, ge=1, le=MAX_LAYERS)
    hidden: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    heads: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    kv_heads: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    ffn_hidden: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    ffn_act: Literal["gelu", "swiglu"] | None = None
    vocab: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    seq_len: int | None = Field(None, ge=1, le=MAX_MODEL_DIM)
    moe: MoeSection | None = None
    tie_embeddings: bool | None = None
    attention: Literal["mha", "gqa", "mla"] | None = None
    q_lora_rank: int | None = Field(None, ge=0)
    kv_lora_rank: int | None = Field(None, ge=1)
    qk_rope_head_dim: int | None = Field(None, ge=1)
    qk_nope_head_dim: int | None = Field(None, ge=1)
    v_head_dim: int | None = Field(None, ge=1)
    mtp_layers: int | None = Field(None, ge=0)


class ClusterSection(_Strict):
    preset: str | None = None           # None: dgx-h100 (or the groups' presets)
    nodes: int | None = Field(None, ge=1, le=MAX_GPUS)  # None: 1 (or the groups' total)
    groups: list[ClusterGroupSection] | None = None  # mixed GPUs (clustersim.perrank.hetero)
    gpu: str | None = None
    gpus_per_node: int | None = Field(None, ge=1, le=MAX_PER_NODE)
    scale_up: str | None = None
    scale_out: str | None = None
    nics_per_node: int | None = Field(None, ge=1, le=MAX_PER_NODE)
    pcie: str | None = None
    nodes_per_leaf: int | None = Field(None, ge=1, le=MAX_GPUS)
    oversubscription: float | None = Field(None, ge=1.0, le=MAX_OVERSUBSCRIPTION, allow_inf_nan=False)
    scale_up_domain: int | None = Field(None, ge=1, le=MAX_GPUS)  # GPUs per NVLink/xGMI domain (default: the preset's)
    topology: Literal["fat-tree", "rail-only"] | None = None
    nodes_per_pod: int | None = Field(None, ge=1, le=MAX_GPUS)     # a third switch tier above pods of this many nodes
    pod_oversubscription: float | None = Field(None, ge=1.0, le=MAX_OVERSUBSCRIPTION, allow_inf_nan=False)
    # data-centre power usage effectiveness (1.1 hyperscale to about 2; 100 is no data centre)
    pue: float | None = Field(None, ge=1.0, le=100.0, allow_inf_nan=False)


class OffloadSection(_Strict):
    optimizer: bool = False
    activations: bool = False
    params: bool = False


class FsdpSection(_Strict):
    """ZeRO-3 as torch FSDP (CONTRACT section 4): ``version`` 1 (FlatParameter per wrapped unit) or
    2 (per-parameter sharding, ``fully_shard``); left out, the framework's own ZeRO-3 runs."""

    version: Literal[1, 2] | None = None
    prefetch: int = Field(1, ge=0, le=MAX_LAYERS)  # units whose gather may be in flight ahead of use
    reshard_after_forward: bool = True          # free gathered parameters after forward (re-gather in backward)
    hsdp_replicas: int = Field(1, ge=1, le=MAX_GPUS)  # HSDP: shard within dp / replicas ranks, replicate across


class ParallelSection(_Strict):
    tp: int = Field(1, ge=1, le=MAX_GPUS)
    pp: int = Field(1, ge=1, le=MAX_LAYERS)  # at most one stage per layer
    dp: int | None = Field(None, ge=1, le=MAX_GPUS)  # None: the GPUs left over after tp * pp * cp
    cp: int = Field(1, ge=1, le=MAX_GPUS)
    ep: int = Field(1, ge=1, le=MAX_GPUS)
    sequence_parallel: bool = False
    zero_stage: Literal[0, 1, 2, 3] = 0
    micro_batch: int = Field(1, ge=1, le=MAX_COUNT)
    global_batch: int | None = Field(None, ge=1, le=MAX_COUNT)  # None: dp * micro_batch * 4 * pp (documented default)
    schedule: Literal["gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipe", "dualpipe-v"] = "1f1b"
    virtual_stages: int = Field(1, ge=1, le=MAX_LAYERS)
    recompute: Literal["none", "selective", "selective-op", "full"] = "none"
    # Megatron --recompute-modules (with recompute: selective): extra fine-grained recompute
    recompute_modules: tuple[Literal["core_attn", "mla_up_proj", "layernorm", "moe_act"], ...] = ()
    recompute_every: int | None = None        # full recompute of every N-th layer (torchtitan layer AC)
    recompute_method: Literal["uniform", "block"] | None = None   # Megatron, with recompute: full
    recompute_num_layers: int | None = None
    overlap_grad_reduce: bool | None = None     # None: the framework's default
    overlap_param_gather: bool | None = None    # None: the framework's default
    tp_comm_overlap: bool = False
    dp_bucket_params: int = Field(0, ge=0, le=MAX_COUNT)
    expert_tp: int | None = Field(None, ge=1, le=MAX_GPUS)  # None: tp (Megatron's default ETP)
    cp_comm: Literal["p2p", "a2a", "a2a+p2p"] = "p2p"
    hierarchical_cp_sizes: tuple[int, int] | None = None    # (a2a, p2p) for cp_comm a2a+p2p
    offload: OffloadSection = OffloadSection()
    overlap_moe_expert_parallel_comm: bool = False
    fsdp: FsdpSection | None = None
    layers_per_stage: list[int] | None = None   # per global stage (chunk * pp + rank); None: even or balanced
    balance: Literal["auto", "even"] = "auto"   # mixed GPUs: split layers and micro-batches to speed, or evenly


class TrainingSection(_Strict):
    dtype: Literal["bf16", "fp16", "fp8", "fp4", "fp32"] = "bf16"
    optimizer: Literal["adam", "sgd"] = "adam"
    attention: Literal["auto", "flash", "standard"] = "auto"
    adam_moments: Literal["fp32", "bf16"] = "fp32"   # Megatron --exp-avg-dtype / --exp-avg-sq-dtype
    compile: bool = False   # torch.compile (torchtitan): fuses element-wise ops like Megatron's kernels
    # scaling of the low-precision GEMMs (clustersim.compute.precision); None: the GPU's default
    fp8_recipe: Literal["tensorwise", "delayed", "blockwise", "mxfp8"] | None = None
    fp4_recipe: Literal["nvfp4", "mxfp4"] | None = None


class ScenarioFile(_Strict):
    name: str = "scenario"
    framework: str = DEFAULT_FRAMEWORK
    model: ModelSection
    cluster: ClusterSection = ClusterSection()
    parallel: ParallelSection = ParallelSection()
    training: TrainingSection = TrainingSection()
    goodput: GoodputSection | None = None   # `clustersim goodput` only (docs/goodput.md)
    faults: FaultsSection | None = None     # slow GPUs and links within a step: per-rank mode (docs/engine.md)


@dataclass(frozen=True, slots=True)
class TrainingSpec:
    """``attention``: "flash" (fused, FlashAttention-style) or "standard" (unfused QK^T, softmax,
    PV); a scenario's "auto" is resolved to its framework's kernel when the scenario is built."""

    dtype: str = "bf16"
    optimizer: str = "adam"
    attention: str = "auto"
    compile: bool = False
    recipe: str = ""  # low-precision scaling recipe when dtype is fp8/fp4 (clustersim.compute.precision)


@cache_hash
@dataclass(frozen=True, slots=True)
class Scenario:
    """One training job on one cluster: application x execution x system."""

    name: str
    model: ModelSpec
    cluster: ClusterSpec
    parallel: ParallelLayout
    training: TrainingSpec
    framework: FrameworkSpec
    goodput: GoodputSpec | None = None   # the `goodput:` section, resolved; None when absent
    faults: FaultSpec | None = None      # the `faults:` section, checked against the cluster; None when absent
    node_groups: tuple[NodeGroup, ...] = ()   # mixed GPUs: `cluster.groups` (cluster = group 0's hardware)
    micro_batches_per_replica: tuple[int, ...] = ()  # mixed GPUs, balanced; () = num_micro_batches each
    balance: str = "auto"                # parallel.balance


DEFAULT_SCENARIO_YAML = """\
name: llama3-8b on 2 DGX H100 (embedded default)
model: {preset: llama3-8b}
cluster: {preset: dgx-h100, nodes: 2}
parallel: {tp: 2, pp: 2, dp: 4, micro_batch: 1, global_batch: 64, schedule: 1f1b,
           zero_stage: 1, sequence_parallel: true, recompute: selective}
training: {dtype: bf16}
"""


# ---------------------------------------------------------------------------------------------
# raw dict handling

def read_scenario_dict(path: str | Path | None) -> dict[str, Any]:
    """The scenario file as a plain dict (the embedded default when ``path`` is None)."""
    if path is None:
        return yaml.safe_load(DEFAULT_SCENARIO_YAML)
    data = read_yaml_file(path, "SCENARIO", "a YAML scenario file")
    if not isinstance(data, dict):
        raise InputError("SCENARIO", str(path), "a YAML mapping with sections model, cluster, parallel, training")
    return data


def apply_overrides(data: dict[str, Any], assignments: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Apply ``--set a.b=VALUE`` overrides (VALUE parsed as YAML) to a copy of ``data``."""
    out = copy.deepcopy(data)
    for item in assignments:
        if "=" not in item:
            raise InputError("--set", item, "KEY=VALUE with a dotted KEY such as parallel.tp=4")
        key, raw = item.split("=", 1)
        value = parse_override_value(raw, item)
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise InputError("--set", item, f"a key below a section; {part} is not a section")
            node = child
        node[parts[-1]] = value
    return out


def _allowed_for(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """The allowed keys of the section that ``loc`` points into."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            break
        ann = field.annotation
        for arg in getattr(ann, "__args__", (ann,)):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                current = arg
                break
    return ", ".join(getattr(current, "model_fields", {}))


def _pydantic_to_input_error(exc: ValidationError, data: dict[str, Any]) -> InputError:
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    field = ".".join(str(p) for p in loc) or "scenario"
    value = err.get("input")
    if err["type"] == "extra_forbidden":
        keys = _allowed_for(ScenarioFile, loc)
        return InputError(field, value, f"unknown key; allowed keys: {keys}", choices=keys.split(", "),
                          key=str(loc[-1]) if loc else None)
    if err["type"] == "missing":
        return InputError(field, None, "this field is required")
    ctx = err.get("ctx") or {}
    if "expected" in ctx:  # a literal: "'gpipe', '1f1b' or 'zb-v'" names the choices for "did you mean"
        return InputError(field, value, f"one of {ctx['expected']}", choices=re.findall(r"'([^']*)'", ctx["expected"]))
    if "ge" in ctx:
        allowed = f"a number >= {ctx['ge']}"
    elif "gt" in ctx:
        allowed = f"a number > {ctx['gt']}"
    elif "le" in ctx:
        allowed = f"a number <= {ctx['le']}"
    elif err["type"] in _SECTION_TYPES:  # a section given as a scalar or a list: name its keys
        allowed = f"a mapping (KEY: VALUE) with keys {_allowed_for(ScenarioFile, (*loc, ''))}"
    else:  # pydantic's own words ("Input should be a valid integer, ...") in the command line's
        allowed = _PYDANTIC_WORDS.get(err["type"]) or str(err["msg"]).removeprefix("Input should be ")
    return InputError(field, value, allowed)


_SECTION_TYPES = ("dict_type", "model_type", "model_attributes_type")
_PYDANTIC_WORDS = {"int_parsing": "a whole number", "int_type": "a whole number",
                   "int_from_float": "a whole number (this one has a fractional part)",
                   "float_parsing": "a number", "float_type": "a number", "bool_parsing": "true or false",
                   "bool_type": "true or false", "string_type": "text", "list_type": "a list",
                   "finite_number": "a finite number"}


# ---------------------------------------------------------------------------------------------
# model resolution

def model_from_fields(name: str, fields: dict[str, Any]) -> ModelSpec:
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


def read_hf_config(path: str) -> dict[str, Any]:
    """Fields of a Hugging Face style ``config.json`` (Llama/Mistral/Mixtral/GPT-2 key names)."""
    cfg = read_json_file(path, "model.hf_config", "a Hugging Face config.json", max_bytes=MAX_YAML_BYTES)
    if not isinstance(cfg, dict):
        raise InputError("model.hf_config", path, "a config.json holding a JSON object")

    def first(*keys: str) -> Any:
        for k in keys:
            if k in cfg:
                return cfg[k]
        return None

    fields = {
        "layers": first("num_hidden_layers", "n_layer"),
        "hidden": first("hidden_size", "n_embd"),
        "heads": first("num_attention_heads", "n_head"),
        "kv_heads": first("num_key_value_heads"),
        "ffn_hidden": first("intermediate_size", "n_inner"),
        "vocab": first("vocab_size"),
        "seq_len": first("max_position_embeddings", "n_positions", "seq_length"),
        "tie_embeddings": first("tie_word_embeddings"),
    }
    act = str(first("hidden_act", "activation_function") or "gelu")
    fields["ffn_act"] = "swiglu" if act in ("silu", "swiglu") else "gelu"
    experts = first("num_local_experts", "num_experts", "n_routed_experts")
    if experts:
        # Mixtral (num_local_experts), Qwen-MoE (num_experts, moe_intermediate_size,
        # shared_expert_intermediate_size) and DeepSeek-V2/V3 (n_routed_experts, n_shared_experts,
        # moe_intermediate_size, first_k_dense_replace, n_group, topk_group) key names
        moe: dict[str, Any] = {"experts": experts, "top_k": first("num_experts_per_tok", "moe_top_k") or 2}
        width = first("moe_intermediate_size")
        if width:
            moe["expert_ffn_hidden"] = width
        shared = first("n_shared_experts")
        if not shared and width and first("shared_expert_intermediate_size"):
            shared = first("shared_expert_intermediate_size") // width
        for key, value in (("shared_experts", shared), ("first_dense_layers", first("first_k_dense_replace")),
                           ("router_num_groups", first("n_group")), ("router_group_topk", first("topk_group"))):
            if value:
                moe[key] = value
        fields["moe"] = moe
    if first("kv_lora_rank"):  # DeepSeek-V2/V3 multi-head latent attention
        fields["attention"] = "mla"
        for key in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            fields[key] = first(key)
        fields["q_lora_rank"] = first("q_lora_rank") or 0
    if first("num_nextn_predict_layers"):
        fields["mtp_layers"] = first("num_nextn_predict_layers")
    missing = [k for k in ("layers", "hidden", "heads", "vocab", "seq_len") if fields[k] is None]
    if missing:
        raise InputError("model.hf_config", path, f"a config.json with {', '.join(missing)} "
                         "(num_hidden_layers, hidden_size, num_attention_heads, vocab_size, max_position_embeddings)")
    fields = {k: v for k, v in fields.items() if v is not None}
    try:  # the same types and bounds as the explicit model fields
        ModelSection.model_validate(fields)
    except ValidationError as exc:
        err = _pydantic_to_input_error(exc, fields)
        raise err.with_field(f"model.hf_config ({path}): {err.field}") from None
    return fields


def _resolve_model(section: ModelSection) -> ModelSpec:
    fields: dict[str, Any] = {}
    name = section.name or section.preset or "custom"
    if section.preset is not None:
        if section.preset not in MODEL_PRESETS:
            raise InputError("model.preset", section.preset, sorted(MODEL_PRESETS))
        fields.update(MODEL_PRESETS[section.preset])
    if section.hf_config is not None:
        fields.update(read_hf_config(section.hf_config))
        name = section.name or Path(section.hf_config).parent.name or "hf-model"
    explicit = section.model_dump(exclude_none=True, exclude={"preset", "hf_config", "name", "moe"})
    fields.update(explicit)
    if section.moe is not None:  # explicit moe fields override the preset's one by one
        moe = dict(fields.get("moe") or {})
        moe.update(section.moe.model_dump(exclude_unset=True))
        fields["moe"] = moe
    for key in ("layers", "hidden", "heads", "vocab", "seq_len"):
        if key not in fields:
            raise InputError(f"model.{key}", None,
                             f"required unless model.preset is given (presets: {', '.join(sorted(MODEL_PRESETS))})")
    return model_from_fields(name, fields)


# ---------------------------------------------------------------------------------------------
# consistency

def check_layout(model: ModelSpec, cluster: ClusterSpec, par: ParallelLayout) -> None:
    """Raise InputError unless ``par`` is a layout the loader accepts for ``model`` on ``cluster``.

    Pure and cheap (no pydantic): `clustersim sweep` relies on it to agree with the loader.
    """
    gpus = cluster.num_gpus
    if par.num_gpus != gpus:
        raise InputError(
            "parallel", f"tp({par.tp}) * pp({par.pp}) * cp({par.cp}) * dp({par.dp}) = {par.num_gpus}",
            f"a product equal to the GPU count: cluster.nodes({cluster.num_nodes}) * "
            f"gpus_per_node({cluster.gpus_per_node}) = {gpus}")
    domain = cluster.gpus_per_domain  # TP may span a whole NVLink/xGMI domain (72 GPUs in an NVL72 rack)
    if (par.tp > domain and par.tp % domain) or (par.tp < domain and domain % par.tp):
        raise InputError("parallel.tp", par.tp, f"a divisor or multiple of the scale-up domain ({domain} GPUs)")
    if model.heads % par.tp:
        raise InputError("parallel.tp", par.tp, f"a divisor of model.heads ({model.heads})")
    if model.kv_heads % par.tp and par.tp % model.kv_heads:
        raise InputError("parallel.tp", par.tp,
                         f"a divisor or multiple of model.kv_heads ({model.kv_heads})")
    if model.hidden % model.heads and not model.is_mla:
        raise InputError("model.hidden", model.hidden, f"a multiple of model.heads ({model.heads})")
    if model.ffn_hidden % par.tp:
        raise InputError("parallel.tp", par.tp, f"a divisor of model.ffn_hidden ({model.ffn_hidden})")
    stages = par.pp * par.virtual_stages
    if model.layers < stages:
        raise InputError("parallel.pp", par.pp,
                         f"pp * virtual_stages ({stages}) <= model.layers ({model.layers})")
    if par.virtual_stages > 1 and par.schedule != "interleaved-1f1b":
        raise InputError("parallel.virtual_stages", par.virtual_stages,
                         "1 unless parallel.schedule is interleaved-1f1b")
    if par.schedule == "interleaved-1f1b" and par.pp == 1:
        raise InputError("parallel.schedule", par.schedule, "gpipe or 1f1b when pp = 1")
    per_replica = par.global_batch / par.dp
    if par.global_batch % (par.dp * par.micro_batch):
        raise InputError("parallel.micro_batch", par.micro_batch,
                         f"a divisor of the per-replica batch global_batch/dp = {par.global_batch}/{par.dp}"
                         f" = {per_replica:g} (global_batch must be a multiple of dp * micro_batch)")
    if par.num_micro_batches > MAX_MICRO_BATCHES:
        raise InputError("parallel.global_batch", par.global_batch,
                         f"at most {MAX_MICRO_BATCHES} micro-batches per pipeline (global_batch / (dp * micro_batch)"
                         f" = {par.num_micro_batches}); raise parallel.micro_batch or parallel.dp")
    if par.schedule == "interleaved-1f1b" and par.num_micro_batches % par.pp:
        raise InputError("parallel.global_batch", par.global_batch,
                         f"a batch whose micro-batch count ({par.num_micro_batches}) is a multiple of pp ({par.pp}),"
                         " as the interleaved schedule requires")
    if model.seq_len % (2 * par.cp) and par.cp > 1:
        raise InputError("parallel.cp", par.cp, f"a cp with model.seq_len ({model.seq_len}) divisible by 2 * cp")
    if par.sequence_parallel and model.seq_len % par.tp:
        raise InputError("parallel.sequence_parallel", True, f"false, or tp dividing model.seq_len ({model.seq_len})")
    if par.zero_stage == 3 and (par.dp * par.cp) % par.hsdp_replicas:
        raise InputError("parallel.fsdp.hsdp_replicas", par.hsdp_replicas,
                         f"a divisor of dp * cp ({par.dp * par.cp})")
    check_extensions(model, cluster, par)  # MoE, MLA, CP variants, offload, zero-bubble / DualPipe


_check_consistency = check_layout  # the former private name


def _recompute_fields(p: ParallelSection, model: ModelSpec) -> dict[str, Any]:
    """recompute_every / recompute_method / recompute_num_layers, checked against recompute."""
    if p.recompute_every is not None and not 1 <= p.recompute_every <= model.layers:
        raise InputError("parallel.recompute_every", p.recompute_every,
                         f"an integer from 1 to model.layers ({model.layers})")
    if p.recompute_num_layers is not None and p.recompute_num_layers < 1:
        raise InputError("parallel.recompute_num_layers", p.recompute_num_layers,
                         "an integer from 1 to the layers of a pipeline stage")
    if p.recompute_method is not None and p.recompute != "full":
        raise InputError("parallel.recompute_method", p.recompute_method,
                         "only with parallel.recompute: full (Megatron --recompute-granularity full)")
    if p.recompute_num_layers is not None and p.recompute != "full":
        raise InputError("parallel.recompute_num_layers", p.recompute_num_layers,
                         "only with parallel.recompute: full")
    return {"recompute_every": 0 if p.recompute_every is None else p.recompute_every,
            "recompute_method": p.recompute_method or "uniform",
            "recompute_num_layers": 1 if p.recompute_num_layers is None else p.recompute_num_layers}


def check_recompute(model: ModelSpec, par: ParallelLayout) -> None:
    """recompute_every in 1..layers; recompute_num_layers in 1..the layers of a pipeline stage."""
    from clustersim.parallel.pipeline import layout_stage_layers

    if par.recompute_every != 0 and not 1 <= par.recompute_every <= model.layers:
        raise InputError("parallel.recompute_every", par.recompute_every,
                         f"an integer from 1 to model.layers ({model.layers})")
    if par.recompute_num_layers != 1 or par.recompute_method != "uniform":
        most = max(layout_stage_layers(par, model.layers))
        if not 1 <= par.recompute_num_layers <= most:
            raise InputError("parallel.recompute_num_layers", par.recompute_num_layers,
                             f"an integer from 1 to the layers of a pipeline stage ({most}: model.layers "
                             f"{model.layers} over pp * virtual_stages = {par.pp * par.virtual_stages})")


def scenario_from_dict(data: dict[str, Any]) -> Scenario:
    """Validate a raw scenario dict and build the frozen Scenario. Raises InputError."""
    if not isinstance(data, dict):
        raise InputError("scenario", type(data).__name__, "a mapping")
    try:
        raw = ScenarioFile.model_validate(data)
    except ValidationError as exc:
        raise _pydantic_to_input_error(exc, data) from None
    model = _resolve_model(raw.model)
    cluster, groups = _resolve_cluster(raw.cluster)
    if cluster.num_gpus > MAX_GPUS:
        raise InputError("cluster.nodes", cluster.num_nodes, f"a cluster of at most {MAX_GPUS:,} GPUs (clustersim's "
                         f"limit; {cluster.num_nodes:,} nodes x {cluster.gpus_per_node} GPUs = {cluster.num_gpus:,})")
    p = raw.parallel
    if p.dp is None:
        denom = p.tp * p.pp * p.cp
        if cluster.num_gpus % denom:
            raise InputError("parallel", f"tp({p.tp}) * pp({p.pp}) * cp({p.cp}) = {denom}",
                             f"a divisor of the GPU count {cluster.num_gpus} (dp is left out)")
        dp = cluster.num_gpus // denom
    else:
        dp = p.dp
    global_batch = p.global_batch if p.global_batch is not None else dp * p.micro_batch * max(1, p.pp) * 4
    framework = load_framework(raw.framework)
    fsdp = p.fsdp or FsdpSection()
    if p.fsdp is not None and p.zero_stage != 3:
        raise InputError("parallel.fsdp", p.fsdp.model_dump(), "only with parallel.zero_stage: 3")
    overlaps = {key: framework_value if value is None else value for key, value, framework_value in (
        ("overlap_grad_reduce", p.overlap_grad_reduce, framework.overlap_grad_reduce),
        ("overlap_param_gather", p.overlap_param_gather, framework.overlap_param_gather))}
    explicit_layers = None
    if p.layers_per_stage is not None:
        from clustersim.perrank.balance import check_layers_per_stage

        explicit_layers = check_layers_per_stage(p.layers_per_stage, model.layers, p.pp * p.virtual_stages, p.pp)
    recompute = _recompute_fields(p, model)
    par = ParallelLayout(**{**p.model_dump(exclude={"fsdp", "offload", "layers_per_stage", "balance", *recompute}),
                            **overlaps, **recompute, "dp": dp, "global_batch": global_batch,
                            "layers_per_stage": explicit_layers or (),
                            "fsdp_version": fsdp.version or 0, "fsdp_prefetch": fsdp.prefetch,
                            "reshard_after_forward": fsdp.reshard_after_forward,
                            "hsdp_replicas": fsdp.hsdp_replicas, "expert_tp": p.expert_tp or 0,
                            "hierarchical_cp_sizes": _hierarchical_cp(p, cluster.gpus_per_node),
                            "offload_optimizer": p.offload.optimizer, "offload_activations": p.offload.activations,
                            "offload_params": p.offload.params,
                            "adam_moment_bytes": 2 if raw.training.adam_moments == "bf16" else 4})
    t = raw.training
    # every group's GPUs must run the dtype and recipe (clustersim.compute.precision.resolve_recipe)
    recipes = {resolve_recipe(t.dtype, t.fp8_recipe, t.fp4_recipe, spec.gpu) for spec in [g.cluster for g in groups]
               or [cluster]}
    if len(recipes) > 1:
        raise InputError("training.fp8_recipe" if t.dtype == "fp8" else "training.fp4_recipe", sorted(recipes),
                         "one scaling recipe that every group's GPUs run (set it explicitly)")
    recipe = recipes.pop()
    check_layout(model, cluster, par)
    check_recompute(model, par)
    attention = framework.attention if t.attention == "auto" else t.attention
    training = TrainingSpec(dtype=t.dtype, optimizer=t.optimizer, attention=attention, compile=t.compile,
                            recipe=recipe)
    gp = goodput_spec(raw.goodput) if raw.goodput is not None else None
    nics = tuple(g.cluster.nics_per_node for g in groups for _ in range(g.nodes)) if groups else None
    faults = fault_spec(raw.faults, cluster, nics) if raw.faults is not None else None
    scenario = Scenario(name=raw.name, model=model, cluster=cluster, parallel=par, training=training,
                        framework=framework, goodput=gp, faults=faults, node_groups=groups, balance=p.balance)
    if groups:
        from clustersim.perrank.hetero import resolve

        scenario = resolve(scenario, p.balance, explicit_layers)
    return scenario


DEFAULT_CLUSTER_PRESET = "dgx-h100"  # a scenario's cluster without a preset


def _resolve_cluster(c: ClusterSection) -> tuple[ClusterSpec, tuple[NodeGroup, ...]]:
    """The cluster spec (and, with ``cluster.groups``, the node groups)."""
    fabric = {k: v for k, v in (("nodes_per_leaf", c.nodes_per_leaf), ("oversubscription", c.oversubscription))
              if v is not None}
    if c.groups is not None:
        if not c.groups:
            raise InputError("cluster.groups", [], "one or more node groups: [{preset: NAME, nodes: N}, ...]")
        extra = sorted(k for k, v in c.model_dump(exclude={"groups", "nodes_per_leaf", "oversubscription"}).items()
                       if v is not None)
        if extra:
            raise InputError(f"cluster.{extra[0]}", getattr(c, extra[0]),
                             "absent with cluster.groups (set it per group: cluster.groups.N.KEY)")
        return load_groups(c.groups, fabric)
    overrides = c.model_dump(exclude={"preset", "nodes", "groups"}, exclude_none=True)
    preset = c.preset or DEFAULT_CLUSTER_PRESET
    try:
        cluster = load_cluster(preset, c.nodes or 1, **overrides)
    except InputError as exc:  # name the scenario key whose value the profile lookup rejected
        if exc.field.startswith("cluster."):
            raise
        key = next((f"cluster.{k}" for k, v in sorted(overrides.items()) if v == exc.value),
                   f"cluster.preset ({preset}): {exc.field}")
        raise exc.with_field(key) from None
    return cluster, ()


def _hierarchical_cp(p: ParallelSection, gpus_per_node: int) -> tuple[int, int] | None:
    """(a2a, p2p) sizes of hierarchical context parallelism. Megatron requires
    --hierarchical-context-parallel-sizes with a2a+p2p; left out, the all-to-all takes the largest
    divisor of cp whose group (times tp) stays inside one node and the ring spans the rest."""
    if p.cp_comm != "a2a+p2p":
        return None
    if p.hierarchical_cp_sizes is not None:
        a2a, p2p = p.hierarchical_cp_sizes
        if a2a < 1 or p2p < 1 or a2a * p2p != p.cp:
            raise InputError("parallel.hierarchical_cp_sizes", list(p.hierarchical_cp_sizes),
                             f"two positive sizes [a2a, p2p] whose product is parallel.cp ({p.cp})")
        return a2a, p2p
    a2a = max(d for d in range(1, p.cp + 1) if p.cp % d == 0 and d * p.tp <= max(gpus_per_node, p.tp))
    return a2a, p.cp // a2a


def load_scenario(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Read, override and validate a scenario (the embedded default when ``path`` is None)."""
    return scenario_from_dict(apply_overrides(read_scenario_dict(path), list(overrides)))
