"""DeepSpeed's ``zero_optimization`` section as clustersim reads it: the stage, the ZeRO variants
refused by name, offload, ``overlap_comm``, ``contiguous_gradients`` and the Hugging Face Trainer's
``"auto"`` bucket sizes (clustersim.importers.deepspeed reads the rest of the config)."""

from __future__ import annotations

from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import config_bool, config_int, config_table

AUTO = "auto"   # a value the HF Trainer integration fills in (transformers/integrations/deepspeed.py)


# ZeRO variants that change the collectives and the memory of ZeRO-3 and are not modelled (refused by
# name; they were imported as plain ZeRO-3): ZeRO++ (Wang et al. 2023, arXiv 2306.10209: hpZ secondary
# partition, qwZ quantized weights, qgZ quantized gradients; deepspeed/runtime/zero/config.py
# zero_hpz_partition_size, zero_quantized_weights, zero_quantized_gradients) and MiCS (Zhang et al.
# 2022, arXiv 2205.00119; mics_shard_size, mics_hierarchical_params_gather). Each key's neutral value.
ZERO_VARIANTS = {"zero_hpz_partition_size": ((1, 0), "ZeRO++ hierarchical partitioning (hpZ)"),
                 "zero_quantized_weights": ((False,), "ZeRO++ quantized weight all-gathers (qwZ)"),
                 "zero_quantized_nontrainable_weights": ((False,), "ZeRO++ quantized weights"),
                 "zero_quantized_gradients": ((False,), "ZeRO++ quantized gradient reduction (qgZ)"),
                 "mics_shard_size": ((-1, 0), "MiCS sharding within groups"),
                 "mics_hierarchical_params_gather": ((False,), "MiCS hierarchical all-gathers")}


def check_zero_variants(zero: dict[str, Any]) -> None:
    for key, (neutral, what) in ZERO_VARIANTS.items():
        value = zero.get(key)
        if value is not None and value not in neutral:
            raise InputError(f"zero_optimization.{key}", value, f"{neutral[0]!r}: it sets {what}, which clustersim "
                             "does not model (plain ZeRO-3 is parallel.zero_stage: 3)")


