"""`clustersim calibrate --log ... [--trace ...] [--nccl-tests ...]`: one machine profile from
any mix of training logs, profiler traces and nccl-tests logs of the same cluster, with the
leave-one-out error of every run.

Order of the fit (each stage keeps what the previous one fitted):

1. fabrics: the nccl-tests rows and the NCCL kernels of the traces (clustersim.calibrate.
   fabric_fit: bandwidths and latencies through ``plan_collective``);
2. kernels: the traces' GEMM, attention and memory-bound kernels give ``gemm_scale``,
   ``attention_scale`` and ``hbm_efficiency`` of the GPU (clustersim.calibrate.trace_fit);
3. steps: one factor ``compute_scale`` (every compute kernel's time divided by it) so that the
   simulated step times of the logs' scenarios match the measured ones (least squares of the
   log error). A log's step says one number, so one constant is fitted from them: the machine's
   sustained compute rate relative to the model (power limits, clocks, framework overheads).

Leave-one-out: every run is predicted by the fit of stage 3 without that run (with no other
run, by stages 1-2 alone: the prediction before calibration from logs). The errors
(predicted / measured - 1) go into the profile as the cluster's ``calibration:`` evidence,
which the prediction interval uses. The simulator (event engine, as `clustersim run`) is
evaluated at ``SCALE_GRID`` once per run; the fit interpolates between those points (step
time is smooth and monotone in the scale), and every reported prediction is simulated again
at its fitted scale.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.calibrate.profile import entry_from_raw, profile_in_env, render_entries, write_profile
from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec

SCALE_GRID = (0.4, 0.5, 0.625, 0.8, 1.0, 1.25, 1.6, 2.0, 2.5)
_DATE = re.compile(r"\b(20\d\d-\d\d-\d\d)[T ]\d\d:\d\d")


@dataclass
class Run:
    """One training log: its scenario, measured step and the simulated step over SCALE_GRID."""

    source: str
    kind: str
    scenario: dict[str, Any]
    measured_s: float
    grid_s: tuple[float, ...] = ()
    dates: list[str] = field(default_factory=list)

    def predicted_s(self, scale: float) -> float:
        """Step time at compute_scale ``scale``, interpolated linearly in 1/scale."""
        xs = [1 / k for k in SCALE_GRID]   # decreasing
        x = 1 / min(max(scale, SCALE_GRID[0]), SCALE_GRID[-1])
        for i in range(len(xs) - 1):
            if xs[i] >= x >= xs[i + 1]:
                f = (xs[i] - x) / (xs[i] - xs[i + 1])
                return self.grid_s[i] + f * (self.grid_s[i + 1] - self.grid_s[i])
        return self.grid_s[-1]


def fit_scale(runs: list[Run]) -> float:
    """compute_scale minimising sum log(predicted / measured)^2 (1.0 with no runs)."""
    if not runs:
        return 1.0

    def err(log_k: float) -> float:
        k = math.exp(log_k)
        return sum(math.log(r.predicted_s(k) / r.measured_s) ** 2 for r in runs)
    lo, hi = math.log(SCALE_GRID[0]), math.log(SCALE_GRID[-1])
    grid = [lo + (hi - lo) * i / 40 for i in range(41)]
    best = min(grid, key=err)
    a, b = max(lo, best - (hi - lo) / 40), min(hi, best + (hi - lo) / 40)
    inv_phi = (math.sqrt(5) - 1) / 2
    for _ in range(40):
        x1, x2 = b - inv_phi * (b - a), a + inv_phi * (b - a)
        if err(x1) <= err(x2):
            b = x2
        else:
            a = x1
    return math.exp((a + b) / 2)


def _scenario_on(data: dict[str, Any], cluster: ClusterSpec) -> Any:
    """The run's scenario with its cluster's hardware replaced by ``cluster``'s (same nodes)."""
    from clustersim.scenario import scenario_from_dict
    sc = scenario_from_dict(data)
    return replace(sc, cluster=replace(cluster, num_nodes=sc.cluster.num_nodes,
                                       gpus_per_node=sc.cluster.gpus_per_node, calibration=None))


def simulate_s(data: dict[str, Any], cluster: ClusterSpec, scale: float) -> float:
    from clustersim.api import simulate
    c = replace(cluster, gpu=replace(cluster.gpu, compute_scale=cluster.gpu.compute_scale * scale))
    return simulate(_scenario_on(data, c)).step_time_s


