"""Megatron-LM arguments of the features the scenario gained after the importer was written
(``megatron_args.MAPPED_LATER``): multi-token prediction, the MoE layer pattern, MLA, node-limited
routing, the token dispatcher, recompute modules, Adam moment dtypes, the gradient reduction's dtype,
optimizer offload, the EP overlap and hierarchical context parallelism, each mapped to its scenario field or refused by name
(Megatron-LM megatron/training/arguments.py names them)."""

from __future__ import annotations

import re
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import config_int
from clustersim.importers.megatron_moe import deepspeed_launch, deepspeed_moe_layers
from clustersim.importers.megatron_parse import MegatronArgs, int_arg, neutral, neutral_or_one
from clustersim.workload.model_spec import moe_layer_fields


def _flag(name: str) -> str:
    return f"--{name.replace('_', '-')}"


def _list_expression(text: str, limit: int) -> list[int] | int | None:
    """A Python expression of integer lists, integers, ``+``, ``*`` and parentheses, such as
    Megatron's documented "([1]*3+[0]*1)*3", evaluated without eval (None if it is anything else,
    or a list longer than ``limit``)."""
    toks = re.findall(r"\d+|[\[\](),+*]|\S", text)
    pos = 0

    def peek() -> str:
        return toks[pos] if pos < len(toks) else ""

    def take(tok: str) -> None:
        nonlocal pos
        if peek() != tok:
            raise ValueError(tok)
        pos += 1

    def atom() -> list[int] | int:
        nonlocal pos
        tok = peek()
        if tok.isdigit():
            pos += 1
            return int(tok)
        if tok == "(":
            take("(")
            inner = expr()
            take(")")
            return inner
        take("[")
        items: list[int] = []
        while peek() != "]":
            if not peek().isdigit():
                raise ValueError(peek())
            items.append(int(peek()))
            pos += 1
            if peek() == ",":
                pos += 1
        take("]")
        return items

    def term() -> list[int] | int:
        nonlocal pos
        left = atom()
        while peek() == "*":
            pos += 1
            right = atom()
            if isinstance(left, list) and isinstance(right, list):
                raise ValueError("*")
            n = len(left) * right if isinstance(left, list) else len(right) * left if isinstance(right, list) else 0
            if n > limit:
                raise ValueError("long")
            left = left * right   # type: ignore[operator]
        return left

    def expr() -> list[int] | int:
        nonlocal pos
        left = term()
        while peek() == "+":
            pos += 1
            right = term()
            if isinstance(left, list) != isinstance(right, list) or (isinstance(left, list)
                                                                    and len(left) + len(right) > limit):
                raise ValueError("+")
            left = left + right   # type: ignore[operator]
        return left

    try:
        value = expr()
    except ValueError:
        return None
    return value if pos == len(toks) else None


def _moe_pattern(value: Any, layers: int) -> list[int]:
    """Megatron's --moe-layer-freq as one 0/1 per layer (megatron/training/arguments.py moe_freq_type,
    megatron/core/transformer/moe/moe_utils.py get_moe_layer_pattern: an int N puts MoE on the layers
    i with i % N == 0; a string such as "([0]*3+[1]*58)" or "([1]*3+[0]*1)*3" is a Python list
    expression, evaluated here by _list_expression (no eval); an arguments block prints the list)."""
    flag = "--moe-layer-freq"
    allowed = (f"an integer >= 1 or a list of {layers} zeros and ones such as \"([0]*3+[1]*{max(layers - 3, 1)})\" "
               "(one per layer)")
    if isinstance(value, bool):
        raise InputError(flag, value, allowed)
    if isinstance(value, int):
        if value < 1:
            raise InputError(flag, value, allowed)
        return [int(i % value == 0) for i in range(layers)]
    if isinstance(value, list):
        pattern = value
    else:
        parsed = _list_expression(str(value).strip().strip("'\""), layers)
        if parsed is None:
            raise InputError(flag, value, allowed)
        if isinstance(parsed, int):
            return _moe_pattern(parsed, layers)
        pattern = parsed
    if len(pattern) != layers or any(x not in (0, 1) or isinstance(x, bool) for x in pattern):
        raise InputError(flag, value, allowed)
    return [int(x) for x in pattern]


