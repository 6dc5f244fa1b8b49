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
    ImportResult,
    clean_lines,
    cluster_gpus_per_node,
    detected_cluster,
    steady_state,
)
from clustersim.inputs import load_json

THROUGHPUT = re.compile(r"(?:global_step=(\d+)|\b\d+/(\d+)),\s*(?:RunningAvgSamplesPerSec=[\d.e+-]+,\s*"
                        r"CurrSamplesPerSec=([\d.e+-]+)|SamplesPerSec=([\d.e+-]+))")
PIPE = re.compile(r"\bsteps:\s*(\d+)\b.*?iter time \(s\):\s*([\d.]+)")


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


def _auto(value: Any) -> int | None:
    """A batch number, or None for "auto" (filled in by the HF Trainer integration)."""
    if value in (None, "auto"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
        raise InputError("deepspeed-json", value, "a positive batch size or \"auto\"")
    return int(value)


def scenario_from_config(cfg: dict[str, Any], *, cluster: str | None, nodes: int | None,
                         name: str) -> tuple[dict[str, Any], list[str]]:
    """(scenario dict without model fields, notes). The layout is data parallel (DeepSpeed ZeRO);
    TP/PP from Megatron-DeepSpeed come from ``--set``."""
    notes: list[str] = []
    gpn = cluster_gpus_per_node(cluster, "the config does not name the GPU")
    batch, micro = _auto(cfg.get("train_batch_size")), _auto(cfg.get("train_micro_batch_size_per_gpu"))
    accum = _auto(cfg.get("gradient_accumulation_steps"))
    world = None
    if nodes is not None:
        world = nodes * gpn
    elif batch and micro and accum:
        world = batch // (micro * accum)          # DeepSpeedConfig._batch_assertion: batch = micro x accum x dp
    if world is None:
        raise InputError("--nodes", None, "the node count (the config does not fix the data-parallel size)")
    cluster_d: dict[str, Any] = {"preset": cluster}
    if world % gpn == 0:
        cluster_d["nodes"] = world // gpn
    elif world < gpn:
        cluster_d.update(nodes=1, gpus_per_node=world)
    else:
        raise InputError("--nodes", None, f"the node count: {world} data-parallel ranks are not a multiple of {gpn}")
    micro = micro or (batch // (world * (accum or 1)) if batch else 1)
    batch = batch or micro * (accum or 1) * world
    zero = cfg.get("zero_optimization") or {}
    stage = int(zero.get("stage", 0)) if isinstance(zero, dict) else 0
    parallel: dict[str, Any] = {"dp": world, "micro_batch": micro, "global_batch": batch, "zero_stage": stage}
    for key in ("offload_optimizer", "offload_param"):
        dev = (zero.get(key) or {}).get("device") if isinstance(zero, dict) else None
        if dev not in (None, "none"):
            raise InputError(f"zero_optimization.{key}.device", dev, "none: offload is not modelled yet")
    ac = cfg.get("activation_checkpointing") or {}
    if ac:
        parallel["recompute"] = "full"
        notes.append("activation_checkpointing: full recompute of every layer (Megatron-DeepSpeed's checkpointing)")
    dtype = "fp32"
    if (cfg.get("bf16") or {}).get("enabled"):
        dtype = "bf16"
    elif (cfg.get("fp16") or {}).get("enabled"):
        dtype = "fp16"
    opt = str((cfg.get("optimizer") or {}).get("type", "adam")).lower()
    framework = "deepspeed"
    accum = str((cfg.get("data_types") or {}).get("grad_accum_dtype", "")).lower()
    if dtype == "bf16" and (stage == 0 or (stage == 1 and accum in ("fp32", "float32"))):
        # DeepSpeed wraps the optimizer in its BF16_Optimizer: bf16 with fp32 gradient accumulation, its
        # optimizer states sharded over dp (deepspeed/runtime/engine.py _do_optimizer_sanity_check)
        framework = "deepspeed-bf16"
        parallel["zero_stage"] = 1
        notes.append(f"bf16 with zero_optimization.stage {stage}: DeepSpeed's BF16_Optimizer (framework "
                     "deepspeed-bf16, its own ZeRO-1)")
    scenario = {"name": name, "framework": framework, "model": {}, "cluster": cluster_d, "parallel": parallel,
                "training": {"dtype": dtype, "optimizer": "sgd" if opt == "sgd" else "adam"}}
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
    iterations, median = steady_state(step_times(lines, scenario["parallel"]["global_batch"]), "deepspeed-log")
    return ImportResult("deepspeed-log", source if config_text is None else f"{source} + {config_name}",
                        "deepspeed", scenario, iterations, median, notes=notes)


def import_deepspeed_json(text: str, source: str, cluster: str | None, nodes: int | None) -> ImportResult:
    scenario, notes = scenario_from_config(read_config(text, source), cluster=cluster, nodes=nodes,
                                           name=f"imported from {source}")
    return ImportResult("deepspeed-json", source, "deepspeed", scenario, notes=notes)
