"""Megatron-LM's MoE arguments -> ``model.moe``: the one place that reads the experts, their widths,
the capacity factor and its padding, the shared experts, and that tells a Megatron-DeepSpeed MoE
launch (DeepSpeed's MoE layers, which clustersim does not model) from a Megatron-Core one.

Megatron-Core names (megatron/training/arguments.py, megatron/core/transformer/transformer_config.py):

* ``--num-experts`` E, ``--moe-router-topk`` k (default 2), ``--moe-ffn-hidden-size`` (default
  ``--ffn-hidden-size``);
* ``--moe-expert-capacity-factor`` c: a number > 0 caps each expert at c times its mean load;
  a negative one is no cap (TransformerConfig.__post_init__ sets it to None: dropless);
* ``--moe-pad-expert-input-to-capacity``: every expert's input padded to its capacity
  (token_dispatcher.py: each expert computes and exchanges c x its mean load); Megatron requires
  a capacity factor with it;
* ``--moe-shared-expert-intermediate-size`` S: the TOTAL width of the one SharedExpertMLP
  (not a count): S a whole multiple of the expert width is written as ``moe.shared_experts``,
  any other S as ``moe.shared_ffn_hidden``.

Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed megatron/arguments.py) spells its MoE
differently, and runs DeepSpeed's MoE layer (deepspeed.moe.layer.MoE, built in
megatron/model/transformer.py ParallelTransformerLayer.__init__); ``_deepspeed_moe`` reads it:

* ``--num-experts`` (nargs='+', default [1]): one count, or one per MoE layer; all ones is a dense
  model. One count E > 1 (or a list of equal counts) is ``model.moe.experts``; differing counts
  (the pyramid of PR-MoE) exit 2: clustersim gives every MoE layer the same experts;
* ``--expert-interval`` N (default 2): megatron/model/transformer.py get_num_experts_per_layer puts
  the experts on layer_num (1-based) with ``layer_num % expert_interval == 0``, i.e. 0-based layers
  N-1, 2N-1, ...: ``model.moe.every`` N through the same rule as Megatron-LM's ``--moe-layer-freq``
  (megatron_later.moe_layout, clustersim.workload.model_spec.moe_layer_fields);
* ``--topk`` k (default 1): ``model.moe.top_k``;
* ``--moe-train-capacity-factor`` c (default 1.0): deepspeed/moe/sharded_moe.py _capacity gives each
  expert ceil(tokens / E x c x k) slots (top1gating c, top2gating c x 2, topkgating c x k), and
  with drop_tokens (the default) every expert's input is its whole capacity: ``capacity_factor`` c
  with ``pad_to_capacity``; ``--disable-moe-token-dropping`` (drop_tokens=False: every expert
  padded to the busiest one's load) exits 2;
* ``--moe-min-capacity`` m (default 4): _capacity raises the capacity to m; where it binds
  (ceil(micro-batch x seq x c x k / E) < m) it exits 2, else it is noted as not binding;
* ``--moe-expert-parallel-size``: ``parallel.ep`` (megatron_args);
* ``--mlp-type residual`` (PR-MoE, use_residual: a dense MLP beside the experts) and
  ``--use-tutel`` exit 2; ``--tensor-model-parallel-size`` > 1 with the experts exits 2
  (MOELayer.forward drops the TP ranks' duplicate tokens before the all-to-all, which clustersim
  does not model);
* ``--moe-eval-capacity-factor`` (evaluation only), ``--moe-loss-coeff`` (scales the gate's
  auxiliary loss, computed either way), ``--create-moe-param-group`` (optimizer parameter groups)
  do not change the training step and are noted.

The MoE layers are priced as Megatron-Core's (docs/calibration.md, "DeepSpeed-MoE").
"""

from __future__ import annotations

import math
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import DEEPSPEED_MOE_INSTEAD, config_int
from clustersim.importers.megatron_parse import MegatronArgs, int_arg, neutral

# Megatron-Core MoE arguments mapped here (listed as known by megatron_args)
MOE_MAPPED = ("moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "moe_shared_expert_intermediate_size",
              "moe_grouped_gemm")
# Megatron-DeepSpeed's MoE arguments (microsoft/Megatron-DeepSpeed megatron/arguments.py): harmless with
# --num-experts 1, else read by _deepspeed_moe (or refused by name there)
DS_MOE_ARGS = ("moe_expert_parallel_size", "expert_interval", "topk", "moe_train_capacity_factor",
               "moe_eval_capacity_factor", "moe_min_capacity", "moe_loss_coeff", "create_moe_param_group",
               "moe_token_dropping", "moe_top2_2nd_expert_sampling", "use_tutel", "mlp_type", "moe_type")