@dataclass
class MachineCalibration:
    base_cluster: str
    name: str
    profile_path: Path
    runs: list[Run]
    scale: float
    loo: list[tuple[float, float]]            # (fold scale, predicted step) per run
    before_s: list[float]                     # predicted with stages 1-2 only (scale 1)
    written_s: list[float]                    # predicted by the profile as written
    gpu_fit: dict[str, Any] = field(default_factory=dict)
    nccl: Any = None
    trace_notes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def loo_errors(self) -> list[float]:
        return [p / r.measured_s - 1 for (_, p), r in zip(self.loo, self.runs, strict=True)]

    def to_json(self) -> dict[str, Any]:
        loo = self.loo_errors()
        rows = []
        for i, r in enumerate(self.runs):
            rows.append({"source": r.source, "kind": r.kind, "measured_step_time_s": r.measured_s,
                         "predicted_before_s": self.before_s[i], "error_before_pct": _pct(self.before_s[i], r),
                         "loo_scale": self.loo[i][0], "predicted_loo_s": self.loo[i][1],
                         "loo_error_pct": round(loo[i] * 100, 3),
                         "predicted_calibrated_s": self.written_s[i], "error_calibrated_pct": _pct(self.written_s[i], r),
                         "scenario": r.scenario})
        out: dict[str, Any] = {"base_cluster": self.base_cluster, "cluster": self.name, "profile": str(self.profile_path),
                               "compute_scale": round(self.scale, 6), "gpu": self.gpu_fit, "runs": rows,
                               "notes": self.notes + self.trace_notes}
        if loo:
            out["leave_one_out"] = {"runs": len(loo), "median_abs_error_pct": round(statistics.median(
                abs(e) for e in loo) * 100, 3), "max_abs_error_pct": round(max(abs(e) for e in loo) * 100, 3)}
        if self.nccl is not None:
            out["nccl_tests"] = {"knobs": self.nccl.to_json()["knobs"], "summary": self.nccl.summary()}
        return out

    def print_report(self) -> None:
        from rich.console import Console
        from rich.table import Table
        out = Console(width=max(Console().width, 150))
        d = self.to_json()
        if d["runs"]:
            t = Table(title=f"training steps: measured vs predicted ({self.base_cluster} -> {self.name})")
            for col in ("run", "measured", "before", "err", "leave-one-out", "err", "calibrated", "err"):
                t.add_column(col, justify="left" if col == "run" else "right")
            for r in d["runs"]:
                t.add_row(r["source"], f"{r['measured_step_time_s']:.3f} s", f"{r['predicted_before_s']:.3f} s",
                          f"{r['error_before_pct']:+.1f}%", f"{r['predicted_loo_s']:.3f} s",
                          f"{r['loo_error_pct']:+.1f}%", f"{r['predicted_calibrated_s']:.3f} s",
                          f"{r['error_calibrated_pct']:+.1f}%")
            out.print(t)
            loo = d.get("leave_one_out")
            if loo:
                out.print(f"leave-one-out: {loo['runs']} runs, median |error| {loo['median_abs_error_pct']:.1f}%, "
                          f"max {loo['max_abs_error_pct']:.1f}%")
            out.print(f"compute_scale {self.scale:.3f} (every compute kernel's time divided by it)")
        for k, v in self.gpu_fit.items():
            out.print(f"{k}: {v}")
        if d.get("nccl_tests"):
            s = d["nccl_tests"]["summary"]
            out.print(f"nccl-tests: {s['rows_fitted']} rows fitted, median |error| {s['fit_median_abs_err_pct']}%")
        for n in d["notes"]:
            out.print(f"[yellow]note:[/yellow] {n}")
        out.print(f"profile: {self.profile_path} (cluster preset {self.name}; use with --profile)")


def _pct(pred: float, r: Run) -> float:
    return round((pred / r.measured_s - 1) * 100, 3)


def import_runs(logs: list[Path], configs: list[Path], base: str | None, nodes: int | None,
                overrides: list[str]) -> list[Run]:
    from clustersim.importers import LOG_KINDS, detect_log_kind, finish, import_text
    from clustersim.inputs import read_text
    if configs and len(configs) != len(logs):
        raise InputError("--config", [str(c) for c in configs], f"one per --log ({len(logs)}), '-' for a log "
                         "that needs none")
    runs = []
    for i, path in enumerate(logs):
        text = read_text(path, "--log", "a training log")
        kind = detect_log_kind(text)
        if kind is None:
            raise InputError("--log", str(path), "a training log of " + ", ".join(LOG_KINDS) + " (Megatron-LM "
                             "`iteration ... elapsed time per iteration (ms)`, torchtitan `step: ... tps: ...`, "
                             "DeepSpeed `...SamplesPerSec=...` lines)")
        cfg = None
        if configs and str(configs[i]) != "-":
            cfg = (read_text(configs[i], "--config", "a job config"), configs[i].name)
        res = import_text(kind, text, path.name, config=cfg, cluster=base, nodes=nodes)
        res = finish(res, overrides)
        if res.measured_step_time_s is None:
            raise InputError("--log", str(path), "a log with training step lines")
        runs.append(Run(path.name, kind, res.scenario, res.measured_step_time_s, dates=_DATE.findall(text)))
    return runs