def zero_stage_of(cfg: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(stage, the zero_optimization object). DeepSpeed still reads the old boolean form
    (``"zero_optimization": true`` is stage 1; deepspeed/runtime/zero/config.py read_zero_config_deprecated)."""
    zero = cfg.get("zero_optimization")
    if isinstance(zero, bool):
        return int(zero), {}
    zero = config_table(zero, "zero_optimization", 'an object such as {"stage": 2} (or the old true / false)')
    return config_int(zero.get("stage", 0), "zero_optimization.stage", lo=0, hi=3), zero


def offload_flags(zero: dict[str, Any], stage: int, notes: list[str]) -> dict[str, bool]:
    """ZeRO-Offload / ZeRO-Infinity (deepspeed/runtime/zero/offload_config.py: device none | cpu | nvme;
    offload_param only with stage 3; the deprecated booleans cpu_offload and cpu_offload_param, which
    zero/config.py turns into offload_optimizer / offload_param with device cpu): cpu ->
    parallel.offload.optimizer / params; NVMe, partial offload (ratio < 1) and offload without ZeRO
    are refused."""
    offload: dict[str, bool] = {}
    for key, legacy, field in (("offload_optimizer", "cpu_offload", "optimizer"),
                               ("offload_param", "cpu_offload_param", "params")):
        section = config_table(zero.get(key), f"zero_optimization.{key}", 'an object such as {"device": "cpu"}')
        dev, where = section.get("device"), f"zero_optimization.{key}.device"
        if (dev in (None, "none") and zero.get(legacy) is not None
                and config_bool(zero.get(legacy), f"zero_optimization.{legacy}")):
            dev, where = "cpu", f"zero_optimization.{legacy}"
        if dev in (None, "none"):
            continue
        if dev != "cpu":
            raise InputError(where, dev, "none or cpu (parallel.offload; NVMe offload is not modelled)")
        if stage == 0:
            raise InputError(where, dev if where.endswith("device") else True, "none with zero_optimization.stage 0: "
                             "DeepSpeed offloads through its ZeRO optimizer only (stage > 0)")
        if field == "params" and stage != 3:
            raise InputError(where, dev, "none below zero_optimization.stage 3 (DeepSpeed offloads parameters with "
                             "ZeRO-3 only)")
        ratio = section.get("ratio", 1.0)
        if field == "optimizer" and (not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or ratio != 1):
            raise InputError(f"zero_optimization.{key}.ratio", ratio, "1.0: partial optimizer offload (ZeRO-3's "
                             "ratio < 1, some states stepped on the GPU) is not modelled")
        rest = sorted(k for k in section if k not in ("device", "ratio"))
        if rest:
            notes.append("not modelled (offload buffers and pinning): "
                         + ", ".join(f"zero_optimization.{key}.{k}={section[k]!r}" for k in rest))
        offload[field] = True
    return offload


def overlap_comm_of(zero: dict[str, Any], stage: int, pp: int, framework: str, notes: list[str]) -> bool | None:
    """parallel.overlap_grad_reduce as DeepSpeed runs ``zero_optimization.overlap_comm`` (None: the
    framework's default), deepspeedai/DeepSpeed edaa722:

    * left out or null, on for stage 3 only: zero/config.py declares ``overlap_comm: Optional[bool] =
      None`` and its validator overlap_comm_valid sets ``self.overlap_comm = self.stage ==
      ZeroStageEnum.weights``; stages 0-2 keep the framework's default, off (data/frameworks.yaml);
    * read by the ZeRO optimizers only (runtime/engine.py _configure_zero_optimizer): stage 0 and
      the BF16_Optimizer (_configure_bf16_optimizer, framework deepspeed-bf16) reduce after the
      backward whatever it says (engine.py allreduce_gradients -> buffered_allreduce_fallback);
    * _configure_zero_optimizer turns it off for stages 1-2 when the model is a PipelineModule
      ("Pipeline parallelism does not support overlapped communication, will be disabled."), which
      every pipeline of DeepSpeed's PipelineEngine is (pp > 1 here);
    * stage 1 honours it since DeepSpeed 0.13.0 (PR #4887, af033831f: stage_1_and_2.py reduces the
      boundary micro-batch's buckets from its gradient hooks); before, engine.py ignored it at stage 1
      ("Overlap and contiguous grads are meaningless in stage 1 and are ignored")."""
    value = zero.get("overlap_comm")
    if value is None:
        if stage != 3:
            return None
        notes.append("zero_optimization.overlap_comm not given (or null): on, DeepSpeed's default for stage 3 "
                     "(parallel.overlap_grad_reduce true)")
        return True
    value = config_bool(value, "zero_optimization.overlap_comm")
    ignored = ("stage 0 builds no ZeRO optimizer" if stage == 0 else
               "bf16 runs DeepSpeed's BF16_Optimizer" if framework == "deepspeed-bf16" else
               f"pp {pp}: DeepSpeed disables it for a PipelineModule" if pp > 1 and stage < 3 else None)
    if ignored:
        if value:
            notes.append(f"zero_optimization.overlap_comm true ignored by DeepSpeed ({ignored}, runtime/engine.py "
                         "_configure_zero_optimizer): the gradients reduced after the backward "
                         "(parallel.overlap_grad_reduce false)")
        return False
    if stage == 1 and value:
        notes.append("zero_optimization.overlap_comm true at stage 1: honoured since DeepSpeed 0.13.0 (PR #4887); "
                     "older versions ignored it at stage 1: give theirs with --set parallel.overlap_grad_reduce=false")
    return value


def contiguous_gradients_of(zero: dict[str, Any], stage: int, framework: str, offload_optimizer: bool,
                          notes: list[str]) -> None:
    """``zero_optimization.contiguous_gradients: false`` (default true, zero/config.py), as DeepSpeed
    runs it (deepspeedai/DeepSpeed edaa722):

    * stages 1-2 of the ZeRO optimizer then reduce each bucket by an all-reduce of the flattened
      gradients (stage_1_and_2.py ``reduce_ipg_grads``: ``buffered_reduce_fallback`` ->
      ``allreduce_no_retain`` -> ``allreduce_bucket``: ``dist.all_reduce``) instead of
      ``average_tensor``'s reduce-scatter: twice the bytes on the wire, which clustersim's ZeRO 1-2
      reduction does not price (as ``reduce_scatter: false``): refused by name. With CPU offload
      DeepSpeed forces it on (``self.contiguous_gradients = contiguous_gradients or self.cpu_offload``);
    * stage 3 reduce-scatters through ``__avg_scatter_grads`` either way (the contiguous path of
      ``__reduce_and_partition_ipg_grads`` needs ``not self.reduce_scatter``); it only skips the
      ``reduce_bucket_size`` ipg buffer allocated at init (stage3.py ``if self.contiguous_gradients:
      bucket.buffer = torch.empty(self.reduce_bucket_size, ...)``, priced by
      memory.buffers.deepspeed_zero3_bucket_bytes) and the copy into it (``__add_grad_to_ipg_bucket``),
      keeping instead each bucketed ``param.grad`` until its bucket is reduced (``partition_grads``:
      ``param.grad = None``): the same bytes of a full bucket alive in the backward, so the priced
      peak (a backward's, with the buffer counted as held) stands: a note;
    * stage 0 and the BF16_Optimizer do not read it (runtime/engine.py passes it to the ZeRO
      optimizers only): a note."""
    value = zero.get("contiguous_gradients")
    if value is None or config_bool(value, "zero_optimization.contiguous_gradients"):
        return
    if framework == "deepspeed" and stage in (1, 2) and not offload_optimizer:
        raise InputError("zero_optimization.contiguous_gradients", value, "true or absent: without it ZeRO stages "
                         "1-2 reduce each bucket by an all-reduce (stage_1_and_2.py reduce_ipg_grads -> "
                         "buffered_reduce_fallback), which clustersim's reduce-scatter does not price (DeepSpeed "
                         "before 0.13.0 ignored the key at stage 1: leave it out to price that)")
    why = ("stage 3 reduce-scatters either way; it skips the reduce_bucket_size buffer but keeps each bucket's "
           "gradients until the bucket is reduced: the same bytes at the backward's peak once a bucket fills, "
           "priced as the buffer (a stage of fewer parameters than the bucket holds less)"
           if stage == 3 else "offload_optimizer forces it on (stage_1_and_2.py)" if offload_optimizer and stage
           else "read by DeepSpeed's ZeRO optimizer only, which this job does not run")
    notes.append(f"zero_optimization.contiguous_gradients false: no effect on the priced step ({why})")


# the keys the HF Trainer fills in from the model's hidden size h when they are "auto", and what it
# writes (huggingface/transformers 02348331, src/transformers/integrations/deepspeed.py
# HfTrainerDeepSpeedConfig.trainer_config_finalize: reduce_bucket_size h x h; with ZeRO-3 also
# stage3_prefetch_bucket_size 0.9 x h x h and stage3_param_persistence_threshold 10 x h; h is the
# model config's hidden_size, else max(hidden_sizes), else a ValueError asking for numbers)
HIDDEN_AUTO = {"reduce_bucket_size": ("hidden_size^2", lambda h: h * h),
               "stage3_prefetch_bucket_size": ("0.9 x hidden_size^2", lambda h: 0.9 * h * h),
               "stage3_param_persistence_threshold": ("10 x hidden_size", lambda h: 10 * h)}


def hidden_auto_keys(zero: dict[str, Any], stage: int) -> tuple[str, ...]:
    """The zero_optimization keys left "auto" that the HF Trainer fills in from the hidden size (the
    stage-3 ones only with stage 3, as trainer_config_finalize does)."""
    return tuple(k for k in HIDDEN_AUTO if zero.get(k) == AUTO and (stage == 3 or k == "reduce_bucket_size"))


def fill_hidden_auto(data: dict[str, Any], keys: tuple[str, ...], hidden: int, user_bucket: bool) -> list[str]:
    """Write what the HF Trainer fills in for ``keys`` (hidden_auto_keys) with the model's hidden size
    into the scenario ``data``: reduce_bucket_size -> parallel.dp_bucket_params (unless the user set
    it, ``user_bucket``); the ZeRO-3 tuning keys are not modelled (the plan's DeepSpeed defaults).
    Returns the notes naming each assumed value."""
    notes = []
    for key in keys:
        what, rule = HIDDEN_AUTO[key]
        value = int(rule(hidden))
        if key == "reduce_bucket_size":
            if user_bucket:
                continue
            data.setdefault("parallel", {})["dp_bucket_params"] = value
            notes.append(f'zero_optimization.reduce_bucket_size "auto" (filled in by the HF Trainer): assumed '
                         f"{what} = {hidden}^2 = {value:,} elements (parallel.dp_bucket_params); give the run's "
                         "with --set parallel.dp_bucket_params=N")
        else:
            notes.append(f'zero_optimization.{key} "auto" (filled in by the HF Trainer): {what} = {value:,}, '
                         "not modelled (the ZeRO-3 plan's DeepSpeed defaults)")
    return notes