# ... of them, those that leave the training step as it is (noted when given with experts)
DS_MOE_NO_COST = {"moe_eval_capacity_factor": "the capacity at evaluation, not in a training step",
                  "moe_loss_coeff": "scales the gate's auxiliary loss, which is computed either way",
                  "create_moe_param_group": "the optimizer's parameter groups: the experts' own, for ZeRO"}


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def deepspeed_launch(a: MegatronArgs) -> bool:
    """Megatron-DeepSpeed: --deepspeed, or one of its MoE arguments (Megatron-Core has none of them)."""
    return bool(a.values.get("deepspeed")) or any(k in a.values for k in DS_MOE_ARGS)


def deepspeed_experts(a: MegatronArgs) -> int:
    """Megatron-DeepSpeed's --num-experts (nargs='+', default [1]) as one count: 1 (all ones) is a dense
    model; a list of differing counts (PR-MoE's pyramid) exits 2 (clustersim gives every MoE layer one count)."""
    value = a.values.get("num_experts")
    if neutral(value):
        return 1
    counts = value if isinstance(value, list) else [value]
    nums = {config_int(c, "--num-experts") for c in counts}
    if len(nums) != 1:
        raise InputError("--num-experts", value, "one expert count for every MoE layer (model.moe.experts): "
                         "a list of different counts per MoE layer (PR-MoE's pyramid) is not modelled. "
                         + DEEPSPEED_MOE_INSTEAD)
    return nums.pop()


def deepspeed_moe_layers(a: MegatronArgs, layers: int) -> list[int]:
    """Which layers Megatron-DeepSpeed builds as MoE: microsoft/Megatron-DeepSpeed megatron/model/transformer.py
    get_num_experts_per_layer (used by ParallelTransformer and gpt_model.py GPTModelPipe), ``n_e =
    num_experts[(layer_num-1) // expert_interval] if layer_num % expert_interval == 0 else 1`` with
    ``layer_num = i + 1``: 0-based layer i is MoE when (i + 1) % expert_interval == 0. A --num-experts list
    must have one count or one per MoE layer (layers // expert_interval), as it asserts there."""
    interval = int_arg(a, "expert_interval", 2, lo=1)
    assert interval is not None
    value = a.values.get("num_experts")
    if isinstance(value, list) and len(value) not in (1, layers // interval):
        raise InputError("--num-experts", value, f"one count, or one per MoE layer ({layers // interval} with "
                         f"--num-layers {layers} and --expert-interval {interval}), as Megatron-DeepSpeed asserts")
    return [int((i + 1) % interval == 0) for i in range(layers)]


def _deepspeed_moe(a: MegatronArgs, experts: int, notes: list[str]) -> dict[str, Any]:
    """``model.moe`` of a Megatron-DeepSpeed launch with experts (its layers: megatron_later.moe_layout)."""
    mlp = a.values.get("mlp_type")
    if not neutral(mlp) and mlp != "standard":   # transformer.py: use_residual=(args.mlp_type == 'residual')
        raise InputError("--mlp-type", mlp, "standard (residual is PR-MoE: a dense MLP beside the experts, "
                         "deepspeed/moe/layer.py use_residual, which is not modelled)")
    if not neutral(a.values.get("use_tutel")):
        raise InputError("--use-tutel", a.values["use_tutel"], "left out: Tutel's MoE kernels are not modelled")
    if not neutral(a.values.get("moe_type")):
        raise InputError("--moe-type", a.values["moe_type"], "left out (not a Megatron-DeepSpeed argument; "
                         "clustersim does not read it)")
    # --disable-moe-token-dropping: store_false, dest moe_token_dropping (megatron_parse.FLAG_DEST)
    if a.values.get("moe_token_dropping") is False:
        raise InputError("--disable-moe-token-dropping", True, "left out (drop_tokens=True): without dropping "
                         "every expert is padded to the busiest one's load (sharded_moe.py), which is not modelled")
    tp = int_arg(a, "tensor_model_parallel_size", 1, lo=1)
    if tp != 1:
        raise InputError("--tensor-model-parallel-size", tp, "1 with Megatron-DeepSpeed's MoE (--num-experts "
                         f"{experts}): DeepSpeed's MOELayer.forward drops the tensor-parallel ranks' duplicate tokens "
                         "before its all-to-all and gathers them after (deepspeed/moe/sharded_moe.py), which is "
                         "not modelled")
    k = int_arg(a, "topk", 1, lo=1)
    assert k is not None
    allowed = "a number > 0 (each expert's capacity over its mean load, deepspeed/moe/sharded_moe.py _capacity)"
    c = float_arg(a, "moe_train_capacity_factor", allowed)
    c = 1.0 if c is None else c
    if c <= 0:
        raise InputError("--moe-train-capacity-factor", a.values["moe_train_capacity_factor"], allowed)
    min_cap = int_arg(a, "moe_min_capacity", 4, lo=0)
    assert min_cap is not None
    tokens = (int_arg(a, "micro_batch_size", 1, lo=1) or 1) * (int_arg(a, "seq_length", 0, lo=0) or 0)
    capacity = math.ceil(tokens / experts * c * k)
    if tokens and capacity < min_cap:
        raise InputError("--moe-min-capacity", min_cap, f"at most {capacity}, the capacity that "
                         f"--moe-train-capacity-factor {c:g} gives {tokens} tokens over {experts} experts at top-{k}: "
                         "a binding minimum capacity (sharded_moe.py _capacity) is not modelled")
    if "moe_min_capacity" in a.values:
        notes.append(f"--moe-min-capacity {min_cap}: not binding (each expert's capacity is {capacity} slots)")
    for name, why in DS_MOE_NO_COST.items():
        if not neutral(a.values.get(name)):
            notes.append(f"{_flag(name)}: no effect on the training step ({why})")
    notes.append("Megatron-DeepSpeed's DeepSpeed MoE layers priced as Megatron-Core's (all-to-all over the EP group, "
                 "grouped expert GEMMs), not DeepSpeed's gating and per-expert GEMM loop (docs/calibration.md)")
    return {"experts": experts, "top_k": k, "capacity_factor": c, "pad_to_capacity": True}


def float_arg(a: MegatronArgs, name: str, allowed: str = "a finite number") -> float | None:
    """A finite number argument (None when not given or printed as None); else an InputError."""
    v = a.values.get(name)
    if v is None or v == "None":
        return None
    try:
        x = float(v) if not isinstance(v, bool) else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x):
        raise InputError(_flag(name), v, allowed)
    return x