def calibrate_machine(*, nccl_logs: list[Path], logs: list[Path], configs: list[Path], traces: list[Path],
                      base: str | None, nodes: int | None, overrides: list[str], name: str, out: Path,
                      op: str | None, min_size_bytes: int) -> MachineCalibration:
    from clustersim.calibrate import fabric_fit
    from clustersim.calibrate.import_nccl import infer_base_cluster, observations, read_runs
    from clustersim.hardware.load import describe, list_clusters, load_cluster
    from clustersim.inputs import read_text
    runs = import_runs(logs, configs, base, nodes, overrides)
    presets = sorted({r.scenario["cluster"]["preset"] for r in runs})
    if len(presets) > 1:
        raise InputError("--cluster", presets, "one cluster preset for all --log runs (one machine is fitted)")
    nccl_texts = [(p.name, read_text(p, "--nccl-tests", "an nccl-tests output file")) for p in nccl_logs]
    nccl_runs, nccl_sources = read_runs(nccl_texts, op) if nccl_texts else ([], [])
    base = base or (presets[0] if presets else None)
    trace_data = _read_traces(traces)
    if base is None and nccl_runs:
        base = infer_base_cluster(nccl_runs[0].device)
    if base is None:
        from clustersim.calibrate.trace_fit import trace_gpu_preset
        base = next((p for p in (trace_gpu_preset(t) for t in trace_data) if p), None)
    if base is None:
        raise InputError("--cluster", None, f"the cluster preset of the machine: one of {', '.join(list_clusters())}")
    if base not in list_clusters():
        raise InputError("--cluster", base, list_clusters())
    cluster = load_cluster(base, max([1] + [r.nodes for r in nccl_runs]))
    notes: list[str] = []
    # 1. fabrics
    obs = [o for _, o in observations(nccl_runs, min_size_bytes) if o.weight > 0] if nccl_runs else []
    gpu_fit: dict[str, Any] = {}
    trace_notes: list[str] = []
    kernel_fit = None
    if trace_data:
        from clustersim.calibrate.trace_fit import fit_traces
        kernel_fit = fit_traces(trace_data, cluster)
        obs += kernel_fit.comm_observations
        trace_notes += kernel_fit.notes
    fabric = fabric_fit.fit_fabrics(cluster, obs) if obs else None
    if fabric is not None:
        cluster = replace(fabric.cluster, num_nodes=cluster.num_nodes)
    # 2. kernels
    if kernel_fit is not None:
        cluster = replace(cluster, gpu=replace(cluster.gpu, **kernel_fit.gpu_constants))
        gpu_fit.update({k: round(v, 6) for k, v in kernel_fit.gpu_constants.items()})
    # 3. steps
    for r in runs:
        r.grid_s = tuple(simulate_s(r.scenario, cluster, k) for k in SCALE_GRID)
    scale = fit_scale(runs)
    if runs and not SCALE_GRID[0] * 1.01 < scale < SCALE_GRID[-1] / 1.01:
        notes.append(f"compute_scale {scale:.3f} sits at the edge of {SCALE_GRID[0]}..{SCALE_GRID[-1]}: the runs are "
                     "far from the model; check the imported scenarios (clustersim import ... --json)")
    loo = []
    for i, r in enumerate(runs):
        k = fit_scale(runs[:i] + runs[i + 1:])
        loo.append((round(k, 6), simulate_s(r.scenario, cluster, k)))
    before = [r.grid_s[SCALE_GRID.index(1.0)] for r in runs]
    dates = sorted({d for r in runs for d in r.dates})
    evidence = None
    if runs:
        evidence = {"runs": len(runs), "loo_rel_errors": [round(p / r.measured_s - 1, 6) for (_, p), r in zip(loo, runs,
                                                                                                          strict=True)],
                    "source": "clustersim calibrate --log " + " ".join(r.source for r in runs),
                    "date": dates[-1] if dates else "unknown"}
    if evidence and not all(-1 < e < 100 for e in evidence["loo_rel_errors"]):  # what load_evidence accepts
        raise InputError("--log", " ".join(r.source for r in runs),
                         "training logs the model can explain: leave-one-out predictions are off by more than 100x "
                         f"(relative errors {evidence['loo_rel_errors']}); check the step times and the imported "
                         "scenarios (clustersim import ... --json)")
    text = _render(base, name, cluster, scale, fabric, kernel_fit, evidence, runs, nccl_sources, traces, describe)
    path = write_profile(out, text)
    written = []
    with profile_in_env(path):
        for r in runs:
            from clustersim.api import simulate
            from clustersim.scenario import scenario_from_dict
            data = {**r.scenario, "cluster": {**r.scenario["cluster"], "preset": name}}
            written.append(simulate(scenario_from_dict(data)).step_time_s)
    nccl = None
    if nccl_runs:
        from clustersim.calibrate.import_nccl import NcclCalibration, _predict_written
        rows = _predict_written(path, name, nccl_runs, observations(nccl_runs, min_size_bytes))
        names = {t: f"{name}-{t.replace('_', '-')}" for t in ("scale_up", "scale_out")}
        nccl = NcclCalibration(tuple(nccl_runs), tuple(nccl_sources), base, fabric, tuple(rows), path, name, names)
    return MachineCalibration(base, name, path, runs, scale, loo, before, written, gpu_fit, nccl, trace_notes, notes)


