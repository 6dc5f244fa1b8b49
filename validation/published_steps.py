"""Published training runs with their layouts and step-time predictions (validation only).

Two tables: ``validation/reference/megatron_moe_published.yaml`` (MoE runs, benchmarks/accuracy_moe.py)
and ``validation/reference/cp_published.yaml`` (context-parallel runs, benchmarks/accuracy_cp.py).

Validation only: nothing is fitted to these runs, and they do not feed the prediction interval.
The measured step time of each run is derived from the figure its source publishes:

* ``tokens_per_s_per_gpu``: ``global_batch * seq_len / (X * gpus)`` (Megatron-Bridge tables);
* ``samples_per_s_per_gpu``: ``global_batch / (X * gpus)`` (sequences per GPU per second: the Zero
  Bubble paper's tables, ``validation/reference/schedules_published.yaml``);
* ``megatron_tflops_per_gpu``: Megatron-LM's own FLOPs per step (``megatron_flops_per_step``) over
  ``X * 1e12 * gpus`` (the Megatron-Core MoE README's headline);
* ``step_time_s``: as derived in the row (DeepSeek-V3's GPU-hours per trillion tokens).

* ``tflops_per_gpu``: the source's own TFLOP/s per GPU with clustersim's model FLOPs per step (the
  source does not publish its FLOPs formula; stated in the row).

tests/validation/test_published_steps.py checks the files and the cheap rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.inputs import read_yaml_file
from clustersim.scenario import Scenario, scenario_from_dict

ROOT = Path(__file__).resolve().parent.parent
MOE_FILE = ROOT / "validation" / "reference" / "megatron_moe_published.yaml"
CP_FILE = ROOT / "validation" / "reference" / "cp_published.yaml"


@functools.lru_cache(maxsize=4)
def _document(path: Path) -> dict[str, Any]:
    return read_yaml_file(path, "validation.runs", "a validation table")


def megatron_flops_per_step(scenario: Scenario) -> float:
    """Megatron-LM's ``num_floating_point_operations`` for a GQA/MoE GPT (megatron/training/training.py
    at 8b7275113f, 2024-11, the MCore v0.9 era of the README's 468 TFLOP/s figure):
    ``12 B s L h^2 ((1 + g/a + s/h) q/h + ffn/h * topk * (3/2 if SwiGLU) + V / (2 L h))``, with q the
    query projection width (kv_channels * heads = h here) and no causal halving of the s/h term."""
    m, par = scenario.model, scenario.parallel
    b, s, layers, h = par.global_batch, m.seq_len, m.layers, m.hidden
    topk = m.moe_top_k if m.is_moe else 1
    gated = 1.5 if m.ffn_act == "swiglu" else 1.0
    ffn = m.moe_expert_ffn_hidden if m.is_moe else m.ffn_hidden
    q_ratio = m.heads * m.head_dim / h
    per = (1 + m.kv_heads / m.heads + s / h) * q_ratio + ffn / h * topk * gated + m.vocab / (2 * layers * h)
    return 12.0 * b * s * layers * h * h * per


@dataclass(frozen=True)
class Prediction:
    id: str
    measured_s: float
    predicted_s: float
    interval_s: tuple[float, float]

    @property
    def error(self) -> float:
        return self.predicted_s / self.measured_s - 1

    @property
    def inside(self) -> bool:
        return self.interval_s[0] <= self.measured_s <= self.interval_s[1]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "measured_step_time_s": self.measured_s, "predicted_step_time_s": self.predicted_s,
                "error": self.error, "interval_s": list(self.interval_s), "inside": self.inside}


@dataclass(frozen=True)
class PublishedRun:
    id: str
    source: str
    measured: dict[str, float]
    scenario: dict[str, Any]

    @property
    def source_short(self) -> str:
        return self.source.split(",")[0] + ("," + self.source.split(",")[1] if "," in self.source else "")

    def build(self) -> Scenario:
        return scenario_from_dict({"name": self.id, **self.scenario})

    @property
    def gpus(self) -> int:
        return self.build().cluster.num_gpus

    @property
    def gpu_label(self) -> str:
        return self.build().cluster.gpu.name

    def measured_step_time_s(self) -> float:
        sc = self.build()
        if "step_time_s" in self.measured:
            return float(self.measured["step_time_s"])
        tokens = sc.parallel.global_batch * sc.model.seq_len
        if "tokens_per_s_per_gpu" in self.measured:
            return tokens / (float(self.measured["tokens_per_s_per_gpu"]) * sc.cluster.num_gpus)
        if "samples_per_s_per_gpu" in self.measured:
            return sc.parallel.global_batch / (float(self.measured["samples_per_s_per_gpu"]) * sc.cluster.num_gpus)
        if "tflops_per_gpu" in self.measured:
            from clustersim.compute.flops import model_flops_per_step

            return model_flops_per_step(sc.model, sc.parallel.global_batch) / (
                float(self.measured["tflops_per_gpu"]) * 1e12 * sc.cluster.num_gpus)
        if "megatron_tflops_per_gpu" in self.measured:
            return megatron_flops_per_step(sc) / (float(self.measured["megatron_tflops_per_gpu"]) * 1e12
                                                  * sc.cluster.num_gpus)
        raise ValueError(f"{self.id}: unknown measured figure {sorted(self.measured)}")

    def predict(self) -> Prediction:
        from clustersim.api import simulate
        from clustersim.uncertainty import step_interval

        sc = self.build()
        predicted = simulate(sc).step_time_s
        lo, hi = step_interval(sc).of(predicted)
        return Prediction(self.id, self.measured_step_time_s(), predicted, (lo, hi))


def _scenario_of(entry: dict[str, Any]) -> dict[str, Any]:
    if "scenario_file" in entry:
        data = read_yaml_file(ROOT / entry["scenario_file"], "validation.moe_runs.scenario_file")
        return {k: v for k, v in data.items() if k != "name"}
    return entry["scenario"]


def runs(path: Path = MOE_FILE) -> list[PublishedRun]:
    return [PublishedRun(e["id"], e["source"], dict(e["measured"]), _scenario_of(e)) for e in _document(path)["runs"]]


def not_simulated(path: Path = MOE_FILE) -> list[dict[str, str]]:
    return list(_document(path).get("not_simulated", []))
