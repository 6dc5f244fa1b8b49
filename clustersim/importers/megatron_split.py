"""Megatron's pipeline split arguments -> the scenario's split fields (clustersim.parallel.split,
docs/parallel.md): Megatron-Core's ``--decoder-first/last-pipeline-num-layers``,
``--account-for-embedding/loss-in-pipeline-split`` and ``--pipeline-model-parallel-layout``, and
Megatron-DeepSpeed's ``--pp-partition-method``. Used by ``megatron_args.scenario_from_args``."""

from __future__ import annotations

import re
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.megatron_parse import int_arg, neutral
from clustersim.parallel.split import megatron_even_split_refusal, parse_layout

# Megatron-Core's pipeline split arguments (argparse dest) -> scenario fields; the virtual stages a
# layout string implies are set by megatron_args.scenario_from_args
PIPELINE_SPLIT_ARGS = {"decoder_first_pipeline_num_layers": "first_stage_layers",
                       "decoder_last_pipeline_num_layers": "last_stage_layers",
                       "account_for_embedding_in_pipeline_split": "account_for_embedding",
                       "account_for_loss_in_pipeline_split": "account_for_loss",
                       "pipeline_model_parallel_layout": "pipeline_layout"}


def partition_method(a) -> str:
    """Megatron-DeepSpeed's ``--pp-partition-method`` as written (quotes stripped; "" when absent)."""
    return str(a.get("pp_partition_method") or "").strip("'\"")


def pipeline_split(a, notes: list[str]) -> dict[str, Any]:
    """The scenario's split fields from Megatron-Core's pipeline split arguments, and from
    Megatron-DeepSpeed's ``--pp-partition-method`` (DeepSpeed's PipelineModule ``type:REGEX``
    weighs the layers whose class matches; ``type:transformer|embedding`` counts the embedding and
    the tied output embedding as one layer each: bigscience-workshop/bigscience
    train/tr11-176B-ml/README.md, "pp rank 0: [embed | 5 transformer blocks]" for 70 layers on PP 12;
    DeepSpeed balances the counts, which equals clustersim's rule where they divide evenly)."""
    out: dict[str, Any] = {}
    for arg, key in PIPELINE_SPLIT_ARGS.items():
        value = a.get(arg)
        if neutral(value):
            continue
        if key == "pipeline_layout":
            out[key] = "".join(str(value).split()).strip("'\"")   # the shell reader spaces out ")"
        elif key.startswith("account_for"):
            out[key] = True
        else:
            out[key] = int_arg(a, arg)
    method = partition_method(a)
    try:
        counts_embedding = method.startswith("type:") and re.search(method[5:], "EmbeddingPipe", re.IGNORECASE)
    except re.error:
        counts_embedding = False
    if counts_embedding:
        out.update(account_for_embedding=True, account_for_loss=True)
        notes.append(f"--pp-partition-method {method}: the embedding and the tied output embedding each count "
                     "as a layer in the pipeline split")
    elif method and method not in ("parameters", "type:transformer", "uniform"):
        notes.append(f"--pp-partition-method {method}: split as clustersim's even split")
    return out


def check_split(parallel: dict[str, Any], layers: int, mtp_layers: int = 0, core_weights: bool = False) -> None:
    """The split rule (clustersim.parallel.split) on the mapped fields, its InputError naming the
    Megatron argument that set the offending value; and Megatron-Core's own condition on the
    embedding and loss in the split: the layers and those two divide evenly over pp x vp
    (megatron/core/transformer/transformer_block.py get_num_layers_to_build), where clustersim's
    rule (torchtitan's) would give the first stages one more. ``core_weights``: the two were set by
    Megatron-Core's flags (DeepSpeed's ``--pp-partition-method`` balances without that condition)."""
    from types import SimpleNamespace

    from clustersim.parallel.split import framework_split

    flags = {f"parallel.{key}": arg for arg, key in PIPELINE_SPLIT_ARGS.items()}
    flags["parallel.pp"] = "pipeline_model_parallel_size"
    flags["parallel.virtual_stages"] = "virtual_pipeline_model_parallel_size"
    layout = SimpleNamespace(pp=parallel["pp"], virtual_stages=parallel.get("virtual_stages", 1),
                             schedule=parallel.get("schedule", "1f1b"), layers_per_stage=(),
                             first_stage_layers=parallel.get("first_stage_layers", 0),
                             last_stage_layers=parallel.get("last_stage_layers", 0),
                             account_for_embedding=int(parallel.get("account_for_embedding", 0)),
                             account_for_loss=int(parallel.get("account_for_loss", 0)),
                             pipeline_layout=parallel.get("pipeline_layout", ""))
    try:
        framework_split(layout, layers, mtp_layers)
    except InputError as exc:
        flag = flags.get(exc.field)
        if flag is None:
            raise
        raise InputError(f"--{flag.replace('_', '-')}", exc.value, exc.allowed) from None
    e, loss = layout.account_for_embedding, layout.account_for_loss
    stages = layout.pp * layout.virtual_stages
    if core_weights and (e or loss) and (layers + e + loss) % stages:
        flag = "account_for_embedding_in_pipeline_split" if e else "account_for_loss_in_pipeline_split"
        raise InputError(f"--{flag.replace('_', '-')}", True,
                         f"a split Megatron-Core runs: --num-layers ({layers}) plus the embedding and the loss it "
                         f"counts ({layers + e + loss}) divisible by pipeline x virtual stages ({stages})")


