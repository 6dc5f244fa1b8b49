"""DeepSpeed: its JSON config -> a scenario (with the model named separately); its log -> step times.

Config keys (deepspeed/runtime/config.py, constants.py): ``train_batch_size`` (global),
``train_micro_batch_size_per_gpu``, ``gradient_accumulation_steps`` (train_batch_size =
micro x accumulation x data-parallel ranks), ``zero_optimization.stage`` and its
``offload_optimizer`` / ``offload_param``, ``bf16.enabled`` / ``fp16.enabled``,
``activation_checkpointing`` (read by Megatron-DeepSpeed). DeepSpeed's config never names the
model: pass it (``--set model.preset=...``, or model fields).

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


AUTO = "auto"   # a value the HF Trainer integration fills in (transformers/integrations/deepspeed.py)
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


def _check_zero_variants(zero: dict[str, Any]) -> None:
    for key, (neutral, what) in ZERO_VARIANTS.items():
        value = zero.get(key)
        if value is not None and value not in neutral:
            raise InputError(f"zero_optimization.{key}", value, f"{neutral[0]!r}: it sets {what}, which clustersim "
                             "does not model (plain ZeRO-3 is parallel.zero_stage: 3)")


def _zero_stage(cfg: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(stage, the zero_optimization object). DeepSpeed still reads the old boolean form
    (``"zero_optimization": true`` is stage 1; deepspeed/runtime/zero/config.py read_zero_config_deprecated)."""
    zero = cfg.get("zero_optimization")
    if isinstance(zero, bool):
        return int(zero), {}
    zero = config_table(zero, "zero_optimization", 'an object such as {"stage": 2} (or the old true / false)')
    return config_int(zero.get("stage", 0), "zero_optimization.stage", lo=0, hi=3), zero


