"""`clustersim calibrate --log ... --run ... --runs ... [--trace ...] [--nccl-tests ...]`: one
machine profile from any mix of training runs (clustersim.calibrate.runs), profiler traces and
nccl-tests logs of the same cluster, with the leave-one-out error of every run.

Order of the fit (each stage keeps what the previous one fitted):

1. fabrics: the nccl-tests rows and the NCCL kernels of the traces (clustersim.calibrate.
   fabric_fit: bandwidths and latencies through ``plan_collective``);
2. kernels: the traces' GEMM, attention and memory-bound kernels give ``gemm_scale``,
   ``attention_scale`` and ``hbm_efficiency`` of the GPU (clustersim.calibrate.trace_fit);
3. steps: one factor ``compute_scale`` (every compute kernel's time divided by it) so that the
   simulated step times of the runs' scenarios match the measured ones (Huber's robust loss on
   the log error, ``HUBER_DELTA``). A log's step says one number, so one constant is fitted from them: the machine's
   sustained compute rate relative to the model (power limits, clocks, framework overheads).

Leave-one-out (two runs or more): every run is predicted by the fit of stage 3 without that run.
The errors (predicted / measured - 1) go into the profile as the cluster's ``calibration:``
evidence (clustersim.hardware.evidence) with what calibration changed (each fitted factor with
what it was fitted to, every run before and after) and the regimes the runs cover; the
prediction interval reads it (clustersim.uncertainty.calibrated). From one run there is no
leave-one-out error (a fit without it is no fit): none is stored, and the report says so. The simulator (event engine, as `clustersim run`) is
evaluated at ``SCALE_GRID`` once per run; the fit interpolates between those points (step
time is smooth and monotone in the scale), and every reported prediction is simulated again
at its fitted scale.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.calibrate.profile import entry_from_raw, profile_in_env, render_entries, write_profile
from clustersim.calibrate.runs import SCALE_GRID, Run
from clustersim.errors import InputError
from clustersim.hardware.spec import (
    CalibratedFactor,
    CalibratedRun,
    CalibrationEvidence,
    ClusterSpec,
    at_range_edge,
)

__all__ = ["SCALE_GRID", "MachineCalibration", "Run", "calibrate_machine", "fit_scale", "simulate_s"]

# Huber's loss (Huber 1964, Ann. Math. Statist. 35(1)) on r = ln(predicted / measured): quadratic
# within +-HUBER_DELTA, linear beyond. 0.05 is about the scatter of the model's errors over the
# published runs of one regime (docs/uncertainty.md: s_pool 5-7%): a run off by more than that is
# one the model misdescribes for reasons of its own (its layout, not the machine), and must not
# drag the machine's constant after it (on the Megatron H100 table, calibrating on the even rows,
# the 1.7B row's -20% moved compute_scale to 0.913 with squares; benchmarks/calibrate_on_half.py).
HUBER_DELTA = 0.05


def _huber(r: float) -> float:
    a = abs(r)
    return 0.5 * r * r if a <= HUBER_DELTA else HUBER_DELTA * (a - 0.5 * HUBER_DELTA)


def fit_scale(runs: list[Run]) -> float:
    """compute_scale minimising sum huber(ln(predicted / measured)) over the runs (1.0 with none)."""
    if not runs:
        return 1.0

    def err(log_k: float) -> float:
        k = math.exp(log_k)
        return sum(_huber(math.log(r.predicted_s(k) / r.measured_s)) for r in runs)
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
    loo: list[tuple[float, float]]            # (fold scale, predicted step) per run; empty with one run
    before_s: list[float]                     # predicted with stages 1-2 only (scale 1)
    written_s: list[float]                    # predicted by the profile as written
    evidence: CalibrationEvidence | None = None
    gpu_fit: dict[str, Any] = field(default_factory=dict)
    nccl: Any = None
    trace_notes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # every fitted factor, also where no run was given (traces or nccl-tests only: no evidence then)
    factors: tuple[CalibratedFactor, ...] = ()

    def loo_errors(self) -> list[float]:
        return [p / r.measured_s - 1 for (_, p), r in zip(self.loo, self.runs, strict=False)]

    def to_json(self) -> dict[str, Any]:
        from clustersim.hardware.evidence import evidence_to_json
        loo = self.loo_errors()
        rows = []
        for i, r in enumerate(self.runs):
            row = {"source": r.source, "kind": r.kind, "measured_step_time_s": r.measured_s,
                   "predicted_before_s": self.before_s[i], "error_before_pct": _pct(self.before_s[i], r),
                   "predicted_calibrated_s": self.written_s[i], "error_calibrated_pct": _pct(self.written_s[i], r),
                   "scenario": r.scenario}
            if loo:
                row.update(loo_scale=self.loo[i][0], predicted_loo_s=self.loo[i][1],
                           loo_error_pct=round(loo[i] * 100, 3))
            rows.append(row)
        out: dict[str, Any] = {"base_cluster": self.base_cluster, "cluster": self.name, "profile": str(self.profile_path),
                               "compute_scale": round(self.scale, 6), "gpu": self.gpu_fit, "runs": rows,
                               "notes": self.notes + self.trace_notes}
        if self.evidence is not None:
            ev = evidence_to_json(self.evidence)
            out.update(factors=ev["factors"], cover=ev["cover"], calibration=ev)
        elif self.factors:   # fitted to kernels or collectives only: the factors without run evidence
            out["factors"] = evidence_to_json(CalibrationEvidence(runs=0, loo_rel_errors=(),
                                                                  factors=self.factors))["factors"]
        if loo:
            out["leave_one_out"] = {"runs": len(loo), "median_abs_error_pct": round(statistics.median(
                abs(e) for e in loo) * 100, 3), "max_abs_error_pct": round(max(abs(e) for e in loo) * 100, 3)}
        elif self.runs:
            out["leave_one_out"] = {"runs": 0, "note": ONE_RUN_NOTE}
        if self.nccl is not None:
            out["nccl_tests"] = {"knobs": self.nccl.to_json()["knobs"], "summary": self.nccl.summary()}
        return out

    def print_report(self) -> None:
        from clustersim.calibrate.machine_report import print_report
        print_report(self)


ONE_RUN_NOTE = ("one run: there is no leave-one-out error (a fit without the run is no fit); later predictions on "
                "this cluster take the spread of their regime's published runs (the pooled spread of all "
                "published runs where the regime has none), centred on the calibrated "
                "prediction and widened x sqrt(2) (docs/uncertainty.md). Calibrate on two runs or more for "
                "intervals from this machine's own errors")


def _pct(pred: float, r: Run) -> float:
    return round((pred / r.measured_s - 1) * 100, 3)


def _cover(runs: list[Run]) -> tuple[tuple[str, ...], int, int, tuple[str, ...], tuple[str, ...]]:
    """(cover keys, min GPUs, max GPUs, frameworks, pipeline schedules of the runs with pp > 1) of the
    runs (clustersim.uncertainty.regimes)."""
    from clustersim.scenario import scenario_from_dict
    from clustersim.uncertainty.regimes import cover_key, features
    feats = [features(scenario_from_dict(r.scenario)) for r in runs]
    if not feats:
        return (), 0, 0, (), ()
    return (tuple(sorted({cover_key(f) for f in feats})), min(f.gpus for f in feats), max(f.gpus for f in feats),
            tuple(sorted({f.framework for f in feats})), tuple(sorted({f.schedule for f in feats if f.schedule})))


def calibrate_machine(*, nccl_logs: list[Path], logs: list[Path], configs: list[Path], traces: list[Path],
                      base: str | None, nodes: int | None, overrides: list[str], name: str, out: Path,
                      op: str | None, min_size_bytes: int, run_specs: list[str] | None = None,
                      runs_csv: list[Path] | None = None) -> MachineCalibration:
    from clustersim.calibrate import fabric_fit
    from clustersim.calibrate.devices import check_devices
    from clustersim.calibrate.import_nccl import infer_base_cluster, observations, read_runs
    from clustersim.calibrate.runs import distinct_sources, runs_from_csv, runs_from_logs, runs_from_specs
    from clustersim.hardware.load import describe, list_clusters, load_cluster
    from clustersim.inputs import read_text
    from clustersim.output_file import check_output_path
    if base is not None and base not in list_clusters():   # before a run is read on it
        raise InputError("--cluster", base, list_clusters())
    runs = runs_from_logs(logs, configs, base, nodes, overrides)
    runs += runs_from_specs(list(run_specs or []), overrides, base)
    for path in runs_csv or []:
        runs += runs_from_csv(path, overrides, base)
    runs = distinct_sources(runs)
    check_output_path(out, "--out", inputs=[p for r in runs for p in r.files])   # a --runs CSV's scenarios too
    _check_distinct_runs(runs)
    read_notes = [n for r in runs for n in r.notes]   # before reruns merge into one run
    runs, notes = _merge_repeats(runs)
    notes = read_notes + notes
    presets = sorted({r.scenario["cluster"]["preset"] for r in runs})   # --cluster replaced them (runs.on_cluster)
    if len(presets) > 1:
        raise InputError("--cluster", presets, "one cluster preset for all runs (one machine is fitted)")
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
    _check_preset_hardware(runs, base, describe("clusters", base))
    cluster = load_cluster(base, max([1] + [r.nodes for r in nccl_runs]))
    check_devices(cluster, [(src, r.device) for src, r in zip(nccl_sources, nccl_runs, strict=True)]
                   + [(t.source, t.device_name) for t in trace_data], "--nccl-tests" if nccl_runs else "--trace")
    check_devices(cluster, [(r.source, r.device) for r in runs if r.device], "--log")   # a log's own GPU line
    base_cluster = cluster
    factors: list[CalibratedFactor] = []
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
        if not (kernel_fit.gpu_constants or kernel_fit.comm_observations or runs or nccl_runs):
            # a profile identical to its preset would read as a calibration
            raise InputError("--trace", " ".join(p.name for p in traces),
                             "a trace with kernels that fit a constant (GEMMs, attention or memory-bound kernels with "
                             "shapes or sizes: record_shapes=True; NCCL kernels with sizes): nothing was fitted ("
                             + "; ".join(kernel_fit.notes or ["no kernel of a fitted kind"]) + ")")
    fabric = fabric_fit.fit_fabrics(cluster, obs) if obs else None
    if fabric is not None:
        cluster = replace(fabric.cluster, num_nodes=cluster.num_nodes)
        sources = tuple(nccl_sources) + (tuple(p.name for p in traces) if kernel_fit and kernel_fit.comm_observations
                                         else ())
        factors += [CalibratedFactor(k, v, fabric.start.get(k, v), sources) for k, v in fabric.knobs.items()]
    # 2. kernels
    if kernel_fit is not None:
        cluster = replace(cluster, gpu=replace(cluster.gpu, **kernel_fit.gpu_constants))
        gpu_fit.update({k: round(v, 6) for k, v in kernel_fit.gpu_constants.items()})
        factors += [CalibratedFactor(k, v, float(getattr(base_cluster.gpu, k)), tuple(p.name for p in traces))
                    for k, v in kernel_fit.gpu_constants.items()]
    # 3. steps
    for r in runs:
        _check_below_peak(r, cluster)
    for r in runs:
        r.grid_s = tuple(simulate_s(r.scenario, cluster, k) for k in SCALE_GRID)
    scale = fit_scale(runs)
    if runs:
        factors.append(CalibratedFactor("compute_scale", scale, cluster.gpu.compute_scale,
                                        tuple(r.source for r in runs)))
    if runs and at_range_edge(scale):
        notes.append(f"compute_scale {scale:.3f} sits at the edge of {SCALE_GRID[0]}..{SCALE_GRID[-1]}: the runs are "
                     "far from the model; check the imported scenarios (clustersim import ... --json)")
    loo = []
    if len(runs) >= 2:
        for i, r in enumerate(runs):
            k = fit_scale(runs[:i] + runs[i + 1:])
            loo.append((round(k, 6), simulate_s(r.scenario, cluster, k)))
    elif runs:
        notes.append(ONE_RUN_NOTE)
    before = [r.grid_s[SCALE_GRID.index(1.0)] for r in runs]
    after = [simulate_s(r.scenario, cluster, scale) for r in runs]
    loo_errors = tuple(round(p / r.measured_s - 1, 6) for (_, p), r in zip(loo, runs, strict=False))
    after_errors = [a / r.measured_s - 1 for a, r in zip(after, runs, strict=True)]
    if not all(-1 < e < 100 for e in loo_errors) or not all(-0.9 < e < 9 for e in after_errors):
        raise InputError(", ".join(sorted({r.option for r in runs})), " ".join(r.source for r in runs),
                         "training runs the model can explain: calibrated predictions are off by more than 10x "
                         f"(relative errors {[round(e, 3) for e in after_errors]}, leave-one-out {list(loo_errors)}); "
                         "check the step times and the imported scenarios (clustersim import ... --json)")
    evidence = None
    if runs:
        dates = sorted({d for r in runs for d in r.dates})
        cover, lo_gpus, hi_gpus, frameworks, schedules = _cover(runs)
        evidence = CalibrationEvidence(
            runs=len(runs), loo_rel_errors=loo_errors, source=_source(runs, nccl_sources, traces),
            date=dates[-1] if dates else "unknown", cover=cover, min_gpus=lo_gpus, max_gpus=hi_gpus,
            frameworks=frameworks, schedules=schedules, factors=tuple(factors),
            per_run=tuple(CalibratedRun(r.source, r.measured_s, b, a) for r, b, a in zip(runs, before, after,
                                                                                            strict=True)))
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
    return MachineCalibration(base, name, path, runs, scale, loo, before, written, evidence, gpu_fit, nccl,
                              trace_notes, notes, tuple(factors))


def _check_below_peak(run: Run, cluster: ClusterSpec) -> None:
    """Refuse a measured step shorter than the model's FLOPs take at the GPUs' dense peak (MFU over
    100%): no machine runs it, so the step time or the imported scenario is wrong, and a fit to it
    would write a GPU faster than its peak."""
    from clustersim.report import step_at_peak_s
    sc = _scenario_on(run.scenario, cluster)
    floor_s = step_at_peak_s(sc)
    if run.measured_s < floor_s:
        raise InputError(run.option, f"{run.source}: {run.measured_s:.6g} s",
                         f"a step the GPUs can run: the model's FLOPs take {floor_s:.4g} s at the dense "
                         f"{sc.training.dtype} peak of {sc.cluster.num_gpus} {sc.cluster.gpu.name} (MFU 100%; this "
                         f"step is MFU {floor_s / run.measured_s:.0%}); check the step time and the imported scenario "
                         "(clustersim import ... --json: GPU count, global batch, sequence length)")


def _check_preset_hardware(runs: list[Run], base: str, preset: dict[str, Any]) -> None:
    """Refuse a run whose cluster differs from the base preset's hardware (``--set cluster.KEY``,
    a ``cluster:`` field of a --run scenario): the fit simulates every run on the preset's hardware
    (its nodes and GPUs per node aside) and writes a profile of that machine, so such a run was
    fitted as if on the preset (an Ethernet run fitted as InfiniBand; an H200 run as an H100) and
    the profile written predicted it 15x off. GPUs per node may differ (a run on part of a node)."""
    from clustersim.hardware.load import CLUSTER_OVERRIDE_KEYS
    for r in runs:
        for key in CLUSTER_OVERRIDE_KEYS:
            value = r.scenario["cluster"].get(key)
            if key == "gpus_per_node" or value is None or value == preset.get(key):
                continue
            raise InputError(f"cluster.{key}", f"{r.source}: {value}",
                             f"{base}'s {key} ({preset.get(key, 'not set')}), or no cluster.{key}: calibrate fits "
                             f"one preset's hardware, and this run ({r.option}) ran on other hardware; describe its "
                             "machine as a cluster preset of its own (a profile file in CLUSTERSIM_PROFILES, "
                             "docs/hardware.md) and name it with --cluster")


def _job(r: Run) -> str:
    """The job a run measured: its scenario, its name aside."""
    return json.dumps({k: v for k, v in r.scenario.items() if k != "name"}, sort_keys=True, default=str)


def _merge_repeats(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """Measurements of one job (reruns: the same scenario at other step times) as one run at their
    median step time, and a note for each: they are one job's evidence, not several. Counted as
    several, leave-one-out predicted each from its reruns (errors of 0.1%) and the calibrated
    interval narrowed (10.6% wide and "validated" from three reruns of one job, 25.9% from one)."""
    by_job: dict[str, list[Run]] = {}
    for r in runs:
        by_job.setdefault(_job(r), []).append(r)
    out, notes = [], []
    for group in by_job.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        first, times = group[0], [r.measured_s for r in group]
        median = statistics.median(times)
        out.append(replace(first, source=f"{first.source} (median of {len(group)} measurements)", measured_s=median,
                           dates=sorted({d for r in group for d in r.dates}),
                           files=tuple(dict.fromkeys(p for r in group for p in r.files))))
        notes.append(f"{', '.join(r.source for r in group)}: {len(group)} measurements of one job "
                     f"({min(times):.6g}-{max(times):.6g} s) taken as one run at their median {median:.6g} s (reruns "
                     "are one job's evidence: leave-one-out leaves out the job)")
    return out, notes


def _check_distinct_runs(runs: list[Run]) -> None:
    """Refuse a run given twice (the same job, its name aside, and the same measured step time: a
    repeated --run, two equal rows of a --runs CSV, a log and its copy): it would count as
    independent evidence, predicted from itself by leave-one-out with no error, and narrow the
    calibrated interval."""
    seen: dict[str, Run] = {}
    for r in runs:
        key = json.dumps([_job(r), r.measured_s])
        if key in seen:
            raise InputError(r.option, r.source, f"each run once: the same job and measured step time "
                             f"({r.measured_s:.6g} s) as {seen[key].source}, given before (a repeated run is no new "
                             "evidence: leave-one-out would predict it from itself)")
        seen[key] = r


def _source(runs: list[Run], nccl_sources: list[str], traces: list[Path]) -> str:
    parts = []
    logs = [r.source for r in runs if r.kind != "scenario"]
    given = [r.source for r in runs if r.kind == "scenario"]
    if logs:
        parts.append("--log " + " ".join(logs))
    if given:
        parts.append("runs " + " ".join(given))
    if nccl_sources:
        parts.append("--nccl-tests " + " ".join(nccl_sources))
    if traces:
        parts.append("--trace " + " ".join(p.name for p in traces))
    return "clustersim calibrate " + "; ".join(parts)


def _read_traces(traces: list[Path]) -> list[Any]:
    if not traces:
        return []
    from clustersim.calibrate.trace_kernels import read_trace
    return [read_trace(p) for p in traces]


def _render(base: str, name: str, cluster: ClusterSpec, scale: float, fabric: Any, kernel_fit: Any,
            evidence: CalibrationEvidence | None, runs: list[Run], nccl_sources: list[str], traces: list[Path],
            describe: Any) -> str:
    srcs = [r.source for r in runs] + nccl_sources + [p.name for p in traces]
    src = ", ".join(dict.fromkeys(srcs))
    gpu_raw = describe("gpus", cluster.gpu.name)
    over: list[tuple[str, object, str]] = []
    if kernel_fit is not None:
        for key, value in kernel_fit.gpu_constants.items():
            over.append((key, value, f"fitted to the kernels of {', '.join(p.name for p in traces)}"))
    if runs:
        over.append(("compute_scale", scale, f"fitted to the step times of {len(runs)} run(s): "
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
        from clustersim.hardware.evidence import evidence_to_yaml
        cl_over.append(("calibration", evidence_to_yaml(evidence), "what calibration changed and how well it predicts "
                        "runs it did not see (docs/calibration.md); the prediction interval uses it"))
    sections["clusters"] = {name: (f"{base} calibrated against {src}",
                                   entry_from_raw(describe("clusters", base), cl_over, f"as {base}"))}
    header = (f"Calibrated by `clustersim calibrate` from {src}.\nBase cluster preset: {base}. "
              f"Use: --profile THIS_FILE with cluster.preset {name}.")
    return render_entries(header, sections)
