"""Training frameworks as data: the implementation defaults a scenario's ``framework:`` selects.

The same model and layout allocate memory and spend time differently under Megatron-Core,
Megatron-LM as in its 2021-22 papers ("megatron-legacy"), torchtitan, DeepSpeed's ZeRO optimizer and
DeepSpeed's BF16_Optimizer ("deepspeed-bf16") (attention
kernel, ZeRO-3 flavour, gradient reduction dtype, ...). ``clustersim/data/frameworks.yaml`` holds
one entry per framework with the source-code path of every value; it is read once into a frozen
``FrameworkSpec`` that the scenario carries, so that cost models read plain fields and never ask
"which framework?" themselves (STYLE.md habit 13).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from clustersim.errors import InputError
from clustersim.inputs import read_yaml_file

FRAMEWORK_FILE = Path(__file__).resolve().parent / "data" / "frameworks.yaml"
DEFAULT_FRAMEWORK = "megatron-core"
ATTENTION_KERNELS = ("flash", "standard")
ZERO3_IMPLS = ("megatron-fsdp", "fsdp1", "fsdp2", "deepspeed")
REDUCE_DTYPES = ("fp32", "bf16", "fp16")
# a framework entry's grad_reduce_dtype may also be "model": the reduction runs in the job's own dtype
# (DeepSpeed's communication_data_type default: model_reduce_dtype)
MODEL_DTYPE = "model"
ZERO1_REDUCE_OPS = ("reduce_scatter", "all_reduce")
TP_BACKWARD_OVERLAP = ("always", "with-sp", "never")
PP_SEND_BLOCKING = ("always", "except-interleaved", "never")
_BOOLS = ("overlap_grad_reduce", "overlap_param_gather", "grads_in_reduce_dtype", "keeps_lp_grads",
          "reduce_cast_copy")
# the schedules a framework entry may list (clustersim.parallel.layout.SCHEDULES, not imported: a floor above)
PIPELINE_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-2p", "zb-v", "dualpipe", "dualpipe-v")
_LISTS = {"zero_stages": (0, 1, 2, 3), "pipeline_schedules": PIPELINE_SCHEDULES,
          "optimizer_offload_zero_stages": (0, 1, 2, 3)}
ELEMENTWISE = ("fused", "eager")


@dataclass(frozen=True, slots=True)
class FrameworkSpec:
    """Implementation defaults of one training framework (see clustersim/data/frameworks.yaml)."""

    name: str
    description: str
    attention: str          # the kernel `training.attention: auto` resolves to: flash | standard
    # --- timing (docs/engine.md): defaults of how the implementation overlaps communication ---
    overlap_grad_reduce: bool    # data-parallel gradient reduction overlapped with the backward pass
    overlap_param_gather: bool   # ZeRO-1/2 parameter all-gather overlapped with the next forward pass
    tp_backward_overlap: str     # backward TP collectives beside the GEMMs: always | with-sp | never
    # pipeline sends that hold the sender until the transfer is done: always | except-interleaved | never
    pp_send_blocking: str
    zero3: str              # ZeRO-3 implementation: megatron-fsdp | fsdp1 | fsdp2 | deepspeed
    # dtype of the data-parallel gradient reduction: fp32 | bf16 | fp16, or model: the job's own dtype
    # (model_reduce_dtype; DeepSpeed). The Megatron family's fp32 holds for bf16 and fp32 jobs only: an
    # fp16 job reduces in fp16 (grad_reduce_dtype)
    grad_reduce_dtype: str
    zero1_grad_reduce: str  # the collective reducing the gradients under ZeRO-1: reduce_scatter | all_reduce
    # bytes per parameter of the rank's whole (unsharded) gradient buffer that the framework streams
    # through once per step outside the optimizer kernel (zeroing, NaN check, 1/dp scaling); 0 = none modelled
    grad_buffer_bytes_per_param: int
    # bytes per parameter of the rank's gradients that the framework streams after every micro-batch's
    # backward, outside the backward's kernels (DeepSpeed BF16_Optimizer's fp32 accumulation); 0 = none
    micro_batch_grad_bytes_per_param: int
    # --- memory (docs/memory.md): how the implementation holds the job on the GPU (clustersim/memory/) ---
    elementwise: str        # norms, activation, bias/dropout/residual: fused kernels | eager torch ops
    param_bytes: int        # persistent bytes per parameter (16-bit training): 2 = bf16 buffer, 4 = fp32 param
    grad_bytes: int         # bytes per gradient element as accumulated (4 = fp32 main grads)
    # the accumulated gradient buffer is held in the reduction's dtype (Megatron's main_grad buffer:
    # fp32 or, with --grad-reduce-in-bf16, the parameter dtype), so that training.grad_reduce_dtype
    # sets its bytes too (grad_held_bytes); false: grad_bytes whatever the reduction's dtype
    grads_in_reduce_dtype: bool
    optimizer_bytes: int    # Adam state per parameter, with any fp32 master copy (12 = master + m + v)
    # the 16-bit .grad (param_bytes per parameter) stays allocated beside the fp32 accumulation buffer
    # from one backward to the next, and each is cast to an fp32 copy (grad_bytes per element) before it
    # is added in (DeepSpeed BF16_Optimizer.update_hp_grads; memory.states, memory.buffers.grad_cast_bytes)
    keeps_lp_grads: bool
    # the data-parallel reduction casts the whole flat gradient buffer to the reduction dtype in one
    # copy at the step's end (DeepSpeed engine.allreduce_bucket; memory.report.reduce_copy_bytes)
    reduce_cast_copy: bool
    loss_saved_bytes_per_logit: int  # what the cross-entropy keeps for the backward, per logit of one GPU
    loss_peak_bytes_per_logit: int   # logits and their copies alive at once while the loss runs, per logit
    zero_bucket_params: int  # data-parallel gradient bucket (elements); 0 = Megatron-Core's (grad_bucket_params)
    pipeline_zero_max: int   # the highest ZeRO stage the framework runs with pp > 1 (pipeline_zero_ok)
    # --- what the implementation runs at all (framework_refusal: the loader's rule and the sweep's) ---
    zero_stages: tuple[int, ...]          # the ZeRO stages it has (DeepSpeed's BF16_Optimizer: 0 and 1)
    pipeline_schedules: tuple[str, ...]   # the schedules its pipeline engine runs with pp > 1
    optimizer_offload_zero_stages: tuple[int, ...]   # the ZeRO stages with which it offloads the optimizer


_CHOICES = {"attention": ATTENTION_KERNELS, "zero3": ZERO3_IMPLS, "grad_reduce_dtype": (*REDUCE_DTYPES, MODEL_DTYPE),
            "zero1_grad_reduce": ZERO1_REDUCE_OPS, "pp_send_blocking": PP_SEND_BLOCKING,
            "elementwise": ELEMENTWISE}
_INTS = {"param_bytes": (2, 4), "grad_bytes": (2, 4), "optimizer_bytes": (8, 12, 16),
         "grad_buffer_bytes_per_param": tuple(range(0, 33)),
         "micro_batch_grad_bytes_per_param": tuple(range(0, 33)),
         "loss_saved_bytes_per_logit": (0, 2, 4, 6), "loss_peak_bytes_per_logit": tuple(range(0, 17)),
         "pipeline_zero_max": (0, 1, 2, 3)}


# Megatron-Core's default gradient bucket: max(40M, 1M x the data-parallel size counted with context
# parallelism) parameters (megatron/core/distributed/distributed_data_parallel.py, DistributedDataParallel
# __init__: bucket_size = max(40000000, 1000000 * data-parallel world size with_context_parallel=True))
MEGATRON_MIN_BUCKET_PARAMS = 40_000_000
MEGATRON_BUCKET_PARAMS_PER_DP_RANK = 1_000_000
# DeepSpeed's reduce_bucket_size default, 5e8 elements (deepspeed/runtime/zero/config.py
# DeepSpeedZeroConfig.reduce_bucket_size; deepspeed/runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3
# __init__ reduce_bucket_size=500000000)
DEEPSPEED_REDUCE_BUCKET_PARAMS = 500_000_000


def grad_bucket_params(framework: FrameworkSpec | None, par: Any) -> int:
    """Parameters per data-parallel gradient bucket, the one rule that the step's timing (the plan's
    bucketed reductions, ZeRO-3's DeepSpeed reduce buckets) and its memory (the ZeRO-2 and DeepSpeed
    ZeRO-3 bucket buffers) all read: ``parallel.dp_bucket_params`` if set; else,
    where DeepSpeed's ZeRO-3 runs (``zero3_impl``), its ``reduce_bucket_size`` default
    (``DEEPSPEED_REDUCE_BUCKET_PARAMS``, whatever the framework's ZeRO 0-2 bucket: Megatron-LM
    2021 hands ZeRO-3 to DeepSpeed); else the framework's own bucket (``zero_bucket_params``:
    DeepSpeed's reduce_bucket_size, torchtitan's DDP bucket_cap_mb), else Megatron-Core's
    ``max(40M, 1M x dp x cp)``. ``par``: a ParallelLayout (its dp, cp, dp_bucket_params,
    zero_stage, fsdp_version)."""
    if par.dp_bucket_params:
        return par.dp_bucket_params
    if runs_deepspeed_zero3(par.zero_stage, par.fsdp_version, framework):
        return DEEPSPEED_REDUCE_BUCKET_PARAMS
    if framework is not None and framework.zero_bucket_params:
        return framework.zero_bucket_params
    return max(MEGATRON_MIN_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP_RANK * par.dp * par.cp)


@functools.cache
def _catalog() -> dict[str, FrameworkSpec]:
    raw = read_yaml_file(FRAMEWORK_FILE, "frameworks", "the framework defaults file")
    keys = [f.name for f in fields(FrameworkSpec) if f.name != "name"]
    out = {}
    for name, entry in raw.items():
        where = f"frameworks.yaml: {name}"
        if not isinstance(entry, dict) or set(entry) != set(keys):
            got = sorted(entry) if isinstance(entry, dict) else entry
            raise InputError(where, got, f"exactly the keys {', '.join(keys)}")
        for key, allowed in _CHOICES.items():
            if entry[key] not in allowed:
                raise InputError(f"{where}.{key}", entry[key], allowed)
        for key in _BOOLS:
            if not isinstance(entry[key], bool):
                raise InputError(f"{where}.{key}", entry[key], "true or false")
        if entry["tp_backward_overlap"] not in TP_BACKWARD_OVERLAP:
            raise InputError(f"{where}.tp_backward_overlap", entry["tp_backward_overlap"], TP_BACKWARD_OVERLAP)
        for key, allowed_ints in _INTS.items():
            if type(entry[key]) is not int or entry[key] not in allowed_ints:
                raise InputError(f"{where}.{key}", entry[key], allowed_ints)
        if type(entry["zero_bucket_params"]) is not int or entry["zero_bucket_params"] < 0:
            raise InputError(f"{where}.zero_bucket_params", entry["zero_bucket_params"], "an integer >= 0")
        for key, allowed_items in _LISTS.items():
            if not isinstance(entry[key], list) or any(v not in allowed_items for v in entry[key]):
                raise InputError(f"{where}.{key}", entry[key], f"a list of {', '.join(map(str, allowed_items))}")
        out[name] = FrameworkSpec(name=name, **{k: tuple(entry[k]) if k in _LISTS else entry[k] for k in keys})
    return out


def pipeline_zero_ok(pipeline_zero_max: int, pp: int, zero_stage: int) -> bool:
    """Whether a framework whose pipeline runs ZeRO up to ``pipeline_zero_max`` runs ``zero_stage``
    with ``pp`` stages (DeepSpeed's PipelineEngine: at most ZeRO-1): the loader's rule and the sweep's."""
    return pp == 1 or zero_stage <= pipeline_zero_max


def framework_refusal(framework: FrameworkSpec, pp: int = 1, zero_stage: int | None = None,
                      schedule: str | None = None, offload_optimizer: bool | None = None
                      ) -> tuple[str, object, str] | None:
    """Why ``framework`` does not run this layout, as (field, value, what is allowed), or None where
    it does: the one rule that the scenario loader (``check_framework_layout``) and the sweep's space
    (clustersim.sweep.space: ``framework_runs`` over the options it knows so far) both apply. An
    argument left None is not checked (the sweep asks about the ZeRO stage before the schedule).

    * the ZeRO stages it has (``zero_stages``): DeepSpeed's BF16_Optimizer implements its own stage 1
      and runs with zero_optimization.stage 0 or 1 only (deepspeed/runtime/engine.py
      _do_optimizer_sanity_check returns BFLOAT16 for stage 1 only, or without ZeRO; stage 2 and 3 run
      DeepSpeed's ZeRO optimizer: framework deepspeed);
    * with pp > 1, the ZeRO stages its pipeline runs (``pipeline_zero_ok``);
    * with pp > 1, the schedules its pipeline engine runs (``pipeline_schedules``): DeepSpeed's
      PipelineEngine runs TrainSchedule, synchronous 1F1B (deepspeed/runtime/pipe/schedule.py
      TrainSchedule; pipe/engine.py train_batch builds it), no interleaved, GPipe or zero-bubble schedule;
    * optimizer offload only with the ZeRO stages that offload (``optimizer_offload_zero_stages``):
      DeepSpeed offloads through its ZeRO optimizer (zero_optimization.offload_optimizer is read by
      stage_1_and_2.py and stage3.py only; stage 0 has no ZeRO optimizer), and BF16_Optimizer never
      (engine.py _do_optimizer_sanity_check: "and not self.zero_cpu_offload()" sends an offloaded
      bf16 stage-1 run to the ZeRO optimizer). Commit edaa722 of deepspeedai/DeepSpeed.
    """
    name = framework.name
    if zero_stage is not None and zero_stage not in framework.zero_stages:
        return ("parallel.zero_stage", zero_stage, f"{' or '.join(map(str, framework.zero_stages))} under framework "
                f"{name}" + (" (BF16_Optimizer has no ZeRO-2/3: DeepSpeed runs ZeRO-2/3 through its ZeRO optimizer, "
                             "framework deepspeed)" if name == "deepspeed-bf16" else ""))
    if zero_stage is not None and not pipeline_zero_ok(framework.pipeline_zero_max, pp, zero_stage):
        return ("parallel.zero_stage", zero_stage,
                f"at most {framework.pipeline_zero_max} with pp > 1 under framework {name} (its "
                "pipeline engine refuses ZeRO-2 and ZeRO-3: 'incompatible with pipeline parallelism'), or pp 1")
    if schedule is not None and pp > 1 and schedule not in framework.pipeline_schedules:
        return ("parallel.schedule", schedule, f"{', '.join(framework.pipeline_schedules)} with pp > 1 under framework "
                f"{name} (the schedules its pipeline engine runs; DeepSpeed's PipelineEngine runs TrainSchedule, 1F1B)")
    if offload_optimizer and zero_stage is not None and zero_stage not in framework.optimizer_offload_zero_stages:
        stages = framework.optimizer_offload_zero_stages
        return ("parallel.offload.optimizer", True,
                f"false with parallel.zero_stage {zero_stage} under framework {name} ("
                + (f"it offloads the optimizer with ZeRO stage {', '.join(map(str, stages))} only: DeepSpeed offloads "
                   "through its ZeRO optimizer, zero_optimization.stage > 0)" if stages else
                   "BF16_Optimizer does not offload: an offloaded bf16 run is DeepSpeed's ZeRO optimizer, "
                   "framework deepspeed)"))
    return None


def framework_runs(framework: FrameworkSpec | None, pp: int = 1, zero_stage: int | None = None,
                   schedule: str | None = None, offload_optimizer: bool | None = None) -> bool:
    """Whether ``framework`` runs these options (``framework_refusal``; True without a framework)."""
    return framework is None or framework_refusal(framework, pp, zero_stage, schedule, offload_optimizer) is None


def check_framework_layout(framework: FrameworkSpec, pp: int, zero_stage: int, schedule: str,
                           offload_optimizer: bool) -> None:
    """InputError naming the field where ``framework`` does not run the layout (``framework_refusal``)."""
    refusal = framework_refusal(framework, pp, zero_stage, schedule, offload_optimizer)
    if refusal is not None:
        raise InputError(*refusal)


def megatron_family(name: str) -> bool:
    """Whether framework ``name`` is one of Megatron-LM's (megatron-core, megatron-legacy): the
    frameworks whose host costs, syncs, batch broadcast and MoE code paths are Megatron's."""
    return name.startswith("megatron")


def framework_names() -> tuple[str, ...]:
    return tuple(_catalog())


def load_framework(name: str) -> FrameworkSpec:
    """The frozen defaults of framework ``name``; InputError naming the allowed frameworks."""
    catalog = _catalog()
    if name not in catalog:
        raise InputError("framework", name, tuple(catalog))
    return catalog[name]


def zero3_impl(fsdp_version: int | None, framework: FrameworkSpec | None) -> str:
    """The ZeRO-3 implementation that runs: torch FSDP when ``parallel.fsdp.version`` is set, else
    the framework's (Megatron-FSDP without one). The plan and the memory model both call it."""
    if fsdp_version:
        return f"fsdp{fsdp_version}"
    return framework.zero3 if framework is not None else "megatron-fsdp"


def fsdp_in_pipeline_stage(par: Any, framework: FrameworkSpec | None) -> bool:
    """Whether ZeRO-3 runs as FSDP2 units inside torch.distributed.pipelining stages: torchtitan
    (its own FSDP2 or ``parallel.fsdp.version`` 2) with ``pp`` > 1 (``par``: a ParallelLayout).
    There the stage defers the gradient reduction to its last backward
    (torch/distributed/pipelining/stage.py ``backward_maybe_with_nosync``: "we need to accumulate
    gradients on previous steps and reduce them on the last step"; every backward runs with
    ``set_requires_gradient_sync(False)`` and ``set_reshard_after_backward(False)``, and after the
    last one ``run_post_backward`` calls each FSDP param group's ``post_backward``, which
    reduce-scatters the accumulated unsharded gradients). The one rule the plan (one
    reduce-scatter per unit per step, after the stage's last backward), the memory model (the
    stage's unsharded parameters and accumulated gradients) and ``reshards_after_forward`` read."""
    return (par.zero_stage == 3 and par.pp > 1 and framework is not None and framework.name == "torchtitan"
            and zero3_impl(par.fsdp_version, framework) == "fsdp2")


def reshards_after_forward(par: Any, framework: FrameworkSpec | None) -> bool:
    """Whether FSDP frees a unit's gathered parameters after its forward, so that its backward
    gathers them again: ``parallel.fsdp.reshard_after_forward`` where the scenario states it
    (``ParallelLayout.reshard_after_forward``; torchtitan's ``fsdp_reshard_after_forward``
    "always" / "never"), else torchtitan's "default" policy ``reshard_after_forward = not
    pp_enabled`` (torchtitan/models/llama3/infra/parallelize.py ``apply_fsdp``) under
    ``fsdp_in_pipeline_stage``, and true for every other FSDP (``fully_shard`` and FSDP1 default
    to resharding). The one rule the plan's backward gathers and the memory model read."""
    if par.reshard_after_forward is not None:
        return bool(par.reshard_after_forward)
    return not fsdp_in_pipeline_stage(par, framework)


def reduce_dtypes_allowed(dtype: str) -> tuple[str, ...]:
    """The values ``training.grad_reduce_dtype`` may take in a job training in ``dtype``: fp32, or
    the job's own 16-bit dtype (bf16 for bf16 and for fp8 / fp4, which Megatron runs under --bf16;
    fp16 for fp16); an fp32 job reduces its fp32 gradients (Megatron reads --grad-reduce-in-bf16
    under --bf16 only: megatron/training/arguments.py validate_args)."""
    if dtype == "fp32":
        return ("fp32",)
    return ("fp32", "fp16") if dtype == "fp16" else ("fp32", "bf16")


def grad_reduce_dtype(zero_stage: int, fsdp_version: int | None, framework: FrameworkSpec | None,
                      override: str | None = None, *, dtype: str) -> str:
    """The dtype the data-parallel reduction of a job training in ``dtype`` runs in, the one rule
    that the plan's reduced bytes, the memory model's gradient buffers and buckets, the optimizer
    step's buffer passes and the run --json echo read:
    ``override`` (the scenario's ``training.grad_reduce_dtype``, carried as
    ``ParallelLayout.grad_reduce_dtype``: Megatron ``--grad-reduce-in-bf16`` or, under --fp16,
    ``--accumulate-allreduce-grads-in-fp32``, torchtitan ``mixed_precision_reduce``, DeepSpeed
    ``communication_data_type``) where the scenario sets it (one of ``reduce_dtypes_allowed``,
    else InputError naming the field);
    else fp16 for an fp16 job of the Megatron family: Megatron forces fp32 accumulation and
    reduction for bf16 only (megatron/training/arguments.py validate_args, and megatron/arguments.py
    of 2021: ``if args.bf16: ... args.accumulate_allreduce_grads_in_fp32 = True``;
    --accumulate-allreduce-grads-in-fp32 defaults to False), and its DDP holds and reduces the
    gradient buffer in the parameter dtype without it (megatron/core/distributed/distributed_data_parallel.py,
    since 2025 param_and_grad_buffer.py: ``grad_dtype = torch.float if ddp_config.grad_reduce_in_fp32 else
    param.dtype``, with ``grad_reduce_in_fp32 = args.accumulate_allreduce_grads_in_fp32``,
    megatron/training/training.py; megatron/model/distributed.py
    2021-23 ``_get_buffer_type``: ``torch.float if self.accumulate_allreduce_grads_in_fp32 else param.dtype``);
    else the framework's ``grad_reduce_dtype`` (``model``: ``model_reduce_dtype``, DeepSpeed's),
    except under DeepSpeed ZeRO-3, which reduce-scatters in its communication dtype whatever the
    framework's ZeRO 0-2 reduction (``model_reduce_dtype``: Megatron-LM 2021 hands ZeRO-3 to
    DeepSpeed); fp32 without a framework (the conservative default of the memory model's callers
    without one)."""
    if override is not None:
        allowed = reduce_dtypes_allowed(dtype)
        if override not in allowed:
            raise InputError("training.grad_reduce_dtype", override,
                             f"{' or '.join(allowed)} or left out with training.dtype {dtype} (a 16-bit "
                             "reduction runs in the job's own 16-bit dtype)")
        return override
    if dtype == "fp16" and framework is not None and megatron_family(framework.name):
        return "fp16"
    if runs_deepspeed_zero3(zero_stage, fsdp_version, framework):
        return model_reduce_dtype(dtype)
    own = framework.grad_reduce_dtype if framework is not None else "fp32"
    return model_reduce_dtype(dtype) if own == MODEL_DTYPE else own


def model_reduce_dtype(dtype: str) -> str:
    """The dtype DeepSpeed reduces the gradients of a job training in ``dtype`` in when
    ``communication_data_type`` is not set: the model's, fp16 for an fp16 job, bf16 for a bf16 one
    (and for fp8 / fp4, which run under bf16), fp32 for an fp32 one (deepspeed/runtime/engine.py
    ``DeepSpeedEngine.communication_data_type``: ``if self.fp16_enabled(): return torch.float16;
    if self.bfloat16_enabled(): return torch.bfloat16; return torch.float32``, handed to
    zero/stage_1_and_2.py and zero/stage3.py as ``communication_data_type``; deepspeedai/DeepSpeed
    edaa722)."""
    return dtype if dtype in ("fp32", "fp16") else "bf16"


def runs_deepspeed_zero3(zero_stage: int, fsdp_version: int | None, framework: FrameworkSpec | None) -> bool:
    """Whether DeepSpeed's own ZeRO-3 runs the layout (``zero3_impl``; not torch FSDP, not Megatron-FSDP)."""
    return zero_stage == 3 and zero3_impl(fsdp_version, framework) == "deepspeed"


def grad_accum_dtype(zero_stage: int, fsdp_version: int | None, framework: FrameworkSpec | None,
                     override: str | None = None) -> str | None:
    """The dtype DeepSpeed's ZeRO-3 holds its gradient partitions in, where the scenario sets it
    (``training.grad_accum_dtype``, carried as ``ParallelLayout.grad_accum_dtype``: DeepSpeed's
    ``data_types.grad_accum_dtype``), the one rule that the memory model's gradients and the
    optimizer step's gradient bytes read (``compute.dtypes.grad_held_bytes``); None where it is
    not set or does not apply (the framework's gradient bytes). DeepSpeed's stage 3 allocates its
    flat buffer of every gradient partition in that dtype (deepspeed/runtime/zero/stage3.py
    ``DeepSpeedZeroOptimizer_Stage3.__init__``: ``grad_partitions_flat_buffer = torch.zeros(sum(p.partition_numel()
    ...), dtype=self.gradient_accumulation_dtype)``; the engine hands it ``get_data_types()[1]``, the
    model's dtype unless ``data_types.grad_accum_dtype`` is set: deepspeed/runtime/engine.py
    ``get_data_types``) and casts each reduce-scattered partition to it after the reduction, which
    runs in ``communication_data_type`` (stage3.py ``__avg_scatter_grads``: ``if
    communication_data_type != self.gradient_accumulation_dtype: grad_partitions_for_rank = [g.to(
    self.gradient_accumulation_dtype) ...]``): the reduced bytes do not change
    (``grad_reduce_dtype``). Only where DeepSpeed's ZeRO-3 runs (``zero3_impl``); a layout of
    another stage (the sweep's) ignores it, the loader refuses it (``check_grad_accum_dtype``).
    deepspeedai/DeepSpeed edaa722."""
    return override if runs_deepspeed_zero3(zero_stage, fsdp_version, framework) else None


def check_grad_accum_dtype(zero_stage: int, fsdp_version: int | None, framework: FrameworkSpec | None,
                           override: str | None, *, dtype: str) -> None:
    """InputError naming ``training.grad_accum_dtype`` where the scenario sets it but DeepSpeed's
    ZeRO-3 does not run (``grad_accum_dtype`` would ignore it), or to a dtype the job does not hold
    gradients in: fp32 or the job's own 16-bit dtype (``reduce_dtypes_allowed``)."""
    if override is None:
        return
    if not runs_deepspeed_zero3(zero_stage, fsdp_version, framework):
        raise InputError("training.grad_accum_dtype", override,
                         "left out unless DeepSpeed's ZeRO-3 runs (parallel.zero_stage 3 under framework "
                         "deepspeed or megatron-legacy, without parallel.fsdp): only its gradient partitions "
                         "(stage3.py grad_partitions_flat_buffer) are modelled in that dtype")
    allowed = reduce_dtypes_allowed(dtype)
    if override not in allowed:
        raise InputError("training.grad_accum_dtype", override,
                         f"{' or '.join(allowed)} or left out with training.dtype {dtype}")


def zero3_overlaps_reduce(overlap_grad_reduce: bool | None) -> bool:
    """Whether ZeRO-3 reduce-scatters each unit's gradients on a stream of its own, beside the
    backward (the one rule; the loader resolves it into ``ParallelLayout.zero3_overlap_reduce``):
    ``parallel.overlap_grad_reduce`` where the scenario states it, else on, the default of every
    ZeRO-3 implementation modelled: DeepSpeed's ``overlap_comm`` validator sets it to
    ``stage == 3`` when left out (deepspeed/runtime/zero/config.py ``overlap_comm_valid``);
    torch FSDP1/FSDP2 always reduce-scatter on their own stream; Megatron-FSDP with
    ``--overlap-grad-reduce``. Set false, the reduction runs on the compute stream and the next
    unit waits for it (deepspeed/runtime/zero/stage3.py: ``reduce_and_partition_stream`` is a
    stream of its own with ``overlap_comm``, else the default stream). Independent of the framework's ``overlap_grad_reduce`` for ZeRO 0-2, which is
    DeepSpeed's off."""
    return True if overlap_grad_reduce is None else overlap_grad_reduce


def blocking_sends(framework: FrameworkSpec, schedule: str, overlap_p2p_comm: bool | None,
                   virtual_stages: int = 2) -> bool:
    """Whether a pipeline send holds its sender until the transfer is done (the one rule; the plan
    carries it to both engines): ``parallel.overlap_p2p_comm`` when the scenario sets it, else the
    framework's ``pp_send_blocking`` (Megatron-Core: every schedule but the interleaved one, which
    overlaps by default; with one virtual stage Megatron runs its non-interleaved schedule)."""
    if overlap_p2p_comm is not None:
        return not overlap_p2p_comm
    if framework.pp_send_blocking == "except-interleaved":
        return schedule in ("1f1b", "gpipe") or (schedule == "interleaved-1f1b" and virtual_stages == 1)
    return framework.pp_send_blocking == "always"


def sends_block(framework: FrameworkSpec, par: Any) -> bool:
    """``blocking_sends`` of a layout (a ``ParallelLayout``: its schedule and ``overlap_p2p_comm``)."""
    return blocking_sends(framework, par.schedule, par.overlap_p2p_comm, par.virtual_stages)


def blocking_from(framework: FrameworkSpec, par: Any, kinds: Sequence[str]) -> int:
    """The index of a rank's first action whose sends hold it until they have arrived, the rank's
    actions being of ``kinds`` ("F" a forward, else a backward or its part) in the order it runs
    them: the rule the plan carries per rank to both engines and the sweep's replay bound reads
    (docs/engine.md, "Pipeline transfers"). 0 (every action) where ``sends_block`` holds.
    Megatron's interleaved schedule with overlapped exchanges (Megatron-Core's default, the older
    Megatron-LM's with ``overlap_p2p_comm`` set, as the zero-bubble paper's branch runs it): the backwards after the rank's
    last forward, its cool-down (megatron/core/pipeline_parallel/schedules.py
    ``forward_backward_pipelining_with_interleaving``: the cool-down waits for the last steady-state
    backward's exchange, then calls ``send_backward_recv_backward`` without ``overlap_p2p_comm=True``,
    which waits for its send and receive; current Megatron-LM likewise unless
    ``--overlap-p2p-communication-warmup-flush``, not modelled). Otherwise ``len(kinds)`` (none)."""
    if sends_block(framework, par):
        return 0
    if megatron_family(framework.name) and par.schedule == "interleaved-1f1b" and par.virtual_stages > 1:
        last = max((i for i, kind in enumerate(kinds) if kind == "F"), default=-1)
        return last + 1
    return len(kinds)