def moe_layout(a: MegatronArgs, layers: int) -> dict[str, Any]:
    """``model.moe`` fields of the launch's MoE layers, one rule for both spellings: Megatron-LM's
    --moe-layer-freq (_moe_pattern) and Megatron-DeepSpeed's --expert-interval (default 2:
    megatron_moe.deepspeed_moe_layers) each give one 0/1 per layer, which
    clustersim.workload.model_spec.moe_layer_fields states as first_dense_layers / every where they give
    exactly those layers, else as the pattern itself (``model.moe.pattern``); {} for every layer MoE; a
    pattern with no MoE layer is refused naming the flag."""
    if deepspeed_launch(a):
        if "moe_layer_freq" in a.values:   # not an argument of microsoft/Megatron-DeepSpeed megatron/arguments.py
            raise InputError("--moe-layer-freq", a.values["moe_layer_freq"], "left out of a Megatron-DeepSpeed "
                             "launch: its MoE layers are every --expert-interval-th layer")
        flag, value, pattern = "--expert-interval", a.get("expert_interval", 2), deepspeed_moe_layers(a, layers)
    else:
        flag, value = "--moe-layer-freq", a.get("moe_layer_freq")
        if neutral_or_one(value):
            return {}
        pattern = _moe_pattern(value, layers)
    fields = moe_layer_fields(pattern)
    if fields is None:
        raise InputError(flag, value, f"a layer pattern with at least one MoE layer among the {layers} layers")
    return fields


# --multi-latent-attention's shape flags (megatron/training/arguments.py, MLA arguments) -> model fields;
# --q-lora-rank left out is no query compression (0); the others must be given (no default is assumed)
MLA_FLAGS = {"kv_lora_rank": "kv_lora_rank", "qk_head_dim": "qk_nope_head_dim",
             "qk_pos_emb_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim"}
# --recompute-modules choices of megatron/training/arguments.py that the scenario states
# (parallel.recompute_modules); the others (mlp, moe, shared_experts, ...) are refused by name
RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "layernorm", "moe_act")
# --moe-token-dispatcher-type choices the scenario states (model.moe.token_dispatcher)
TOKEN_DISPATCHERS = ("alltoall", "flex")