def capacity_factor(a: MegatronArgs, notes: list[str]) -> float | None:
    """--moe-expert-capacity-factor: None (dropless) when absent or negative (as Megatron), else > 0."""
    allowed = "a number > 0 (each expert's capacity over its mean load), or negative / left out for dropless"
    c = float_arg(a, "moe_expert_capacity_factor", allowed)
    if c is not None and c < 0:
        notes.append(f"--moe-expert-capacity-factor {c:g}: negative is no cap (Megatron sets it to None: dropless)")
        return None
    if c == 0:
        raise InputError("--moe-expert-capacity-factor", a.values["moe_expert_capacity_factor"], allowed)
    return c


def moe_fields(a: MegatronArgs, ffn: int, notes: list[str]) -> dict[str, Any] | None:
    """``model.moe`` of these arguments (None for a dense model); ``ffn``: the dense MLP width."""
    if deepspeed_launch(a):
        experts = deepspeed_experts(a)
        return None if experts == 1 else _deepspeed_moe(a, experts, notes)
    experts = int_arg(a, "num_experts", lo=0)
    if not experts:
        return None
    moe: dict[str, Any] = {"experts": experts, "top_k": int_arg(a, "moe_router_topk", 2, lo=1)}
    width = int_arg(a, "moe_ffn_hidden_size", lo=1) or ffn
    if width != ffn:
        moe["expert_ffn_hidden"] = width
    cap = capacity_factor(a, notes)
    if cap is not None:
        moe["capacity_factor"] = cap
    if not neutral(a.values.get("moe_pad_expert_input_to_capacity")):
        if cap is None:   # TransformerConfig: "moe_expert_capacity_factor must be set to use moe_pad_..."
            raise InputError("--moe-pad-expert-input-to-capacity", True, "only with --moe-expert-capacity-factor > 0 "
                             "(Megatron refuses the padding without a capacity)")
        moe["pad_to_capacity"] = True
    shared = int_arg(a, "moe_shared_expert_intermediate_size", lo=1)
    if shared:
        if shared % width == 0:
            moe["shared_experts"] = shared // width
        else:   # the total width of Megatron's one SharedExpertMLP
            moe["shared_ffn_hidden"] = shared
    if neutral(a.values.get("moe_grouped_gemm")):
        notes.append("no --moe-grouped-gemm: Megatron runs SequentialMLP (one GEMM per local expert); clustersim "
                     "prices the experts' GEMMs one per local expert either way (as TEGroupedMLP launches them)")
    return moe
