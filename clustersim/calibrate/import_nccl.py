"""`clustersim calibrate --nccl-tests FILE`: fit a fabric to nccl-tests results of a real
cluster and write it, with a cluster preset that uses it, as a profile file.

The fabric fitted is the one the log's communicator crosses at its bottleneck: scale-out when
the ranks span several hosts, scale-up inside one host. Its latency and achieved bandwidth are
fitted (clustersim.calibrate.fit) to the simulator's own formula for the collective on a
cluster shaped like the log (ranks per host, hosts), starting from a base cluster preset.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.calibrate import predict
from clustersim.calibrate.fit import AlphaBeta
from clustersim.calibrate.nccl_tests import NcclTestsRun, parse_nccl_tests
from clustersim.calibrate.profile import CalibratedCluster, fabric_from_fit, render_profile, write_profile
from clustersim.errors import InputError


@dataclass(frozen=True, slots=True)
class NcclFit:
    run: NcclTestsRun
    tier: str
    fit: AlphaBeta
    fabric_bw_bytes_per_s: float
    efficiency: float
    latency_s: float
    profile_path: Path
    cluster_name: str
    errors_pct: tuple[tuple[int, float], ...]   # (size, error of the fitted model) per row used

    def to_json(self) -> dict[str, Any]:
        return {"op": self.run.op, "ranks": self.run.ranks, "nodes": self.run.nodes, "device": self.run.device,
                "nccl_version": self.run.nccl_version, "tier": self.tier, "points": self.fit.points,
                "fabric": {"bw_GBps": self.fabric_bw_bytes_per_s / units.GB, "efficiency": round(self.efficiency, 6),
                           "latency_us": round(self.latency_s * 1e6, 3)},
                "fit_median_abs_err_pct": round(self.fit.median_abs_err_pct, 3),
                "errors_pct": [{"size_bytes": s, "error_pct": round(e, 3)} for s, e in self.errors_pct],
                "profile": str(self.profile_path), "cluster": self.cluster_name}


def fit_nccl_tests(text: str, base_cluster: str, name: str, out: Path, op: str | None = None,
                   min_size_bytes: int = 0, source: str = "nccl-tests log") -> NcclFit:
    from clustersim.hardware.load import describe, load_cluster
    from clustersim.hardware.spec import FabricSpec
    run = parse_nccl_tests(text, op)[0]
    base = load_cluster(base_cluster, run.nodes)
    if run.ranks_per_node > base.gpus_per_node:
        raise InputError("--cluster", base_cluster, f"a preset with at least {run.ranks_per_node} GPUs per node "
                         f"(the log has {run.ranks_per_node} ranks per host)")
    tier = "scale_out" if run.nodes > 1 else "scale_up"
    shape_cls = __import__("clustersim.collectives", fromlist=["GroupShape"]).GroupShape
    shape = shape_cls(ranks_per_node=run.ranks_per_node, num_nodes=run.nodes)
    base_fabric: FabricSpec = getattr(base, tier)
    cases, used = [], []
    for row in run.rows:
        if row.size_bytes < max(1, min_size_bytes) or row.time_s <= 0:
            continue
        cases.append(predict.FitCase(run.op, row.size_bytes, row.time_s,
                                     lambda f: predict.with_fabric(base, f, tier), shape))
        used.append(row)
    if len(cases) < 2:
        raise InputError("--min-size", min_size_bytes, "a size that leaves at least two rows of the log to fit")
    fitted, ab, uses_latency = predict.fit_fabric(cases, base_fabric)
    # the simulator's NCCL model takes latencies from NCCL's tuning tables; keep the base
    # fabric's latency where the fit cannot see it
    latency_s = fitted.latency_s if uses_latency else base_fabric.latency_s
    fabric = fabric_from_fit(name, base_fabric.kind, base_fabric.bw_bytes_per_s, fitted.bw_bytes_per_s, latency_s,
                             f"fitted by clustersim calibrate --nccl-tests to {source}: {run.op}, {run.ranks} ranks "
                             f"on {run.nodes} hosts, {run.device}, NCCL {run.nccl_version}",
                             None if uses_latency else f"of {base_cluster}'s {tier} fabric: the simulator's NCCL "
                             "model takes collective latencies from NCCL's tuning tables, so the log cannot fit it")
    raw = describe("clusters", base_cluster)
    cluster = CalibratedCluster(
        name=name, gpu=raw["gpu"], gpus_per_node=raw["gpus_per_node"], nodes=run.nodes,
        scale_up=name if tier == "scale_up" else raw["scale_up"],
        scale_out=name if tier == "scale_out" else raw["scale_out"],
        nics_per_node=raw.get("nics_per_node", 1),
        source=f"{base_cluster} with its {tier} fabric fitted to {source}")
    header = (f"Calibrated from nccl-tests by `clustersim calibrate --nccl-tests` ({source}).\n"
              f"Base cluster preset: {base_cluster}; fitted fabric: {tier}.")
    path = write_profile(out, render_profile([], [fabric], [cluster], header))
    fitted = FabricSpec(name=name, kind=fabric.kind, bw_bytes_per_s=fabric.bw_bytes_per_s, latency_s=fabric.latency_s,
                        efficiency=fabric.efficiency)
    errs = []
    for row in used:
        t = predict.collective_time_s(run.op, row.size_bytes, predict.with_fabric(base, fitted, tier), shape)
        errs.append((row.size_bytes, (t - row.time_s) / row.time_s * 100))
    return NcclFit(run, tier, ab, fabric.bw_bytes_per_s, fabric.efficiency, fabric.latency_s, path, name,
                   tuple(errs))
