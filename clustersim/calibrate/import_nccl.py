"""`clustersim calibrate --nccl-tests FILE...`: fit a cluster's fabrics to nccl-tests results of
a real cluster and write them, with a cluster preset that uses them, as a profile file.

Every row of every log (all_reduce, all_gather, reduce_scatter, alltoall, ...; one node or
several) is one observation of ``plan_collective`` on the cluster (clustersim.calibrate.
fabric_fit), so one profile serves them all. The fitted fabrics start from the base preset's
(``--cluster``, or the preset of the GPU the log names) and keep everything the fit does not
move: NVLS, its bandwidth, switch latencies, PCIe, the rail layout. Each time is the mean of
the out-of-place and in-place columns.

Rows of 16 MiB and more (the sizes of a training step's collectives: TP activations of
b x s x h, DP gradient buckets of 40M+ parameters, pipeline activations) carry weight 1; rows
from ``--min-size`` (1 MiB) to 16 MiB weight 0.05, because the simulator's medium-size shape
(NCCL's chunking and protocol switches) is the least certain part and must not pull the large
sizes off; smaller rows are reported, not fitted.

The errors reported are those of the profile as written: the file is read back through the
hardware loader and every row predicted again.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.calibrate.fabric_fit import FabricFit, Observation, fit_fabrics, predict_s
from clustersim.calibrate.nccl_tests import NcclTestsRun, parse_nccl_tests
from clustersim.calibrate.profile import entry_from_raw, profile_in_env, render_entries, write_profile
from clustersim.errors import InputError

TRAINING_SIZE_BYTES = 16 * units.MiB   # rows at and above: weight 1 (module docstring)
SMALL_WEIGHT = 0.05
DEFAULT_MIN_SIZE_BYTES = units.MiB
# GPU named in the log's rank lines -> the preset of its usual server (SXM boards only; a PCIe
# board has no NVSwitch and needs --cluster). Only presets that exist are used.

@dataclass(frozen=True, slots=True)
class RowResult:
    run: int
    op: str
    size_bytes: int
    measured_s: float
    predicted_s: float
    algo: str
    protocol: str
    weight: float          # 0 = reported, not fitted
    ranks: int

    @property
    def error_pct(self) -> float:
        return (self.predicted_s / self.measured_s - 1) * 100

    def busbw_GBps(self, t: float) -> float:
        from clustersim.collectives.plan import busbw_factor
        return self.size_bytes / t * busbw_factor(self.op, self.ranks) / units.GB

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "op": self.op, "size_bytes": self.size_bytes,
                "measured_us": round(self.measured_s * 1e6, 3), "predicted_us": round(self.predicted_s * 1e6, 3),
                "measured_busbw_GBps": round(self.busbw_GBps(self.measured_s), 3),
                "predicted_busbw_GBps": round(self.busbw_GBps(self.predicted_s), 3),
                "error_pct": round(self.error_pct, 3), "algo": self.algo, "protocol": self.protocol,
                "fitted": self.weight > 0}


@dataclass(frozen=True, slots=True)
class NcclCalibration:
    runs: tuple[NcclTestsRun, ...]
    sources: tuple[str, ...]
    base_cluster: str
    fit: FabricFit
    rows: tuple[RowResult, ...]
    profile_path: Path
    cluster_name: str
    fabric_names: dict[str, str]      # tier -> written fabric name

    def summary(self) -> dict[str, Any]:
        big = [abs(r.error_pct) for r in self.rows if r.size_bytes >= TRAINING_SIZE_BYTES]
        fitted = [abs(r.error_pct) for r in self.rows if r.weight > 0]
        return {"rows": len(self.rows), "rows_fitted": len(fitted),
                "fit_median_abs_err_pct": round(statistics.median(fitted), 3) if fitted else None,
                "rows_16MiB_plus": len(big),
                "median_abs_err_pct_16MiB_plus": round(statistics.median(big), 3) if big else None,
                "max_abs_err_pct_16MiB_plus": round(max(big), 3) if big else None}

    def to_json(self) -> dict[str, Any]:
        return {"base_cluster": self.base_cluster, "cluster": self.cluster_name, "profile": str(self.profile_path),
                "fabrics": self.fabric_names,
                "runs": [{"source": src, "op": r.op, "op_from": r.op_source, "ranks": r.ranks, "nodes": r.nodes,
                          "device": r.device, "nccl_version": r.nccl_version, "rows": len(r.rows)}
                         for src, r in zip(self.sources, self.runs, strict=True)],
                "knobs": {k: {"base": _knob_json(k, self.fit.start[k]), "fitted": _knob_json(k, v)}
                          for k, v in self.fit.knobs.items()},
                "knobs_not_fitted": list(self.fit.fixed),
                "summary": self.summary(), "rows": [r.to_json() for r in self.rows]}


def _knob_json(name: str, value: float) -> float:
    """GB/s for bandwidths, us for latencies."""
    return round(value / units.GB, 4) if name.endswith("bw") else round(value / units.US, 4)


def infer_base_cluster(device: str) -> str:
    """The cluster preset of the GPU an nccl-tests log names (the importers' one map of GPU names,
    clustersim.importers.common.GPU_CLUSTERS)."""
    from clustersim.hardware.load import list_clusters
    from clustersim.importers.common import gpu_cluster_in
    found = gpu_cluster_in(device) if device else None
    # a part without a server preset of its own (H100 PCIe: a preset with another GPU and scale-up)
    # is no preset to calibrate from: --cluster says which machine it is
    preset = found["preset"] if found and len(found) == 1 else None
    if preset is None:
        raise InputError("--cluster", None, f"the cluster preset this log ran on (the log names the GPU "
                         f"{device or 'nowhere'!r}, which matches no preset); one of {', '.join(sorted(list_clusters()))}")
    return preset


def read_runs(logs: list[tuple[str, str]], op: str | None) -> tuple[list[NcclTestsRun], list[str]]:
    """(runs with at least two ranks, their source names) from (name, text) pairs."""
    runs, sources = [], []
    for name, text in logs:
        for run in parse_nccl_tests(text, op, name):
            if run.ranks >= 2:
                runs.append(run)
                sources.append(name)
    if not runs:
        raise InputError("--nccl-tests", ", ".join(n for n, _ in logs),
                         "nccl-tests output of at least two ranks (a one-GPU run measures no communication)")
    return runs, sources


def observations(runs: list[NcclTestsRun], min_size_bytes: int) -> list[tuple[int, Observation]]:
    obs = []
    for i, run in enumerate(runs):
        for row in run.rows:
            if row.measured_s <= 0 or row.size_bytes <= 0:
                continue
            weight = 1.0 if row.size_bytes >= TRAINING_SIZE_BYTES else SMALL_WEIGHT
            if row.size_bytes < max(1, min_size_bytes):
                weight = 0.0
            obs.append((i, Observation(run.op, row.size_bytes, row.measured_s, run.ranks_per_node, run.nodes,
                                       f"run {i}", weight)))
    return obs


def fit_nccl_tests(logs: list[tuple[str, str]], base_cluster: str | None, name: str, out: Path,
                   op: str | None = None, min_size_bytes: int = DEFAULT_MIN_SIZE_BYTES) -> NcclCalibration:
    """Fit, write ``out``, read it back and predict every row with it."""
    from clustersim.calibrate.devices import check_devices
    from clustersim.hardware.load import describe, list_clusters, load_cluster
    runs, sources = read_runs(logs, op)
    if base_cluster is None:
        base_cluster = infer_base_cluster(runs[0].device)
    elif base_cluster not in list_clusters():
        raise InputError("--cluster", base_cluster, list_clusters())
    nodes = max(r.nodes for r in runs)
    base = load_cluster(base_cluster, nodes)
    check_devices(base, [(src, r.device) for src, r in zip(sources, runs, strict=True)], "--nccl-tests")
    for run in runs:
        if run.ranks_per_node > base.gpus_per_node or run.ranks % max(1, run.nodes):
            raise InputError("--cluster", base_cluster, f"a preset with at least {run.ranks_per_node} GPUs per node "
                             f"(the log has {run.ranks} ranks on {run.nodes} hosts)")
    obs = observations(runs, min_size_bytes)
    used = [o for _, o in obs if o.weight > 0]
    if len(used) < 2:
        raise InputError("--min-size", min_size_bytes, "a size that leaves at least two rows of the logs to fit")
    fit = fit_fabrics(base, used)
    names = {"scale_up": f"{name}-scale-up", "scale_out": f"{name}-scale-out"}
    tiers = sorted({k.split(".")[0] for k in fit.knobs})
    text = _render(fit, base_cluster, base, names, tiers, name, nodes, sources, runs, describe)
    path = write_profile(out, text)
    rows = _predict_written(path, name, runs, obs)
    return NcclCalibration(tuple(runs), tuple(sources), base_cluster, fit, tuple(rows), path, name,
                           {t: names[t] for t in tiers})


def _render(fit: FabricFit, base_name: str, base: Any, names: dict[str, str], tiers: list[str], name: str,
            nodes: int, sources: list[str], runs: list[NcclTestsRun], describe: Any) -> str:
    src = ", ".join(sorted(set(sources)))
    what = "; ".join(f"{r.op} on {r.ranks} ranks / {r.nodes} hosts ({r.device}, NCCL {r.nccl_version or '?'})"
                     for r in runs)
    fabrics = {}
    for tier in tiers:
        f = getattr(fit.cluster, tier)
        raw = describe("fabrics", getattr(base, tier).name)
        why = f"fitted by clustersim calibrate --nccl-tests to {src}"
        over: list[tuple[str, object, str]] = []
        if f"{tier}.bw" in fit.knobs:
            nominal = float(raw.get("bw_GBps", 0.0)) * units.GB or float(raw.get("bw_Gbps", 0.0)) * units.GBIT
            achieved = f.effective_bw_bytes_per_s
            if nominal and achieved <= nominal:
                over += [("bw_GBps", nominal / units.GB, "nominal port rate per direction, as the base preset"),
                         ("efficiency", achieved / nominal, f"{why}: achieved / nominal")]
            else:
                over += [("bw_GBps", achieved / units.GB, f"{why}: achieved rate per direction"),
                         ("efficiency", 1.0, "the rate above is already the achieved one")]
            raw.pop("bw_Gbps", None)
        if f"{tier}.latency" in fit.knobs:
            over.append(("latency_us", f.latency_s / units.US, f"{why}: one-way latency per algorithm step"))
        if f"{tier}.nvls_bw" in fit.knobs:
            over.append(("nvls_bw_GBps", f.nvls_bw_bytes_per_s / units.GB, f"{why}: NVLS port bandwidth"))
        if f"{tier}.nvls_latency" in fit.knobs:
            over.append(("nvls_latency_us", f.nvls_latency_s / units.US, f"{why}: fixed cost of one NVLS collective"))
        fabrics[names[tier]] = (f"{base_name}'s {tier} fabric ({getattr(base, tier).name}) fitted to {src}",
                                entry_from_raw(raw, over, f"as {getattr(base, tier).name}"))
    raw_cluster = describe("clusters", base_name)
    over_c: list[tuple[str, object, str]] = [(t, names[t], f"fitted to {src}") for t in tiers]
    over_c.append(("nodes", nodes, "hosts in the largest log"))
    clusters = {name: (f"{base_name} with its {', '.join(tiers)} fabric fitted to {src}",
                       entry_from_raw(raw_cluster, over_c, f"as {base_name}"))}
    header = (f"Calibrated by `clustersim calibrate --nccl-tests` from {src}:\n{what}.\n"
              f"Base cluster preset: {base_name}. Use: --profile THIS_FILE with cluster preset {name}.")
    return render_entries(header, {"fabrics": fabrics, "clusters": clusters})


def _predict_written(path: Path, name: str, runs: list[NcclTestsRun],
                     obs: list[tuple[int, Observation]]) -> list[RowResult]:
    from clustersim.collectives import plan_collective
    from clustersim.hardware.load import load_cluster
    rows = []
    with profile_in_env(path):
        written = load_cluster(name)
        for i, o in obs:
            from dataclasses import replace
            c = written if written.num_nodes >= o.nodes else replace(written, num_nodes=o.nodes)
            plan = plan_collective(o.op, float(o.size_bytes), c, o.shape)
            t = predict_s(o, c)
            rows.append(RowResult(i, o.op, int(o.size_bytes), o.measured_s, t, plan.algo, plan.protocol, o.weight,
                                  runs[i].ranks))
    return rows
