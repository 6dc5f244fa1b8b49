"""Predictions of measured cases through the normal simulator, and the fabric bandwidth fitted
through it (``fit_bandwidth``: the simulator's own formulas, NCCL's algorithm choice included).

Collectives go through ``clustersim.collectives.plan_collective`` on the calibrated cluster;
compute through the calibrated GPU entry (``peak_TFLOPS * gemm_efficiency``, memory copies at
``hbm_bw``); training steps through ``clustersim.api.simulate`` on a scenario whose cluster is
the calibrated preset, at the compute rate of the local probe measured beside each step
(``probe_scale``). The cluster shape follows the run mode: in namespace mode every rank is
its own host (one GPU and one NIC per node, the fabric is scale-out); on loopback all ranks
share one node (the fabric is scale-up).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from clustersim.calibrate.fit import AlphaBeta
from clustersim.hardware.spec import ClusterSpec, FabricSpec, GpuSpec


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


def _sq_rel_err(cases: list[FitCase], fabric: FabricSpec) -> float:
    return sum(((collective_time_s(c.op, c.size_bytes, c.cluster_with(fabric), c.shape) - c.measured_s)
                / c.measured_s) ** 2 for c in cases)


def _log_search(err: Callable[[float], float], grid: list[float]) -> float:
    """Minimise ``err`` over a positive parameter: the best point of a log-spaced ``grid``, then
    golden-section search on the log scale between its neighbours."""
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


def fit_bandwidth(cases: list[FitCase], start: FabricSpec, max_bw_bytes_per_s: float | None = None,
                  ) -> tuple[FabricSpec, AlphaBeta]:
    """The fabric's achieved bandwidth (efficiency folded in) that makes the simulator reproduce
    ``cases`` (least squares of relative error), searched from x1000 below to x1000 above the
    start (12% grid, then golden section); the latency is kept as given (a measured ping).

    ``max_bw_bytes_per_s``: a hard upper bound where the link has one (the rate of a ``tc`` token
    bucket: no stream through it averages more), so that no outlier can fit a link faster than
    it is shaped."""
    fabric = replace(start, bw_bytes_per_s=start.effective_bw_bytes_per_s, efficiency=1.0)
    top = fabric.bw_bytes_per_s * 1e3 if max_bw_bytes_per_s is None else max_bw_bytes_per_s
    grid = sorted({min(top, fabric.bw_bytes_per_s * 10 ** (k / 20)) for k in range(-60, 61)})
    bw = _log_search(lambda x: _sq_rel_err(cases, replace(fabric, bw_bytes_per_s=x)), grid)
    fabric = replace(fabric, bw_bytes_per_s=min(bw, top))
    errs = sorted(abs(collective_time_s(c.op, c.size_bytes, c.cluster_with(fabric), c.shape) / c.measured_s - 1)
                  * 100 for c in cases)
    ab = AlphaBeta(alpha_s=fabric.latency_s, beta_s_per_byte=1 / fabric.bw_bytes_per_s, points=len(cases),
                   median_abs_err_pct=statistics.median(errs))
    return fabric, ab


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
    elif kind == "local_step":   # the probe: the whole model on one rank, no communication
        world = 1
        par.update(global_batch=gb)
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


X_MIN = 1e-6   # the smallest 1 / compute_scale probe_scale tries: a compute rate 1e6 x the profile's


def local_floor_s(params: dict[str, Any], preset: str, mode: str) -> float:
    """The simulated local-step probe at an unbounded compute rate (compute_scale 1 / X_MIN): the
    host's share of the step (clustersim.compute.host), which no compute_scale shortens."""
    from clustersim.calibrate.machine import simulate_s
    from clustersim.scenario import scenario_from_dict
    data = step_scenario("local_step", params, preset, mode)
    return simulate_s(data, scenario_from_dict(data).cluster, 1 / X_MIN)


def probe_scale(params: dict[str, Any], preset: str, mode: str, probe_s: float) -> float | None:
    """The compute_scale at which the simulator reproduces the local-step probe measured beside a
    step (validation/bench_steps.py): the machine's compute rate at the time of that step. A
    one-rank step is its kernels, which compute_scale divides, plus the host's share of the step
    (clustersim.compute.host: synchronising calls, issue deficits), which it does not: the
    simulated probe is T(k) = A + B / k where no kernel crosses its issue time, so k is solved
    on 1 / k by secant steps from T(1) and T(2) (tests/validation/test_fit_points.py checks it).
    None where the probe is no longer than the simulator's non-compute floor A (``local_floor_s``):
    no compute rate reproduces it (the solver stopped at its bound and reported compute_scale 1e6)."""
    from clustersim.calibrate.machine import simulate_s
    from clustersim.scenario import scenario_from_dict
    if probe_s <= local_floor_s(params, preset, mode):
        return None
    data = step_scenario("local_step", params, preset, mode)
    cluster = scenario_from_dict(data).cluster
    x0, x1 = 1.0, 0.5                          # 1 / k
    t0, t1 = simulate_s(data, cluster, 1 / x0), simulate_s(data, cluster, 1 / x1)
    for _ in range(8):
        if t1 in (t0, probe_s):
            break
        x0, x1, t0 = x1, max(X_MIN, x1 + (probe_s - t1) * (x1 - x0) / (t1 - t0)), t1
        t1 = simulate_s(data, cluster, 1 / x1)
        if abs(t1 - probe_s) <= 1e-12 * probe_s:
            break
    return 1 / x1


def predict_step_s(kind: str, params: dict[str, Any], preset: str, mode: str, probe_s: float | None = None) -> float:
    """The step's simulated time on the calibrated preset; with the probe measured beside it, at
    the compute rate the probe says (``probe_scale``; at the profile's own rate where the probe is
    below the simulator's non-compute floor)."""
    from clustersim.api import simulate
    from clustersim.scenario import scenario_from_dict
    data = step_scenario(kind, params, preset, mode)
    scale = None if probe_s is None else probe_scale(params, preset, mode, probe_s)
    if scale is None:
        return simulate(scenario_from_dict(data)).step_time_s
    from clustersim.calibrate.machine import simulate_s
    sc = scenario_from_dict(data)
    return simulate_s(data, sc.cluster, scale)


def with_fabric(cluster: ClusterSpec, fabric: FabricSpec, tier: str) -> ClusterSpec:
    return replace(cluster, scale_out=fabric) if tier == "scale_out" else replace(cluster, scale_up=fabric)