def later_fields(a: MegatronArgs, model: dict[str, Any], parallel: dict[str, Any], training: dict[str, Any],
                  layers: int, notes: list[str]) -> None:
    """Arguments the scenario gained fields for (MAPPED_LATER): MTP, the MoE layer pattern, MLA, node-limited
    routing, the token dispatcher, recompute modules, Adam moment dtypes, the gradient reduction's dtype,
    optimizer offload, the EP overlap and hierarchical CP (Megatron-LM megatron/training/arguments.py names)."""
    mtp = int_arg(a, "mtp_num_layers", lo=0)
    if mtp:
        model["mtp_layers"] = mtp
    if a.get("multi_latent_attention"):
        model["attention"] = "mla"
        model.pop("head_dim", None)          # --kv-channels is no MLA head width
        model.pop("qk_norm", None)           # with MLA, --qk-layernorm norms the latents (MLASelfAttention)
        model["q_lora_rank"] = int_arg(a, "q_lora_rank", 0, lo=0) or 0
        for arg, key in MLA_FLAGS.items():
            v = int_arg(a, arg, lo=1)
            if v is None:
                raise InputError(_flag(arg), None, f"a number with --multi-latent-attention (model.{key}); "
                                 "the file does not give it")
            model[key] = v
    moe = model.get("moe")
    if moe is not None:
        moe.update(moe_layout(a, layers))
        groups = int_arg(a, "moe_router_num_groups", lo=0)
        if groups:
            moe["router_num_groups"] = groups
            moe["router_group_topk"] = int_arg(a, "moe_router_group_topk", 0, lo=0) or 0
        disp = a.get("moe_token_dispatcher_type")
        if disp is None and "moe_token_dispatcher_type" not in a.values and not deepspeed_launch(a):
            # Megatron's argparse default (megatron/training/arguments.py: default='allgather'): a
            # command line without the flag runs the allgather dispatcher, which is not modelled
            # (Megatron-DeepSpeed has no such flag: DeepSpeed's MOELayer runs its own all-to-all)
            raise InputError("--moe-token-dispatcher-type", "(not given: Megatron's default allgather)",
                             f"{', '.join(TOKEN_DISPATCHERS)} stated on the command line (model.moe.token_dispatcher; "
                             "the allgather dispatcher is not modelled)")
        if disp not in (None, "None"):
            if disp not in TOKEN_DISPATCHERS:
                raise InputError("--moe-token-dispatcher-type", disp, f"{', '.join(TOKEN_DISPATCHERS)} "
                                 "(model.moe.token_dispatcher; the others are not modelled)")
            if disp != "alltoall":
                moe["token_dispatcher"] = disp
    if a.get("overlap_moe_expert_parallel_comm"):
        parallel["overlap_moe_expert_parallel_comm"] = True
    hcp = a.get("hierarchical_context_parallel_sizes")
    if not neutral(hcp):
        sizes = hcp if isinstance(hcp, list) else [hcp]
        if len(sizes) != 2:
            raise InputError("--hierarchical-context-parallel-sizes", hcp, "two sizes (all-to-all, ring) "
                             "(parallel.hierarchical_cp_sizes)")
        if parallel.get("cp_comm") == "a2a+p2p":
            parallel["hierarchical_cp_sizes"] = [config_int(x, "--hierarchical-context-parallel-sizes") for x in sizes]
        else:   # Megatron reads the sizes with --cp-comm-type a2a+p2p only
            notes.append(f"--hierarchical-context-parallel-sizes {' '.join(map(str, sizes))}: not read without "
                         "--cp-comm-type a2a+p2p (as Megatron)")
    mods = a.get("recompute_modules")
    if parallel.get("recompute") == "selective" and not neutral(mods):
        mods = [str(m) for m in (mods if isinstance(mods, list) else [mods])]
        bad = [m for m in mods if m not in RECOMPUTE_MODULES]
        if bad:
            raise InputError("--recompute-modules", " ".join(bad), f"{', '.join(RECOMPUTE_MODULES)} "
                             "(parallel.recompute_modules; the others are not modelled)")
        for mod, needs, has in (("mla_up_proj", "--multi-latent-attention", model.get("attention") == "mla"),
                                ("moe_act", "--num-experts", moe is not None)):
            if mod in mods and not has:
                raise InputError("--recompute-modules", mod, f"modules of this model: {mod} needs {needs}")
        extra = sorted({m for m in mods if m != "core_attn"})
        if extra:
            parallel["recompute_modules"] = extra
        if "core_attn" not in mods:
            notes.append("--recompute-modules without core_attn: clustersim's selective recompute always "
                         "recomputes the attention core")
    moments = {a.get(k) for k in ("exp_avg_dtype", "exp_avg_sq_dtype")} - {None, "None"}
    if moments and moments != {"fp32"}:
        if moments != {"bf16"} or a.get("exp_avg_dtype") != a.get("exp_avg_sq_dtype"):
            raise InputError("--exp-avg-dtype / --exp-avg-sq-dtype",
                             f"{a.get('exp_avg_dtype', 'fp32')} / {a.get('exp_avg_sq_dtype', 'fp32')}",
                             "both fp32 or both bf16 (training.adam_moments)")
        training["adam_moments"] = "bf16"
    if a.get("grad_reduce_in_bf16"):
        # validate_args (megatron/training/arguments.py), under --bf16 only: "if args.grad_reduce_in_bf16:
        # args.accumulate_allreduce_grads_in_fp32 = False"; the DDP gradient buffer then takes the parameter
        # dtype (megatron/core/distributed/distributed_data_parallel.py grad_dtype): bf16 main grads, reduced in bf16
        if a.get("bf16") and not a.get("deepspeed"):
            training["grad_reduce_dtype"] = "bf16"
        else:
            notes.append("--grad-reduce-in-bf16: no effect without --bf16 (Megatron reads it under --bf16 only; "
                         "Megatron-DeepSpeed has no such flag)")
    if a.get("fp16") and not a.get("deepspeed") and a.get("accumulate_allreduce_grads_in_fp32"):
        # Megatron forces fp32 accumulation and reduction under --bf16 only (megatron/training/arguments.py
        # validate_args: "if args.bf16: ... args.accumulate_allreduce_grads_in_fp32 = True"): --fp16 reduces
        # its fp16 main grads (frameworks.grad_reduce_dtype) unless the flag asks for fp32 (DDP grad_dtype =
        # torch.float if grad_reduce_in_fp32 else param.dtype, megatron/core/distributed/distributed_data_parallel.py).
        # Under --bf16 the flag is Megatron's own default and every log prints it True: nothing to carry
        training["grad_reduce_dtype"] = "fp32"
    if a.get("optimizer_cpu_offload"):
        frac = a.get("optimizer_offload_fraction", 1.0)
        if frac not in (1, 1.0):     # HybridDeviceOptimizer keeps the rest on the GPU
            raise InputError("--optimizer-offload-fraction", frac, "1.0 with --optimizer-cpu-offload: the scenario "
                             "offloads the whole optimizer (parallel.offload.optimizer)")
        parallel["offload"] = {"optimizer": True}
