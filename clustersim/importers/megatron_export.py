"""A scenario -> the Megatron-LM launch that runs it (the inverse of megatron_args, for round trips
and for users who start from clustersim).

The flags are Megatron-LM's (megatron/training/arguments.py). The vocabulary is written as
``--tokenizer-type NullTokenizer --vocab-size V-1 --make-vocab-size-divisible-by 1``: the null
tokenizer adds one end-of-document token and the padding then changes nothing, so Megatron
builds exactly the scenario's (already padded) vocabulary of V rows.
"""

from __future__ import annotations

import dataclasses
import itertools
import shlex
from typing import Any

from clustersim.errors import InputError
from clustersim.frameworks import grad_reduce_dtype
from clustersim.parallel.layout import grad_overlap_field, grad_overlap_unread
from clustersim.scenario import Scenario


def megatron_flags(sc: Scenario) -> list[str]:
    m, p, t = sc.model, sc.parallel, sc.training
    flags = [f"--num-layers {m.layers}", f"--hidden-size {m.hidden}", f"--num-attention-heads {m.heads}",
             f"--ffn-hidden-size {m.ffn_hidden}", f"--seq-length {m.seq_len}", f"--max-position-embeddings {m.seq_len}",
             "--tokenizer-type NullTokenizer", f"--vocab-size {m.vocab - 1}", "--make-vocab-size-divisible-by 1"]
    if m.kv_heads != m.heads:
        flags += ["--group-query-attention", f"--num-query-groups {m.kv_heads}"]
    if m.ffn_act == "swiglu":
        flags.append("--swiglu")
    elif m.ffn_act == "squared-relu":
        flags.append("--squared-relu")
    if not m.is_mla and m.q_width != m.hidden:
        flags.append(f"--kv-channels {m.head_dim}")
    if m.qk_norm:
        flags.append("--qk-layernorm")
    if not m.tie_embeddings:
        flags.append("--untie-embeddings-and-output-weights")
    if m.mtp_layers:   # multi-token prediction (the layout flag below places the modules)
        flags.append(f"--mtp-num-layers {m.mtp_layers}")
    if m.is_moe:
        flags += [f"--num-experts {m.moe_experts}", f"--moe-router-topk {m.moe_top_k}",
                  f"--moe-token-dispatcher-type {m.moe_token_dispatcher}"]   # Megatron's default is allgather
        if m.moe_expert_ffn_hidden != m.ffn_hidden:
            flags.append(f"--moe-ffn-hidden-size {m.moe_expert_ffn_hidden}")
        pattern = [1 if m.layer_kind(i).moe else 0 for i in range(m.layers)]
        if 0 in pattern:   # dense layers among the MoE ones: Megatron's list expression, run by run
            runs = "+".join(f"[{v}]*{len(list(g))}" for v, g in itertools.groupby(pattern))
            flags.append("--moe-layer-freq " + shlex.quote(f"({runs})"))
        if m.moe_shared_ffn_hidden:   # Megatron-Core: the shared experts' total width
            flags.append(f"--moe-shared-expert-intermediate-size {m.moe_shared_ffn_hidden}")
    flags += [f"--tensor-model-parallel-size {p.tp}", f"--pipeline-model-parallel-size {p.pp}",
              f"--context-parallel-size {p.cp}", f"--expert-model-parallel-size {p.ep}",
              f"--micro-batch-size {p.micro_batch}", f"--global-batch-size {p.global_batch}"]
    if p.expert_tp:
        flags.append(f"--expert-tensor-parallel-size {p.expert_tp}")   # MoE parallel folding (ETP)
    if p.sequence_parallel:
        flags.append("--sequence-parallel")
    if p.cp > 1 and p.cp_comm != "p2p":
        flags.append(f"--cp-comm-type {p.cp_comm}")
    split = _split_flags(sc)
    if p.virtual_stages > 1 and not p.pipeline_layout and "--pipeline-model-parallel-layout" not in " ".join(split):
        flags.append(f"--num-virtual-stages-per-pipeline-rank {p.virtual_stages}")
    flags += split
    if p.recompute == "selective":
        flags.append("--recompute-granularity selective")
    elif p.recompute == "full":
        flags += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    if p.zero_stage == 1:
        flags.append("--use-distributed-optimizer")
    elif p.zero_stage in (2, 3):
        strategy = "optim_grads" if p.zero_stage == 2 else "optim_grads_params"
        flags += ["--use-megatron-fsdp", f"--data-parallel-sharding-strategy {strategy}"]
    # --overlap-grad-reduce: Megatron-FSDP's reduce-scatter under ZeRO-3, the DDP buckets below it
    grad_overlap = getattr(p, grad_overlap_field(p.zero_stage))
    for on, flag in ((grad_overlap, "--overlap-grad-reduce"), (p.overlap_param_gather, "--overlap-param-gather"),
                     (p.tp_comm_overlap, "--tp-comm-overlap")):
        if on:
            flags.append(flag)
    if p.dp_bucket_params:
        flags.append(f"--ddp-bucket-size {p.dp_bucket_params}")
    flags.append({"bf16": "--bf16", "fp16": "--fp16", "fp8": f"--bf16 --fp8-format hybrid --fp8-recipe {t.recipe}",
                  "fp4": f"--bf16 --fp4-format e2m1 --fp4-recipe {t.recipe}"}.get(t.dtype, ""))
    if p.grad_reduce_dtype == "bf16":   # the loader allows it under bf16 / fp8 / fp4, all written with --bf16
        flags.append("--grad-reduce-in-bf16")   # read under --bf16 (megatron/training/arguments.py validate_args)
    elif t.dtype == "fp16" and grad_reduce_dtype(p.zero_stage, p.fsdp_version, sc.framework, p.grad_reduce_dtype,
                                                 dtype=t.dtype) == "fp32":
        # --fp16 alone reduces in fp16; validate_args forces fp32 under --bf16 only (frameworks.grad_reduce_dtype)
        flags.append("--accumulate-allreduce-grads-in-fp32")
    if t.optimizer == "sgd":
        flags.append("--optimizer sgd")
    if sc.framework.name == "megatron-legacy":
        flags += ["--use-legacy-models", "--transformer-impl local"]
        if t.attention == "flash":
            flags.append("--use-flash-attn")
    else:
        flags.append("--transformer-impl transformer_engine")
        if t.attention != sc.framework.attention:
            flags.append(f"--attention-backend {'flash' if t.attention == 'flash' else 'unfused'}")
    return [f for f in flags if f]


