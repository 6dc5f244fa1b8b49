"""Predictions of measured cases through the normal simulator, and the design rows that let
the fits target the simulator's own formulas.

Collectives go through ``clustersim.collectives.plan_collective`` on the calibrated cluster;
compute through the calibrated GPU entry (``peak_TFLOPS * gemm_efficiency``, memory copies at
``hbm_bw``); training steps through ``clustersim.api.simulate`` on a scenario whose cluster is
the calibrated preset. The cluster shape follows the run mode: in namespace mode every rank is
its own host (one GPU and one NIC per node, the fabric is scale-out); on loopback all ranks
share one node (the fabric is scale-up).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clustersim.calibrate.fit import DesignRow
from clustersim.hardware.spec import ClusterSpec, FabricSpec, GpuSpec

PROBE_LATENCY_S = 1e-5     # probe fabric for reading the simulator's alpha/beta coefficients
PROBE_BW_BYTES_PER_S = 1e9


def mode_cluster(name: str, gpu: GpuSpec, fabric: FabricSpec, mode: str, world: int) -> ClusterSpec:
    """The calibrated cluster for ``world`` ranks in run ``mode`` ("netns" or "loopback")."""
    if mode == "netns":
        return ClusterSpec(name=name, gpu=gpu, num_nodes=world, gpus_per_node=1, scale_up=fabric,
                           scale_out=fabric, nics_per_node=1)
    return ClusterSpec(name=name, gpu=gpu, num_nodes=1, gpus_per_node=world, scale_up=fabric,
                       scale_out=fabric, nics_per_node=1)


def group_shape(mode: str, world: int) -> Any:
    from clustersim.collectives import GroupShape
    return GroupShape(ranks_per_node=1, num_nodes=world) if mode == "netns" else GroupShape(
        ranks_per_node=world, num_nodes=1)


def _probe_fabric(latency_s: float, bw: float) -> FabricSpec:
    return FabricSpec(name="probe", kind="ethernet", bw_bytes_per_s=bw, latency_s=latency_s, efficiency=1.0)


def collective_time_s(op: str, size_bytes: float, cluster: ClusterSpec, shape: Any) -> float:
    from clustersim.collectives import plan_collective
    return plan_collective(op, size_bytes, cluster, shape).time_s


def design_row(op: str, size_bytes: float, measured_s: float, cluster_with: Any, shape: Any,
               fixed_s: float = 0.0) -> DesignRow:
    """Read the simulator's coefficients ``t = a*alpha + b*beta (+ c)`` for this case by probing
    it with fabrics of doubled latency and halved bandwidth. ``cluster_with(fabric)`` returns
    the cluster with the fitted fabric replaced by ``fabric``."""
    lat, bw = PROBE_LATENCY_S, PROBE_BW_BYTES_PER_S
    t0 = collective_time_s(op, size_bytes, cluster_with(_probe_fabric(lat, bw)), shape)
    t_lat = collective_time_s(op, size_bytes, cluster_with(_probe_fabric(2 * lat, bw)), shape)
    t_bw = collective_time_s(op, size_bytes, cluster_with(_probe_fabric(lat, bw / 2)), shape)
    a = (t_lat - t0) / lat            # latency terms
    b = (t_bw - t0) * bw              # bytes at unit bandwidth
    c = t0 - a * lat - b / bw         # part that does not depend on this fabric (other tier)
    return DesignRow(latency_terms=a, wire_bytes=b, measured_s=max(1e-12, measured_s - c - fixed_s))


def gemm_time_s(flops: float, gpu: GpuSpec, dtype: str = "fp32") -> float:
    """A GEMM on a calibrated device: a fixed fraction of peak (GpuSpec.gemm_efficiency > 0)."""
    eff = gpu.gemm_efficiency if gpu.gemm_efficiency > 0 else 1.0
    return flops / (gpu.peak(dtype) * eff)


def memcpy_time_s(bytes_moved: float, gpu: GpuSpec) -> float:
    return bytes_moved / gpu.hbm_bw_bytes_per_s


def step_scenario(kind: str, params: dict[str, Any], preset: str, mode: str) -> dict[str, Any]:
    """The scenario dict that describes a measured training step (validation/bench_steps.py)."""
    m, world = params["model"], params["world"]
    gb = m["micro_batch"] * m["micro_batches"]
    par: dict[str, Any] = {"tp": 1, "pp": 1, "dp": 1, "micro_batch": m["micro_batch"], "zero_stage": 0,
                           "schedule": "1f1b", "recompute": "none", "sequence_parallel": False}
    if kind in ("ddp_step", "zero1_step"):
        par.update(dp=world, global_batch=gb * world, zero_stage=1 if kind == "zero1_step" else 0)
    elif kind == "tp_step":
        par.update(tp=world, global_batch=gb)
    elif kind == "pp_step":
        par.update(pp=world, global_batch=gb, schedule=params.get("schedule", "1f1b"))
    else:
        raise ValueError(kind)
    cluster: dict[str, Any] = {"preset": preset, "nodes": world if mode == "netns" else 1}
    if mode != "netns":
        cluster["gpus_per_node"] = world
    return {"name": f"validate {kind}", "cluster": cluster, "parallel": par,
            "model": {"layers": m["layers"], "hidden": m["hidden"], "heads": m["heads"], "vocab": m["vocab"],
                      "seq_len": m["seq_len"], "ffn_hidden": 4 * m["hidden"], "ffn_act": "gelu",
                      "tie_embeddings": False},
            "training": {"dtype": "fp32", "optimizer": "adam"}}


def predict_step_s(kind: str, params: dict[str, Any], preset: str, mode: str) -> float:
    from clustersim.api import simulate
    from clustersim.scenario import scenario_from_dict
    return simulate(scenario_from_dict(step_scenario(kind, params, preset, mode))).step_time_s


def with_fabric(cluster: ClusterSpec, fabric: FabricSpec, tier: str) -> ClusterSpec:
    return replace(cluster, scale_out=fabric) if tier == "scale_out" else replace(cluster, scale_up=fabric)