def _read_traces(traces: list[Path]) -> list[Any]:
    if not traces:
        return []
    from clustersim.calibrate.trace_kernels import read_trace
    return [read_trace(p) for p in traces]


def _render(base: str, name: str, cluster: ClusterSpec, scale: float, fabric: Any, kernel_fit: Any,
            evidence: dict[str, Any] | None, runs: list[Run], nccl_sources: list[str], traces: list[Path],
            describe: Any) -> str:
    srcs = [r.source for r in runs] + nccl_sources + [p.name for p in traces]
    src = ", ".join(dict.fromkeys(srcs))
    gpu_raw = describe("gpus", cluster.gpu.name)
    over: list[tuple[str, object, str]] = []
    if kernel_fit is not None:
        for key, value in kernel_fit.gpu_constants.items():
            over.append((key, value, f"fitted to the kernels of {', '.join(p.name for p in traces)}"))
    if runs:
        over.append(("compute_scale", scale, f"fitted to the step times of {len(runs)} training run(s): "
                                             f"{', '.join(r.source for r in runs)}"))
    # the compute model recognises the GPU generation by its profile name (compute/arch.py
    # arch_for, nccl_tuning.gpu_arch): keep the base name in front
    gpu_name = f"{cluster.gpu.name}-{name}"
    sections: dict[str, dict[str, tuple[str, Any]]] = {
        "gpus": {gpu_name: (f"{cluster.gpu.name} calibrated against {src}", entry_from_raw(gpu_raw, over,
                                                                                          f"as {cluster.gpu.name}"))}}
    cl_over: list[tuple[str, object, str]] = [("gpu", gpu_name, "calibrated above")]
    fabrics: dict[str, tuple[str, Any]] = {}
    if fabric is not None:
        for tier in sorted({k.split(".")[0] for k in fabric.knobs}):
            f = getattr(cluster, tier)
            fname = f"{name}-{tier.replace('_', '-')}"
            raw = describe("fabrics", describe("clusters", base)[tier])
            fo: list[tuple[str, object, str]] = []
            for knob, value in fabric.knobs.items():
                t, k = knob.split(".")
                if t != tier:
                    continue
                if k == "bw":
                    fo += [("bw_GBps", value / units.GB, f"fitted to {src}: achieved rate per direction"),
                           ("efficiency", 1.0, "the rate above is the achieved one")]
                elif k == "latency":
                    fo.append(("latency_us", value / units.US, f"fitted to {src}"))
                elif k == "nvls_bw":
                    fo.append(("nvls_bw_GBps", value / units.GB, f"fitted to {src}"))
                else:
                    fo.append(("nvls_latency_us", value / units.US, f"fitted to {src}"))
            raw.pop("bw_Gbps", None)
            fabrics[fname] = (f"{base}'s {tier} fabric fitted to {src}", entry_from_raw(raw, fo, f"as {f.name}"))
            cl_over.append((tier, fname, "calibrated above"))
    if fabrics:
        sections["fabrics"] = fabrics
    if evidence is not None:
        cl_over.append(("calibration", evidence, "leave-one-out step-time errors (predicted / measured - 1) of the "
                                                 "runs; the prediction interval uses them"))
    sections["clusters"] = {name: (f"{base} calibrated against {src}",
                                   entry_from_raw(describe("clusters", base), cl_over, f"as {base}"))}
    header = (f"Calibrated by `clustersim calibrate` from {src}.\nBase cluster preset: {base}. "
              f"Use: --profile THIS_FILE with cluster.preset {name}.")
    return render_entries(header, sections)