def _split_flags(sc: Scenario) -> list[str]:
    """Megatron-Core's flags for the scenario's pipeline split (clustersim.parallel.split): its own
    flags where they say it, else the layout string of the resolved counts (the embedding counted
    as more than one layer, torchtitan's option, has no Megatron flag)."""
    from clustersim.parallel.split import flag_layout, layout_string, mtp_model_stage, split_is_set

    p = sc.parallel
    if not split_is_set(p):
        # clustersim's even split where Megatron-Core builds it without a flag; else (126 layers on
        # pp 16) the layout string of the same counts, the one flag that gives it
        layout = "" if p.layers_per_stage else flag_layout(p.schedule, p.pp, p.virtual_stages, sc.model.layers,
                                                            sc.model.mtp_layers)
        return [f"--pipeline-model-parallel-layout {shlex.quote(layout)}"] if layout else []
    out = []
    if p.first_stage_layers:
        out.append(f"--decoder-first-pipeline-num-layers {p.first_stage_layers}")
    if p.last_stage_layers:
        out.append(f"--decoder-last-pipeline-num-layers {p.last_stage_layers}")
    if out:
        return out
    if p.account_for_embedding in (0, 1) and p.account_for_loss in (0, 1) and not p.pipeline_layout:
        counted = sum(p.layers_per_stage) + p.account_for_embedding + p.account_for_loss
        if counted % len(p.layers_per_stage) == 0:   # Megatron-Core accepts only an exact split
            return [f for on, f in ((p.account_for_embedding, "--account-for-embedding-in-pipeline-split"),
                                    (p.account_for_loss, "--account-for-loss-in-pipeline-split")) if on]
    layout = layout_string(p.layers_per_stage, sc.model.mtp_layers, mtp_model_stage(p, len(p.layers_per_stage)))
    return [f"--pipeline-model-parallel-layout {shlex.quote(layout)}"]


