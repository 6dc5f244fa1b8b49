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

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from clustersim.calibrate.fit import AlphaBeta, DesignRow
from clustersim.hardware.spec import ClusterSpec, FabricSpec, GpuSpec

REL_STEP = 0.01      # relative perturbation for reading the simulator's coefficients
BW_BOUND_SHARE = 0.5  # a case informs the bandwidth when at least half its simulated time is bandwidth time


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


def collective_time_s(op: str, size_bytes: float, cluster: ClusterSpec, shape: Any) -> float:
    from clustersim.collectives import plan_collective
    return plan_collective(op, size_bytes, cluster, shape).time_s


@dataclass(frozen=True, slots=True)
class FitCase:
    """One measured collective and how to build its cluster around a candidate fabric."""

    op: str
    size_bytes: float
    measured_s: float
    cluster_with: Callable[[FabricSpec], ClusterSpec]
    shape: Any


def design_row(case: FitCase, fabric: FabricSpec) -> DesignRow:
    """The simulator's local coefficients ``t = a*latency + b/bandwidth + c`` for this case
    around ``fabric``, read by perturbing the fabric's latency and effective bandwidth by 1%.
    ``c`` (the part that does not depend on this fabric: the other tier, fixed protocol
    latencies) is moved to the measured side."""
    lat, bw = fabric.latency_s, fabric.effective_bw_bytes_per_s
    t0 = collective_time_s(case.op, case.size_bytes, case.cluster_with(fabric), case.shape)
    t_lat = collective_time_s(case.op, case.size_bytes,
                              case.cluster_with(replace(fabric, latency_s=lat * (1 + REL_STEP))), case.shape)
    t_bw = collective_time_s(case.op, case.size_bytes, case.cluster_with(
        replace(fabric, bw_bytes_per_s=fabric.bw_bytes_per_s / (1 + REL_STEP))), case.shape)
    a = (t_lat - t0) / (lat * REL_STEP)
    beta = 1.0 / bw
    b = (t_bw - t0) / (beta * REL_STEP)
    c = t0 - a * lat - b * beta
    return DesignRow(latency_terms=max(0.0, a), wire_bytes=max(0.0, b), measured_s=max(1e-12, case.measured_s - c))


def _sq_rel_err(cases: list[FitCase], fabric: FabricSpec) -> float:
    return sum(((collective_time_s(c.op, c.size_bytes, c.cluster_with(fabric), c.shape) - c.measured_s)
                / c.measured_s) ** 2 for c in cases)


def _log_search(err: Callable[[float], float], grid: list[float]) -> float:
    """Minimise ``err`` over a positive parameter: the best point of a log-spaced ``grid``, then
    golden-section search on the log scale between its neighbours (robust where the simulator's
    derivative is zero, e.g. while the fabric is not yet the bottleneck)."""
    errs = [err(x) for x in grid]
    i = min(range(len(grid)), key=errs.__getitem__)
    lo, hi = math.log(grid[max(0, i - 1)]), math.log(grid[min(len(grid) - 1, i + 1)])
    inv_phi = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        x1, x2 = hi - inv_phi * (hi - lo), lo + inv_phi * (hi - lo)
        if err(math.exp(x1)) <= err(math.exp(x2)):
            hi = x2
        else:
            lo = x1
    return math.exp((lo + hi) / 2)


def _search_bandwidth(cases: list[FitCase], fabric: FabricSpec) -> FabricSpec:
    """The bandwidth, searched from x1000 below to x1000 above the current one (12% grid)."""
    grid = [fabric.bw_bytes_per_s * 10 ** (k / 20) for k in range(-60, 61)]
    bw = _log_search(lambda x: _sq_rel_err(cases, replace(fabric, bw_bytes_per_s=x)), grid)
    return replace(fabric, bw_bytes_per_s=bw)


def _search_latency(cases: list[FitCase], fabric: FabricSpec) -> FabricSpec:
    """The latency, searched from 0.1 us to 10 ms with the bandwidth held fixed."""
    grid = [1e-7 * 10 ** (k / 10) for k in range(0, 51)]
    lat = _log_search(lambda x: _sq_rel_err(cases, replace(fabric, latency_s=x)), grid)
    return replace(fabric, latency_s=lat)


def fit_fabric(cases: list[FitCase], start: FabricSpec) -> tuple[FabricSpec, AlphaBeta, bool]:
    """Latency and effective bandwidth of ``start`` refitted so that the simulator reproduces
    ``cases`` (least squares of relative error), in two stages: the bandwidth on the cases whose
    simulated time is mostly bandwidth time, then, with that bandwidth held, the latency on the
    rest (where the simulator uses the fabric's latency at all). Fitting both on all cases at
    once lets gloo's per-step costs, which no single latency reproduces, drag the bandwidth past
    the line rate. Returns the fitted fabric (efficiency folded into the bandwidth), the fit
    summary, and whether the simulator used the fabric's latency."""
    fabric = _search_bandwidth(cases, replace(start, bw_bytes_per_s=start.effective_bw_bytes_per_s,
                                              efficiency=1.0))
    rows = [design_row(c, fabric) for c in cases]
    uses_latency = any(r.latency_terms > 0 for r in rows)
    beta = 1.0 / fabric.bw_bytes_per_s
    bw_bound = [c for c, r in zip(cases, rows, strict=True)
                if r.wire_bytes * beta >= BW_BOUND_SHARE * (r.wire_bytes * beta + c.measured_s - r.measured_s)]
    used = cases
    if len(bw_bound) >= 2:
        used = bw_bound
        fabric = _search_bandwidth(used, fabric)
    latency_bound = [c for c in cases if c not in used]
    if uses_latency and latency_bound:
        fabric = _search_latency(latency_bound, fabric)
        used = cases
    errs = sorted(abs(collective_time_s(c.op, c.size_bytes, c.cluster_with(fabric), c.shape) / c.measured_s - 1) * 100
                  for c in used)
    ab = AlphaBeta(alpha_s=fabric.latency_s if uses_latency else 0.0, beta_s_per_byte=1 / fabric.bw_bytes_per_s,
                   points=len(used), median_abs_err_pct=statistics.median(errs))
    return fabric, ab, uses_latency


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
    if kind in ("ddp_step", "zero1_step", "fsdp_step"):
        par.update(dp=world, global_batch=gb * world,
                   zero_stage={"ddp_step": 0, "zero1_step": 1, "fsdp_step": 3}[kind])
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
