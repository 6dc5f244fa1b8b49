"""DeepSpeed: its JSON config -> a scenario (with the model named separately); its log -> step times.

Config keys (deepspeed/runtime/config.py, constants.py, zero/config.py; deepspeedai/DeepSpeed edaa722):
``train_batch_size`` (global), ``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps``
(train_batch_size = micro x accumulation x data-parallel ranks; the model-parallel sizes given with
``--set parallel.tp/pp/cp`` count before this arithmetic), ``zero_optimization.stage`` and its
``offload_optimizer`` / ``offload_param`` (and the deprecated ``cpu_offload`` / ``cpu_offload_param``),
``overlap_comm`` (parallel.overlap_grad_reduce; left out or null, DeepSpeed's default: on for stage 3
only; off where DeepSpeed ignores it: stage 0, the BF16_Optimizer, a pipeline below stage 3),
``reduce_bucket_size`` (parallel.dp_bucket_params),
``bf16.enabled`` / ``fp16.enabled``, ``data_types.grad_accum_dtype`` at stage 3 (training.grad_accum_dtype),
``activation_checkpointing`` (read by Megatron-DeepSpeed; its
``cpu_checkpointing``: parallel.offload.activations), ``pipeline`` (the PipelineEngine: its ``stages``,
else --set parallel.pp). Refused by name: Apex ``amp``, partial offload (``ratio`` < 1), offload
without ZeRO, NVMe offload, ``sequence_parallel_size`` > 1 (Ulysses), optimizers other than
Adam/AdamW/SGD, a ``communication_data_type`` other than the training dtype or fp32 (fp32:
training.grad_reduce_dtype), ``zero_optimization.reduce_scatter: false`` and, at stages 1-2 without offload,
``contiguous_gradients: false`` (both reduce by all-reduce), ZeRO++ and MiCS. Keys without effect on the cost, and
the tuning keys priced at DeepSpeed's defaults, are listed in the notes; others in ``unknown_args``.
DeepSpeed's config never names the model: pass it (``--set model.preset=...``, or model fields).

Log (DeepSpeed's own lines; Megatron-DeepSpeed prints Megatron-LM's iteration lines too, which
``clustersim import megatron-log`` reads):

* ThroughputTimer, every ``steps_per_print`` steps (deepspeed/utils/timer.py, ThroughputTimer.stop):
  ``epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=12.3, CurrSamplesPerSec=12.5,
  MemAllocated=...GB, MaxMemAllocated=...GB``; before 2022 ``0/10, SamplesPerSec=12.3``. Its
  batch size is the engine's ``train_batch_size`` and CurrSamplesPerSec covers the last step, so a
  step takes ``train_batch_size / CurrSamplesPerSec`` seconds;
* the pipeline engine (deepspeed/runtime/pipe/engine.py, train_batch): ``steps: 10 loss: 2.31
  iter time (s): 1.234 samples/sec: 12.3``;
* the engine's configuration dump (DeepSpeedConfig.print): ``  json = {...}``, the user's config.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import (
    DEEPSPEED_MOE_INSTEAD,
    NUMBER,
    ImportResult,
    clean_lines,
    cluster_gpus_per_node,
    config_bool,
    config_int,
    config_table,
    detected_cluster,
    steady_state,
)
from clustersim.importers.deepspeed_zero import (
    AUTO,
    ZERO_VARIANTS,
    check_zero_variants,
    contiguous_gradients_of,
    hidden_auto_keys,
    offload_flags,
    overlap_comm_of,
    zero_stage_of,
)
from clustersim.inputs import load_json

THROUGHPUT = re.compile(rf"(?:global_step=(\d+)|\b\d+/(\d+)),\s*(?:RunningAvgSamplesPerSec=-?{NUMBER},\s*"
                        rf"CurrSamplesPerSec=(-?{NUMBER})|SamplesPerSec=(-?{NUMBER}))(?![\w.])")
PIPE = re.compile(rf"\bsteps:\s*(\d+)\b.*?iter time \(s\):\s*({NUMBER})(?![\w.])")


def read_config(text: str, source: str) -> dict[str, Any]:
    cfg = load_json(text, "deepspeed-json", source, "a DeepSpeed JSON config")
    if not isinstance(cfg, dict) or not ({"train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimization"}
                                         & set(cfg)):
        raise InputError("deepspeed-json", source, "a DeepSpeed config (a JSON object with train_batch_size, "
                         "train_micro_batch_size_per_gpu or zero_optimization)")
    return cfg


def config_from_log(lines: list[str]) -> dict[str, Any] | None:
    """The user config DeepSpeed prints at start-up (``json = {`` ... ``}``), if any."""
    for i, line in enumerate(lines):
        k = line.find("json = {")
        if k < 0:
            continue
        buf, depth = [], 0
        for chunk in [line[k + 7:], *lines[i + 1:i + 400]]:
            buf.append(chunk)
            depth += chunk.count("{") - chunk.count("}")
            if depth <= 0:
                try:
                    data = json.loads("\n".join(buf))
                except ValueError:
                    return None
                return data if isinstance(data, dict) else None
    return None


BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


def _batch(cfg: dict[str, Any], key: str) -> int | None:
    """A batch number of the config, or None when absent or "auto"."""
    value = cfg.get(key)
    if value is None or value == AUTO:
        return None
    try:
        return config_int(value, key)
    except InputError as exc:
        raise InputError(key, value, f'{exc.allowed}, or "auto"') from None


def _enabled(cfg: dict[str, Any], key: str) -> bool | str:
    """``bf16.enabled`` / ``fp16.enabled``: True, False (the default) or "auto" (the Trainer's
    --bf16 / --fp16 decide; read as enabled)."""
    section = config_table(cfg.get(key), key, 'an object such as {"enabled": true}')
    value = section.get("enabled", False)
    if value == AUTO:
        return AUTO
    try:
        return config_bool(value, f"{key}.enabled")
    except InputError as exc:
        raise InputError(f"{key}.enabled", value, f'{exc.allowed} (JSON booleans), or "auto"') from None


def _batches(cfg: dict[str, Any], world: int | None, nodes: int | None, gpn: int,
             mp: int = 1) -> tuple[int, int, int]:
    """(global batch, micro-batch, data-parallel ranks) by DeepSpeed's rule train_batch_size =
    micro x accumulation x data-parallel ranks (DeepSpeedConfig._set_batch_related_parameters:
    one missing value follows from the others; _batch_assertion: they must agree). ``world``: the
    GPUs of --nodes, else None (then the config's three values give the data-parallel ranks);
    ``mp``: the model-parallel GPUs per data-parallel rank (tp x pp x cp from --set, or the
    pipeline's stages), which DeepSpeed's world size excludes (runtime/config.py: world_size is the
    data-parallel size, mpu.get_data_parallel_world_size())."""
    batch, micro, accum = (_batch(cfg, k) for k in BATCH_KEYS)

    def refuse(ranks: str) -> InputError:
        given = ", ".join(f"{k} {v}" for k, v in zip(BATCH_KEYS, (batch, micro, accum), strict=True) if v)
        return InputError("train_batch_size", batch, f"train_micro_batch_size_per_gpu x gradient_accumulation_steps "
                          f"x the data-parallel ranks (DeepSpeed's batch rule); the config gives {given}, {ranks}")
    if world is None:
        if not (batch and micro and accum):
            raise InputError("--nodes", None, "the node count (the config does not fix the data-parallel size)")
        dp, rem = divmod(batch, micro * accum)
        if rem or not dp:
            raise refuse(f"and {batch} is not a multiple of {micro} x {accum}")
        gpus = dp * mp
        if gpus % gpn and gpus > gpn:
            raise refuse(f"so {dp} data-parallel ranks" + (f" x {mp} model-parallel GPUs = {gpus} GPUs" if mp > 1
                         else "") + f": neither whole {gpn}-GPU nodes nor fewer than {gpn}")
        world = dp
    else:
        if world % mp:
            raise InputError("--nodes", nodes, f"a node count whose {world} GPUs are a multiple of the {mp} "
                             "model-parallel GPUs (tp x pp x cp) of each data-parallel rank")
        world //= mp
    micro_n = micro or (batch // (world * (accum or 1)) if batch else 1)
    accum_n = accum or (batch // (world * micro_n) if batch and micro_n else 1)
    batch_n = batch or micro_n * accum_n * world
    if not micro_n or batch_n != micro_n * accum_n * world:
        split = f" / {mp} model-parallel GPUs, tp x pp x cp of --set" if mp > 1 else \
            "; a Megatron-DeepSpeed job's model parallelism counts here: give --set parallel.tp=N / parallel.pp=N"
        raise refuse(f"and --nodes {nodes} gives {world} data-parallel ranks ({world * mp} GPUs{split})")
    return batch_n, micro_n, world


# Keys of DeepSpeed's config (deepspeed/runtime/config.py, constants.py; zero/config.py; deepspeedai/DeepSpeed
# edaa722) that do not change a step's cost: logging, monitoring, checkpointing, schedules of the learning
# rate, clipping (the gradient norm's all-reduce is priced either way). Listed in the import's notes.
COST_FREE = ("steps_per_print", "wall_clock_breakdown", "memory_breakdown", "dump_state", "gradient_clipping",
             "scheduler", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "tensorboard", "wandb",
             "csv_monitor", "comet", "monitor_config", "flops_profiler", "comms_logger", "checkpoint", "logging",
             "prescale_gradients", "gradient_predivide_factor", "seed", "gradient_allreduce_op")
# the keys this importer reads (each mapped or refused below)
READ = (*BATCH_KEYS, "zero_optimization", "bf16", "fp16", "optimizer", "data_types", "activation_checkpointing",
        "pipeline", "amp", "communication_data_type", "sequence_parallel_size", "seq_parallel_communication_data_type")
# zero_optimization keys that tune what the plan prices with DeepSpeed's defaults (zero/config.py): listed in the
# notes as not modelled. The ZeRO-3 plan has no prefetch bucket or persistence threshold of its own
# (clustersim.plan.zero3: DS_PREFETCH_BUCKET_PARAMS, DeepSpeed's default, and every parameter partitioned).
ZERO_NOT_MODELLED = ("allgather_partitions", "allgather_bucket_size", "load_from_fp32_weights",
                     "elastic_checkpoint", "ignore_unused_parameters", "round_robin_gradients", "sub_group_size",
                     "memory_efficient_linear", "log_trace_cache_warnings", "enable_sanity_checks",
                     "use_multi_rank_bucket_allreduce", "pipeline_loading_checkpoint", "override_module_apply",
                     "legacy_stage1", "cpu_offload_use_pin_memory", "zeropp_loco_param", "leaf_module",
                     "stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save")
STAGE3_TUNING = ("stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
                 "stage3_model_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance",
                 "stage3_module_granularity_threshold", "stage3_use_all_reduce_for_fetch_params",
                 "stage3_allgather_sequential")
ZERO_READ = ("stage", "offload_optimizer", "offload_param", "cpu_offload", "cpu_offload_param", "overlap_comm",
             "reduce_bucket_size", "reduce_scatter", "contiguous_gradients", *ZERO_VARIANTS)
# the optimizers whose states and step clustersim prices: Adam / AdamW (two fp32 moments) and torch's SGD
# (one momentum buffer); DeepSpeed's others change the state bytes or the communication (1-bit Adam and
# 0/1 Adam compress the gradient exchange, LAMB and Lion other states: runtime/engine.py
# _configure_basic_optimizer)
OPTIMIZERS = {"adam": "adam", "adamw": "adam", "fusedadam": "adam", "cpuadam": "adam", "deepspeedcpuadam": "adam",
              "sgd": "sgd"}
COMM_DTYPES = {"fp32": "fp32", "float32": "fp32", "fp16": "fp16", "float16": "fp16", "half": "fp16",
               "bf16": "bf16", "bfloat16": "bf16"}


# the arguments of DeepSpeed-MoE's layer (deepspeed/moe/layer.py, MoE.__init__: num_experts, ep_size,
# k, capacity_factor, eval_capacity_factor, min_capacity, use_residual, noisy_gate_policy,
# drop_tokens, use_rts, use_tutel, enable_expert_tensor_parallelism, top2_2nd_expert_sampling)
_MOE_LAYER_ARGS = ("ep_size", "ep_world_size", "k", "top_k", "capacity_factor", "eval_capacity_factor", "min_capacity",
                   "use_residual", "noisy_gate_policy", "drop_tokens", "use_rts", "use_tutel",
                   "top2_2nd_expert_sampling")


def _moe_key(key: str) -> bool:
    """A key that reads as a MoE setting (``moe``, ``moe_*``, anything naming experts, an argument
    of DeepSpeed-MoE's layer): DeepSpeed's config has none, so such a key would be dropped while
    the user believes it sets the model's experts; it is refused with what to do instead."""
    k = key.lower()
    return k == "moe" or k.startswith("moe_") or "expert" in k or k in _MOE_LAYER_ARGS


def _mp(given: dict[str, Any], pipe_stages: int | None) -> tuple[int, int]:
    """(model-parallel GPUs per data-parallel rank, pp): tp x pp x cp of the user's --set, the
    pipeline's stages where the config gives them."""
    def size(key: str) -> int:
        value = given.get(key, 1)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1
    pp = size("pp") if "pp" in given else (pipe_stages or 1)
    return size("tp") * pp * size("cp"), pp


def _pipeline(cfg: dict[str, Any], given: dict[str, Any], notes: list[str]) -> int | None:
    """The pipeline engine's stages (``pipeline`` section: DeepSpeed's PipelineEngine), or None
    without one. ``pipeline.stages`` is "auto" by default (runtime/config.py get_pipeline_config):
    the model's PipelineModule(num_stages=...) decides, which the config does not hold; then pp
    must come from --set parallel.pp=N."""
    if "pipeline" not in cfg:
        return None
    pipe = config_table(cfg.get("pipeline"), "pipeline", 'an object such as {"stages": 4}')
    stages = pipe.get("stages", "auto")
    if stages != "auto":
        stages = config_int(stages, "pipeline.stages", lo=1)
        if "pp" in given and given["pp"] != stages:
            raise InputError("parallel.pp", given["pp"], f"{stages}: the config's pipeline.stages")
    elif "pp" not in given:
        raise InputError("pipeline", "present", "the pipeline degree: the config has a pipeline section (DeepSpeed's "
                         "PipelineEngine) but pipeline.stages is \"auto\" (the model's PipelineModule(num_stages=N) "
                         "decides); give it with --set parallel.pp=N (and --set parallel.tp=N under Megatron-DeepSpeed)")
    rest = sorted(k for k in pipe if k != "stages")
    if rest:
        notes.append("not modelled (DeepSpeed's pipeline engine as the deepspeed framework prices it): "
                     + ", ".join(f"pipeline.{k}={pipe[k]!r}" for k in rest))
    return None if stages == "auto" else stages


def scenario_from_config(cfg: dict[str, Any], *, cluster: str | None, nodes: int | None, name: str,
                         given: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str], list[str]]:
    """(scenario dict without model fields, notes, unknown keys). The layout is data parallel
    (DeepSpeed ZeRO), with the pipeline engine's stages where the config gives them; TP/PP/CP from
    Megatron-DeepSpeed come from ``--set`` (``given``: the user's parallel.* values), which count in
    the batch arithmetic. Every key of the config is mapped, refused by name, listed in the notes
    as not modelled, or returned as unknown."""
    notes: list[str] = []
    moe = [k for k in cfg if k not in READ and k not in COST_FREE and _moe_key(k)]
    if moe:
        raise InputError(moe[0], cfg[moe[0]], DEEPSPEED_MOE_INSTEAD)
    unknown = [k for k in cfg if k not in READ and k not in COST_FREE]
    given = given or {}
    gpn = cluster_gpus_per_node(cluster, "the config does not name the GPU")
    pipe_stages = _pipeline(cfg, given, notes)
    mp, pp = _mp(given, pipe_stages)
    batch, micro, world = _batches(cfg, None if nodes is None else nodes * gpn, nodes, gpn, mp)
    cluster_d: dict[str, Any] = {"preset": cluster}
    gpus = world * mp
    if gpus % gpn == 0:
        cluster_d["nodes"] = gpus // gpn
    else:
        cluster_d.update(nodes=1, gpus_per_node=gpus)
    autos = [k for k in BATCH_KEYS if cfg.get(k) == AUTO]
    if autos:   # the HF Trainer fills these in from its own arguments (transformers/integrations/deepspeed.py)
        notes.append(f"{', '.join(autos)} \"auto\" (filled in by the HF Trainer): assumed micro-batch {micro}, global "
                     f"batch {batch}; give the run's values with --set parallel.micro_batch=N --set "
                     "parallel.global_batch=N")
    if _enabled(cfg, "amp") is not False:
        raise InputError("amp.enabled", cfg["amp"].get("enabled"), "false: Apex AMP (its O1/O2 casts and loss "
                         "scaling) is not modelled; DeepSpeed's fp16 / bf16 sections are")
    sp = cfg.get("sequence_parallel_size", 1)
    if sp != 1:
        raise InputError("sequence_parallel_size", sp, "1: DeepSpeed-Ulysses is not mapped (parallel.cp with cp_comm "
                         "a2a runs its all-to-alls, but DeepSpeed reduces the sequence-parallel gradients in "
                         "seq_parallel_communication_data_type, fp32 by default, which clustersim's DeepSpeed "
                         "reduction does not price); model it with --set parallel.cp=N --set parallel.cp_comm=a2a "
                         "on a config without sequence_parallel_size")
    stage, zero = zero_stage_of(cfg)
    check_zero_variants(zero)
    unknown += [f"zero_optimization.{k}" for k in zero
                if k not in ZERO_READ and k not in ZERO_NOT_MODELLED and k not in STAGE3_TUNING]
    parallel: dict[str, Any] = {"dp": world, "micro_batch": micro, "global_batch": batch, "zero_stage": stage}
    if pp > 1 and "pp" not in given:
        parallel["pp"] = pp
        notes.append(f"pipeline.stages {pp}: DeepSpeed's PipelineEngine, pp {pp}")
    if config_bool(zero.get("reduce_scatter", True), "zero_optimization.reduce_scatter") is False:
        raise InputError("zero_optimization.reduce_scatter", False, "true: ZeRO's gradient reduction by all-reduce "
                         "(reduce_scatter false: stage_1_and_2.py average_tensor's allreduce path) is not modelled")
    if "reduce_bucket_size" in zero and zero["reduce_bucket_size"] != AUTO:
        # elements per gradient bucket (zero/config.py reduce_bucket_size, 5e8); "auto": fill_hidden_auto
        bucket = zero["reduce_bucket_size"]
        if isinstance(bucket, float) and bucket.is_integer():
            bucket = int(bucket)
        try:
            bucket = config_int(bucket, "zero_optimization.reduce_bucket_size", lo=0)
        except InputError as exc:
            raise InputError(exc.field, exc.value, f'{exc.allowed}, or "auto" (the HF Trainer\'s hidden_size^2)'
                             ) from None
        if bucket:
            parallel["dp_bucket_params"] = bucket
    offload = offload_flags(zero, stage, notes)
    if offload:
        parallel["offload"] = offload
    stage3 = sorted(k for k in zero if k in STAGE3_TUNING and k not in hidden_auto_keys(zero, stage))
    if stage3:
        notes.append("not modelled: the ZeRO-3 plan uses DeepSpeed's defaults (prefetch bucket 5e7 elements, every "
                     "parameter partitioned): " + ", ".join(f"zero_optimization.{k}={zero[k]!r}" for k in stage3))
    others = sorted(k for k in zero if k in ZERO_NOT_MODELLED)
    if others:
        notes.append("not modelled (DeepSpeed's defaults assumed): "
                     + ", ".join(f"zero_optimization.{k}={zero[k]!r}" for k in others))
    ac = config_table(cfg.get("activation_checkpointing"), "activation_checkpointing",
                      'an object such as {"partition_activations": true}')
    if ac:
        parallel["recompute"] = "full"
        notes.append("activation_checkpointing: full recompute of every layer (Megatron-DeepSpeed's checkpointing)")
        if config_bool(ac.get("cpu_checkpointing", False), "activation_checkpointing.cpu_checkpointing"):
            # the checkpoints go to host memory (deepspeed/runtime/activation_checkpointing/checkpointing.py
            # CPU_CHECKPOINT: copied to the cpu after the forward, back before the recompute)
            parallel.setdefault("offload", {})["activations"] = True
            notes.append("activation_checkpointing.cpu_checkpointing: the checkpoints in host memory "
                         "(parallel.offload.activations)")
        rest = sorted(k for k in ac if k != "cpu_checkpointing")
        if rest:
            notes.append("not modelled (DeepSpeed activation checkpointing options): "
                         + ", ".join(f"activation_checkpointing.{k}={ac[k]!r}" for k in rest))
    bf16, fp16 = _enabled(cfg, "bf16"), _enabled(cfg, "fp16")
    if bf16 is True and fp16 is True:   # DeepSpeedConfig: "bfloat16 and fp16 modes cannot be simultaneously enabled"
        raise InputError("bf16.enabled and fp16.enabled", "both true", "one of them at most: DeepSpeed refuses bf16 "
                         "and fp16 together")
    # an explicit true before "auto" (the Trainer fills in the other one false); both "auto": bf16
    dtype = "bf16" if bf16 is True else "fp16" if fp16 is True else "bf16" if bf16 else "fp16" if fp16 else "fp32"
    if AUTO in (bf16, fp16) and True not in (bf16, fp16):
        notes.append(f'bf16/fp16 "enabled": "auto" (the HF Trainer\'s --bf16 / --fp16 decide): assumed {dtype}; '
                     "give the run's with --set training.dtype=bf16|fp16|fp32")
    comm = cfg.get("communication_data_type")
    comm_dtype = COMM_DTYPES.get(str(comm).lower()) if comm is not None else dtype
    reduce: dict[str, str] = {}
    if comm_dtype == "fp32" and dtype != "fp32":
        # the gradients cast to fp32 for the data-parallel reduction (deepspeed/runtime/engine.py
        # communication_data_type; zero/stage_1_and_2.py and stage3.py reduce in self.communication_data_type)
        reduce["grad_reduce_dtype"] = "fp32"
    elif comm_dtype != dtype:
        raise InputError("communication_data_type", comm, f"{dtype} (the training dtype), fp32 or absent: a gradient "
                         "reduction in another 16-bit dtype than the training one is not modelled")
    seq_comm = cfg.get("seq_parallel_communication_data_type")
    if seq_comm is not None:
        notes.append(f"seq_parallel_communication_data_type {seq_comm!r}: no effect without sequence_parallel_size")
    opt = config_table(cfg.get("optimizer"), "optimizer", 'an object such as {"type": "AdamW", "params": {...}}'
                       ).get("type", "adam")
    if not isinstance(opt, str):
        raise InputError("optimizer.type", opt, "an optimizer name (Adam, AdamW, SGD, ...)")
    if opt.lower() not in OPTIMIZERS:
        raise InputError("optimizer.type", opt, "Adam, AdamW or SGD: DeepSpeed's other optimizers (OneBitAdam, "
                         "ZeroOneAdam, OneBitLamb, Lamb, Lion, Adagrad, ...) keep other states or compress the "
                         "gradient exchange, which clustersim does not model")
    framework = "deepspeed"
    accum = str(config_table(cfg.get("data_types"), "data_types", 'an object such as {"grad_accum_dtype": "fp32"}'
                             ).get("grad_accum_dtype", "")).lower()
    if dtype == "bf16" and not offload.get("optimizer") and (stage == 0 or (stage == 1 and accum in ("fp32", "float32"))):
        # DeepSpeed wraps the optimizer in its BF16_Optimizer: bf16 with fp32 gradient accumulation, its
        # optimizer states sharded over dp, and never with CPU offload (deepspeed/runtime/engine.py
        # _do_optimizer_sanity_check: "... == 1 and not self.zero_cpu_offload()"; offload runs the ZeRO optimizer)
        framework = "deepspeed-bf16"
        parallel["zero_stage"] = 1
        notes.append(f"bf16 with zero_optimization.stage {stage}: DeepSpeed's BF16_Optimizer (framework "
                     "deepspeed-bf16, its own ZeRO-1)")
    accum_dtype = COMM_DTYPES.get(accum.removeprefix("torch."))
    if framework == "deepspeed" and accum_dtype not in (None, dtype):
        if stage == 3:
            # the stage-3 optimizer allocates its gradient partitions in gradient_accumulation_dtype
            # (deepspeed/runtime/zero/stage3.py: grad_partitions_flat_buffer = torch.zeros(...,
            # dtype=self.gradient_accumulation_dtype)): training.grad_accum_dtype (frameworks.grad_accum_dtype)
            reduce["grad_accum_dtype"] = accum_dtype
            notes.append(f"data_types.grad_accum_dtype {accum!r} at stage 3: the gradient partitions held in "
                         f"{accum_dtype} (training.grad_accum_dtype; reduced in communication_data_type, "
                         f"{reduce.get('grad_reduce_dtype', comm_dtype)})")
        elif stage in (1, 2):
            # stages 1-2 accumulate into separate fp32 copies (stage_1_and_2.py use_separate_grad_accum):
            # not modelled, said rather than dropped
            notes.append(f"data_types.grad_accum_dtype {accum!r} at stage {stage}: not modelled (the ZeRO stage 1-2 "
                         "gradient accumulation copies, stage_1_and_2.py use_separate_grad_accum; the model's "
                         f"{dtype} gradients are priced)")
    contiguous_gradients_of(zero, stage, framework, bool(offload.get("optimizer")), notes)
    overlap = overlap_comm_of(zero, stage, pp, framework, notes)
    if overlap is not None:
        parallel["overlap_grad_reduce"] = overlap
    free = sorted(k for k in cfg if k in COST_FREE)
    if free:
        notes.append("no effect on the step's cost, not modelled: " + ", ".join(free))
    scenario = {"name": name, "framework": framework, "model": {}, "cluster": cluster_d, "parallel": parallel,
                "training": {"dtype": dtype, "optimizer": OPTIMIZERS[opt.lower()], **reduce}}
    return scenario, notes, unknown


def step_times(lines: list[str], train_batch: int) -> list[tuple[int, float]]:
    points = []
    for line in lines:
        m = THROUGHPUT.search(line)
        if m:
            step = int(m.group(1) or m.group(2))
            rate = float(m.group(3) or m.group(4))
            if rate > 0:
                points.append((step, train_batch / rate))
            continue
        m = PIPE.search(line)
        if m:
            points.append((int(m.group(1)), float(m.group(2))))
    return points


def import_deepspeed_log(text: str, source: str, config_text: str | None, config_name: str,
                         cluster: str | None, nodes: int | None, given: dict[str, Any] | None = None) -> ImportResult:
    lines = clean_lines(text)
    cfg = read_config(config_text, config_name) if config_text is not None else config_from_log(lines)
    has_steps = any(THROUGHPUT.search(line) or PIPE.search(line) for line in lines)
    if not has_steps:
        raise InputError("deepspeed-log", source, "a DeepSpeed log with ThroughputTimer lines (`epoch=0/micro_step=N/"
                         "global_step=N, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=...`, printed every "
                         "steps_per_print steps with wall_clock_breakdown or flops profiling on) or pipeline "
                         "`steps: N ... iter time (s): X` lines")
    if cfg is None:
        raise InputError("--config", None, "the DeepSpeed JSON config (this log does not print it)")
    cluster, beside = detected_cluster(cluster, "\n".join(lines[:400]))
    scenario, notes, unknown = scenario_from_config(cfg, cluster=cluster, nodes=nodes, name=f"imported from {source}",
                                                    given=given)
    scenario["cluster"].update(beside)   # the GPU profile of a part without its own preset
    iterations, median = steady_state(step_times(lines, scenario["parallel"]["global_batch"]), "deepspeed-log", source)
    return ImportResult("deepspeed-log", source if config_text is None else f"{source} + {config_name}",
                        scenario["framework"], scenario, iterations, median, unknown=unknown, notes=notes,
                        hidden_auto=hidden_auto_keys(*reversed(zero_stage_of(cfg))))


def import_deepspeed_json(text: str, source: str, cluster: str | None, nodes: int | None,
                          given: dict[str, Any] | None = None) -> ImportResult:
    cfg = read_config(text, source)
    scenario, notes, unknown = scenario_from_config(cfg, cluster=cluster, nodes=nodes, name=f"imported from {source}",
                                                    given=given)
    return ImportResult("deepspeed-json", source, scenario["framework"], scenario, unknown=unknown, notes=notes,
                        hidden_auto=hidden_auto_keys(*reversed(zero_stage_of(cfg))))