def _batches(cfg: dict[str, Any], world: int | None, nodes: int | None, gpn: int) -> tuple[int, int, int]:
    """(global batch, micro-batch, data-parallel ranks) by DeepSpeed's rule train_batch_size =
    micro x accumulation x data-parallel ranks (DeepSpeedConfig._set_batch_related_parameters:
    one missing value follows from the others; _batch_assertion: they must agree). ``world``: the
    ranks of --nodes, else None (then the config's three values give them)."""
    batch, micro, accum = (_batch(cfg, k) for k in BATCH_KEYS)

    def refuse(ranks: str) -> InputError:
        given = ", ".join(f"{k} {v}" for k, v in zip(BATCH_KEYS, (batch, micro, accum), strict=True) if v)
        return InputError("train_batch_size", batch, f"train_micro_batch_size_per_gpu x gradient_accumulation_steps "
                          f"x the data-parallel ranks (DeepSpeed's batch rule); the config gives {given}, {ranks}")
    if world is None:
        if not (batch and micro and accum):
            raise InputError("--nodes", None, "the node count (the config does not fix the data-parallel size)")
        world, rem = divmod(batch, micro * accum)
        if rem or not world:
            raise refuse(f"and {batch} is not a multiple of {micro} x {accum}")
        if world % gpn and world > gpn:
            raise refuse(f"so {world} data-parallel ranks: neither whole {gpn}-GPU nodes nor fewer than {gpn}")
    micro_n = micro or (batch // (world * (accum or 1)) if batch else 1)
    accum_n = accum or (batch // (world * micro_n) if batch and micro_n else 1)
    batch_n = batch or micro_n * accum_n * world
    if not micro_n or batch_n != micro_n * accum_n * world:
        raise refuse(f"and --nodes {nodes} gives {world} data-parallel ranks")
    return batch_n, micro_n, world


def scenario_from_config(cfg: dict[str, Any], *, cluster: str | None, nodes: int | None,
                         name: str) -> tuple[dict[str, Any], list[str]]:
    """(scenario dict without model fields, notes). The layout is data parallel (DeepSpeed ZeRO);
    TP/PP from Megatron-DeepSpeed come from ``--set``."""
    notes: list[str] = []
    gpn = cluster_gpus_per_node(cluster, "the config does not name the GPU")
    batch, micro, world = _batches(cfg, None if nodes is None else nodes * gpn, nodes, gpn)
    cluster_d: dict[str, Any] = {"preset": cluster}
    if world % gpn == 0:
        cluster_d["nodes"] = world // gpn
    else:
        cluster_d.update(nodes=1, gpus_per_node=world)
    autos = [k for k in BATCH_KEYS if cfg.get(k) == AUTO]
    if autos:   # the HF Trainer fills these in from its own arguments (transformers/integrations/deepspeed.py)
        notes.append(f"{', '.join(autos)} \"auto\" (filled in by the HF Trainer): assumed micro-batch {micro}, global "
                     f"batch {batch}; give the run's values with --set parallel.micro_batch=N --set "
                     "parallel.global_batch=N")
    stage, zero = _zero_stage(cfg)
    _check_zero_variants(zero)
    parallel: dict[str, Any] = {"dp": world, "micro_batch": micro, "global_batch": batch, "zero_stage": stage}
    # ZeRO-Offload / ZeRO-Infinity (deepspeed/runtime/zero/offload_config.py: device none | cpu | nvme;
    # offload_param only with stage 3): cpu -> parallel.offload.optimizer / params; NVMe is not modelled
    offload: dict[str, bool] = {}
    for key, field in (("offload_optimizer", "optimizer"), ("offload_param", "params")):
        dev = config_table(zero.get(key), f"zero_optimization.{key}", 'an object such as {"device": "cpu"}').get("device")
        if dev in (None, "none"):
            continue
        if dev != "cpu":
            raise InputError(f"zero_optimization.{key}.device", dev, "none or cpu (parallel.offload; NVMe offload "
                             "is not modelled)")
        if field == "params" and stage != 3:
            raise InputError(f"zero_optimization.{key}.device", dev, "none below zero_optimization.stage 3 "
                             "(DeepSpeed offloads parameters with ZeRO-3 only)")
        offload[field] = True
    if offload:
        parallel["offload"] = offload
    ac = config_table(cfg.get("activation_checkpointing"), "activation_checkpointing",
                      'an object such as {"partition_activations": true}')
    if ac:
        parallel["recompute"] = "full"
        notes.append("activation_checkpointing: full recompute of every layer (Megatron-DeepSpeed's checkpointing)")
    bf16, fp16 = _enabled(cfg, "bf16"), _enabled(cfg, "fp16")
    if bf16 is True and fp16 is True:   # DeepSpeedConfig: "bfloat16 and fp16 modes cannot be simultaneously enabled"
        raise InputError("bf16.enabled and fp16.enabled", "both true", "one of them at most: DeepSpeed refuses bf16 "
                         "and fp16 together")
    # an explicit true before "auto" (the Trainer fills in the other one false); both "auto": bf16
    dtype = "bf16" if bf16 is True else "fp16" if fp16 is True else "bf16" if bf16 else "fp16" if fp16 else "fp32"
    if AUTO in (bf16, fp16) and True not in (bf16, fp16):
        notes.append(f'bf16/fp16 "enabled": "auto" (the HF Trainer\'s --bf16 / --fp16 decide): assumed {dtype}; '
                     "give the run's with --set training.dtype=bf16|fp16|fp32")
    opt = config_table(cfg.get("optimizer"), "optimizer", 'an object such as {"type": "AdamW", "params": {...}}'
                       ).get("type", "adam")
    if not isinstance(opt, str):
        raise InputError("optimizer.type", opt, "an optimizer name (Adam, AdamW, SGD, ...)")
    framework = "deepspeed"
    accum = str(config_table(cfg.get("data_types"), "data_types", 'an object such as {"grad_accum_dtype": "fp32"}'
                             ).get("grad_accum_dtype", "")).lower()
    if dtype == "bf16" and (stage == 0 or (stage == 1 and accum in ("fp32", "float32"))):
        # DeepSpeed wraps the optimizer in its BF16_Optimizer: bf16 with fp32 gradient accumulation, its
        # optimizer states sharded over dp (deepspeed/runtime/engine.py _do_optimizer_sanity_check)
        framework = "deepspeed-bf16"
        parallel["zero_stage"] = 1
        notes.append(f"bf16 with zero_optimization.stage {stage}: DeepSpeed's BF16_Optimizer (framework "
                     "deepspeed-bf16, its own ZeRO-1)")
    scenario = {"name": name, "framework": framework, "model": {}, "cluster": cluster_d, "parallel": parallel,
                "training": {"dtype": dtype, "optimizer": "sgd" if opt.lower() == "sgd" else "adam"}}
    return scenario, notes


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
                         cluster: str | None, nodes: int | None) -> ImportResult:
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
    scenario, notes = scenario_from_config(cfg, cluster=cluster, nodes=nodes, name=f"imported from {source}")
    scenario["cluster"].update(beside)   # the GPU profile of a part without its own preset
    iterations, median = steady_state(step_times(lines, scenario["parallel"]["global_batch"]), "deepspeed-log", source)
    return ImportResult("deepspeed-log", source if config_text is None else f"{source} + {config_name}",
                        "deepspeed", scenario, iterations, median, notes=notes)


def import_deepspeed_json(text: str, source: str, cluster: str | None, nodes: int | None) -> ImportResult:
    scenario, notes = scenario_from_config(read_config(text, source), cluster=cluster, nodes=nodes,
                                           name=f"imported from {source}")
    return ImportResult("deepspeed-json", source, "deepspeed", scenario, notes=notes)