def _default_counts(sc: Scenario) -> tuple[int, ...]:
    """clustersim's split of a scenario that sets none (clustersim.parallel.pipeline.model_split,
    what the plan builds), per model stage."""
    from clustersim.parallel.pipeline import model_split, stage_graph

    p = sc.parallel
    return model_split(stage_graph(p.schedule, p.pp, p.virtual_stages), sc.model.layers, sc.model.mtp_layers)


def megatron_command(sc: Scenario, script: str = "pretrain_gpt.py") -> str:
    """``torchrun --nproc-per-node G --nnodes N pretrain_gpt.py FLAGS`` with one flag per line.

    The launch is read back with the importer before it is returned: a scenario field that these
    flags do not carry (a sliding window, a GeGLU MLP, a CP exchange, ...) is refused naming it
    (InputError) rather than exported as a different, smaller model."""
    c = sc.cluster
    head = f"torchrun --nproc-per-node {c.gpus_per_node} --nnodes {c.num_nodes} {script}"
    text = " \\\n    ".join([head, *megatron_flags(sc)]) + "\n"
    _check_round_trip(sc, text)
    return text


# fields that a launch may say another way: the name, and how the pipeline split is stated (the
# split itself, parallel.layers_per_stage with the counts resolved, must come back the same)
_SAID_OTHERWISE = frozenset({"name", "account_for_embedding", "account_for_loss", "first_stage_layers",
                             "last_stage_layers", "pipeline_layout"})


def _check_round_trip(sc: Scenario, text: str) -> None:
    """InputError naming the first model, parallel or training field that ``text`` imports as
    something else than ``sc`` has."""
    from clustersim.importers import finish, import_text  # (the package imports its formats at load)
    from clustersim.parallel.split import split_is_set
    from clustersim.scenario import scenario_from_dict

    back = scenario_from_dict(finish(import_text("megatron-args", text, "cmd", cluster=sc.cluster.name), []).scenario)
    # the overlap of the gradient reduction that this ZeRO stage does not read (one flag carries both)
    unread = grad_overlap_unread(sc.parallel.zero_stage)
    for part in ("model", "parallel", "training"):
        mine, theirs = getattr(sc, part), getattr(back, part)
        for f in dataclasses.fields(mine):
            if f.name == unread and part == "parallel":
                continue
            if f.name == "grad_reduce_dtype" and part == "parallel":   # fp32 stated is Megatron's own rule
                mine_v, theirs_v = (grad_reduce_dtype(x.parallel.zero_stage, x.parallel.fsdp_version, x.framework,
                                                      x.parallel.grad_reduce_dtype, dtype=x.training.dtype)
                                    for x in (sc, back))
                if mine_v != theirs_v:
                    raise InputError("training.grad_reduce_dtype", mine_v, f"what the Megatron-LM export can write "
                                     f"({theirs_v!r} after a round trip: --grad-reduce-in-bf16 needs --bf16, "
                                     "--fp16 reduces in fp16 or, with --accumulate-allreduce-grads-in-fp32, fp32)")
                continue
            if f.name == "layers_per_stage" and part == "parallel" and not mine.layers_per_stage \
                    and not split_is_set(mine) and theirs.pipeline_layout:   # the even split, stated as a layout
                if _default_counts(sc) != theirs.layers_per_stage:
                    raise InputError("parallel.layers_per_stage", _default_counts(sc), "what the Megatron-LM export "
                                     f"can write ({theirs.layers_per_stage!r} after a round trip)")
                continue
            if f.name not in _SAID_OTHERWISE and getattr(mine, f.name) != getattr(theirs, f.name):
                raise InputError(f"{part}.{f.name}", getattr(mine, f.name),
                                 f"what the Megatron-LM export can write ({getattr(theirs, f.name)!r} after a round "
                                 "trip through its flags: no flag here carries this value)")


def cluster_overrides(data: dict[str, Any]) -> list[str]:
    """``--set`` assignments for the scenario's cluster section beyond preset and nodes (fabrics,
    NICs: a Megatron command line cannot carry them)."""
    c = data.get("cluster") or {}
    return [f"cluster.{k}={shlex.quote(str(v))}" for k, v in sorted(c.items()) if k not in ("preset", "nodes")]
