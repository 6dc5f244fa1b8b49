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
differently: ``--num-experts`` is a list (1 = a dense model, its default), ``--topk`` (default 1),
``--expert-interval`` (default 2), ``--moe-expert-parallel-size``, capacity-factor gating
(``--moe-train-capacity-factor``, ``--moe-min-capacity``). A dense one (``--num-experts 1``)
imports as dense; a MoE one is refused by name (its DeepSpeed MoE layers are not modelled).
"""

from __future__ import annotations

import math
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import DEEPSPEED_MOE_INSTEAD
from clustersim.importers.megatron_parse import MegatronArgs, int_arg, neutral

# Megatron-Core MoE arguments mapped here (listed as known by megatron_args)
MOE_MAPPED = ("moe_expert_capacity_factor", "moe_pad_expert_input_to_capacity", "moe_shared_expert_intermediate_size",
              "moe_grouped_gemm")
# Megatron-DeepSpeed's MoE arguments: harmless with --num-experts 1, else the launch is refused
DS_MOE_ARGS = ("moe_expert_parallel_size", "expert_interval", "topk", "moe_train_capacity_factor",
               "moe_eval_capacity_factor", "moe_min_capacity", "moe_loss_coeff", "create_moe_param_group",
               "disable_moe_token_dropping", "use_tutel", "mlp_type", "moe_type")


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def deepspeed_launch(a: MegatronArgs) -> bool:
    """Megatron-DeepSpeed: --deepspeed, or one of its MoE arguments (Megatron-Core has none of them)."""
    return bool(a.values.get("deepspeed")) or any(k in a.values for k in DS_MOE_ARGS)


def _deepspeed_experts(a: MegatronArgs) -> None:
    """Megatron-DeepSpeed's --num-experts (nargs='+', default [1]): all ones is a dense model;
    anything else is its DeepSpeed MoE, refused by name."""
    value = a.values.get("num_experts")
    counts = value if isinstance(value, list) else [value]
    if neutral(value) or all(c == 1 and not isinstance(c, bool) for c in counts):
        return
    given = [_flag(k) for k in DS_MOE_ARGS if k in a.values]
    raise InputError("--num-experts", value, "1 (a dense model) for a Megatron-DeepSpeed launch: its DeepSpeed MoE "
                     "layers (expert parallelism --moe-expert-parallel-size, --topk default 1, MoE every "
                     "--expert-interval layers, capacity gating) are not read from it"
                     + (f" (the launch gives {', '.join(given)})" if given else "") + ". " + DEEPSPEED_MOE_INSTEAD)


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
        _deepspeed_experts(a)
        return None
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