def check_split_asserts(a, layers: int, pp: int, vpp: int | None, per_vstage: int | None,
                        split: dict[str, Any]) -> None:
    """What Megatron-LM's validate_args and Megatron-Core's layer count assert about the pipeline
    (megatron/training/arguments.py; megatron/core/transformer/transformer_block.py
    get_num_layers_to_build): such a job never starts, so it is refused, not simulated."""
    if a.values.get("deepspeed"):   # Megatron-DeepSpeed splits with DeepSpeed's partitioner instead
        return
    first_last = a.get("decoder_first_pipeline_num_layers") or a.get("decoder_last_pipeline_num_layers")
    if per_vstage and vpp and a.get("num_layers_per_virtual_pipeline_stage") is not None \
            and (a.get("virtual_pipeline_model_parallel_size") or a.get("num_virtual_stages_per_pipeline_rank")) \
            and a.source != "arguments block":   # a log prints both (validate_args derives one)
        raise InputError("--num-layers-per-virtual-pipeline-stage", per_vstage,
                         "not together with --num-virtual-stages-per-pipeline-rank (Megatron-LM asserts: no more "
                         "than one)")
    if per_vstage and first_last:
        raise InputError("--num-layers-per-virtual-pipeline-stage", per_vstage,
                         "--num-virtual-stages-per-pipeline-rank with --decoder-first/last-pipeline-num-layers "
                         "(Megatron-LM asserts)")
    layout = a.get("pipeline_model_parallel_layout")
    chosen = a.get("num_virtual_stages_per_pipeline_rank") or a.get("num_layers_per_virtual_pipeline_stage")
    if not neutral(layout) and not neutral(chosen):
        # arguments.py validate_args lines 927-939 at d98e8a64d: "No more than one of the following arguments can be
        # set at the same time: --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,
        # --pipeline-model-parallel-layout" (a log prints the derived virtual_pipeline_model_parallel_size only)
        flag = ("--num-virtual-stages-per-pipeline-rank" if a.get("num_virtual_stages_per_pipeline_rank")
                else "--num-layers-per-virtual-pipeline-stage")
        raise InputError(flag, chosen, "left out with --pipeline-model-parallel-layout: the flags are mutually "
                         "exclusive (Megatron-LM asserts; the layout's stage count sets the virtual stages)")
    if not split and not per_vstage:
        refusal = megatron_even_split_refusal(layers, pp, vpp or 1)
        if refusal is not None:
            field, value, allowed = refusal
            flag = "--pipeline-model-parallel-size" if field == "parallel.pp" else "--num-virtual-stages-per-pipeline-rank"
            raise InputError(flag, value, f"{allowed} (--num-layers {layers}; Megatron-LM refuses the launch)")
    effective = vpp
    if not effective and not neutral(layout):
        effective = len(parse_layout("".join(str(layout).split()).strip("'\""))) // pp
    if not effective and per_vstage and layers % pp == 0 and (layers // pp) % per_vstage == 0:
        effective = layers // pp // per_vstage
    if effective and effective > 1 and pp == 2 and a.get("overlap_p2p_comm") not in (None, "None") \
            and neutral(a.get("overlap_p2p_comm")):
        # arguments.py validate_args lines 1000-1010 at d98e8a64d: "When interleaved schedule is used and p2p
        # communication overlap is disabled, pipeline-model-parallel size should be greater than 2"
        raise InputError("--no-overlap-p2p-communication", True,
                         "left out with interleaving on --pipeline-model-parallel-size 2: Megatron-LM asserts pp > 2 "
                         "when the interleaved schedule runs without p2p overlap")
