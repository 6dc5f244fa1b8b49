"""The validation loop: measure for real, fit, write the calibrated profile, predict every
case through the normal simulator with it, and compare.

Run modes: ``loopback`` (all ranks on 127.0.0.1, CPU-bound and noisy on a small machine) and
``netns`` (each rank in its own network namespace behind a rate-limited veth port, so that
the network dominates as between real nodes). Backend ``nccl`` runs the ranks on local GPUs.
"""

from __future__ import annotations

import datetime
import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.calibrate import fit_points, predict
from clustersim.calibrate.compare import CaseResult, save_plot, summary
from clustersim.calibrate.fit import AlphaBeta, DesignRow, fit_alpha_beta, fit_rate, textbook_terms
from clustersim.calibrate.launch import RankLaunch, config_id, loopback_launch, run_cases
from clustersim.calibrate.plan import build_plan, record_items
from clustersim.calibrate.profile import (
    CalibratedCluster,
    CalibratedGpu,
    fabric_from_fit,
    profile_in_env,
    render_profile,
    write_profile,
)
from clustersim.calibrate.store import RECORDS_FILE, read_records
from clustersim.errors import InputError

PLAN_VERSION = 2  # bump when the benchmarks change what a case measures


@dataclass(frozen=True, slots=True)
class ValidateOptions:
    backend: str = "gloo"
    nprocs: int = 4
    netns: bool = False
    level: str = "quick"
    out_dir: Path = Path("validation/measurements")
    rate_mbit: float = 1000.0
    delay_us: float = 0.0
    fresh: bool = False

    @property
    def mode(self) -> str:
        return "netns" if self.netns else "loopback"


@dataclass
class ValidationResult:
    cases: list[CaseResult]
    profile_path: Path
    plot_path: Path
    fits: dict[str, Any]
    holdout: dict[str, Any]
    fit: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)   # what was measured (for --loo)
    link: dict[str, Any] = field(default_factory=dict)
    fit_check: fit_points.FitCheck | None = None                   # the profile against its own fit points

    @property
    def fit_points(self) -> dict[str, Any]:
        """Median |error| over the cases the constants were fitted to (fit_points.select)."""
        used = self.fits.get("fit_points", {})
        return summary([c for c in self.cases if c.name in used], "fit")

    def to_json(self) -> dict[str, Any]:
        out = {"cases": [c.to_json() for c in self.cases], "profile": str(self.profile_path),
               "plot": str(self.plot_path),
               "summary": {"holdout": self.holdout, "fit": self.fit, "fit_points": self.fit_points},
               "fits": self.fits, "notes": self.notes}
        if self.fit_check is not None:
            out["fit_check"] = self.fit_check.to_json()
        return out


def check_options(opts: ValidateOptions) -> None:
    if opts.backend not in ("gloo", "nccl"):
        raise InputError("--backend", opts.backend, ("gloo", "nccl"))
    if opts.nprocs < 2 or opts.nprocs > 64:
        raise InputError("--nprocs", opts.nprocs, "2..64 ranks")
    if opts.netns and opts.backend == "nccl":
        raise InputError("--netns", True, "gloo only (NCCL ranks talk through GPUs, not namespaces)")
    if not (math.isfinite(opts.rate_mbit) and 0 < opts.rate_mbit <= 1e6):
        raise InputError("--rate-mbit", opts.rate_mbit, "a rate in Mbit/s, 0 < rate <= 1e6 (1 Tbit/s)")
    if not (math.isfinite(opts.delay_us) and 0 <= opts.delay_us <= 1e7):
        raise InputError("--delay-us", opts.delay_us, "a one-way delay in microseconds, 0..1e7 (10 s)")
    if opts.backend == "nccl":  # before --out is created: bad input writes nothing
        import torch
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus == 0:
            raise InputError("--backend", "nccl", "gloo on this machine: it has no CUDA GPU (torch "
                             f"{torch.__version__}, torch.cuda.is_available() is False); run --backend nccl on a "
                             "machine with GPUs")
        if gpus < opts.nprocs:
            raise InputError("--nprocs", opts.nprocs, f"at most the {gpus} GPUs of this machine with --backend nccl")
    try:  # fail before any rank starts, not when the first record is written
        opts.out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("--out", str(opts.out_dir), f"a directory that exists or can be created "
                                                     f"({exc.strerror or exc})") from None
    if not opts.fresh:  # the records it resumes from: a binary or oversized file is refused now, not after torch
        read_records(opts.out_dir / RECORDS_FILE)


def _config(opts: ValidateOptions) -> dict[str, Any]:
    cfg: dict[str, Any] = {"backend": opts.backend, "mode": opts.mode, "nprocs": opts.nprocs,
                           "level": opts.level, "plan_version": PLAN_VERSION}
    if opts.netns:
        cfg.update(rate_mbit=opts.rate_mbit, delay_us=opts.delay_us)
    return cfg


def _set_aside(records: Path) -> None:
    """--fresh: keep old records (nothing measured is lost) but start a new file."""
    if records.exists():
        n = 1
        while records.with_name(f"records.{n}.jsonl").exists():
            n += 1
        shutil.move(records, records.with_name(f"records.{n}.jsonl"))


def measure(opts: ValidateOptions, progress: Callable[[int, int, str], None] | None = None,
            ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run (or resume) the measurements; returns this configuration's records and link info."""
    check_options(opts)
    cases = build_plan(opts.level, opts.nprocs)
    cfg = _config(opts)
    cfg_id = config_id(cfg)
    if opts.fresh:
        _set_aside(opts.out_dir / RECORDS_FILE)
    extra: dict[str, Any] = {"mode": opts.mode, "pin_cores": False,
                             "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")}
    if not opts.netns:
        from clustersim.calibrate.launch import free_port
        from clustersim.calibrate.netns import tcp_one_way_s
        ping_s = tcp_one_way_s([], [], "127.0.0.1", free_port("127.0.0.1"))
        extra["link"] = {"kind": "loopback" if opts.backend == "gloo" else "local-gpus",
                         "ping_one_way_us": round(ping_s * 1e6, 2)}
        records = run_cases(cases, loopback_launch(opts.nprocs, opts.backend), opts.out_dir, opts.level, cfg_id,
                            extra, progress)
        return records, recorded_link(records, extra["link"])
    from clustersim.calibrate.netns import (
        NetnsTopology,
        NetnsUnavailable,
        check_available,
        measure_ping_one_way_s,
    )
    try:
        check_available()
    except NetnsUnavailable as exc:
        raise InputError("--netns", True, str(exc)) from None
    with NetnsTopology(opts.nprocs, opts.rate_mbit, opts.delay_us) as topo:
        link = {**topo.describe(), "ping_one_way_us": round(measure_ping_one_way_s(topo) * 1e6, 2)}
        n = opts.nprocs
        launch = RankLaunch(nprocs=n, backend=opts.backend, master_addr=topo.addr(0),
                            rank_addrs=tuple(topo.addr(r) for r in range(n)),
                            ifnames=tuple(topo.ifname(r) for r in range(n)),
                            prefixes=tuple(tuple(topo.exec_prefix(r)) for r in range(n)),
                            netns=tuple(topo.ns(r) for r in range(n)))
        extra["link"] = link
        records = run_cases(cases, launch, opts.out_dir, opts.level, cfg_id, extra, progress)
        return records, recorded_link(records, link)


def recorded_link(records: list[dict[str, Any]], measured: dict[str, Any]) -> dict[str, Any]:
    """The link the records were measured on (their ``env.link``, the first record's where resumed
    records span sessions), else this call's ``measured``: a resumed run that measures nothing fits
    and reports exactly what the first did (the ping taken again each call moved the profile's
    latency and every prediction in the last digits, and stood beside records that said another)."""
    for r in records:
        link = (r.get("env") or {}).get("link")
        if isinstance(link, dict) and "ping_one_way_us" in link:
            return link
    return measured


# -- fitting ------------------------------------------------------------------------------

def _host_memory_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 16 * units.GiB


def _names(opts: ValidateOptions) -> tuple[str, str, str]:
    tag = opts.mode if opts.backend == "gloo" else "gpus"
    device = "cpu" if opts.backend == "gloo" else "gpu"
    return f"calibrated-{device}-{tag}", f"calibrated-{tag}", f"calibrated-{tag}"


def _fit_cases(records: list[dict[str, Any]], opts: ValidateOptions, gpu_spec: Any,
               used: dict[str, str]) -> list[predict.FitCase]:
    """The collective cases that set the fabric's bandwidth (clustersim.calibrate.fit_points)."""
    cases = []
    for r in records:
        if used.get(r["name"]) != "fabric":
            continue
        p = r["params"]

        def cluster_with(fabric: Any, world: int = p["world"]) -> Any:
            return predict.mode_cluster("probe", gpu_spec, fabric, opts.mode, world)
        cases.append(predict.FitCase(p["op"], p["size_bytes"], r["measured_s"], cluster_with,
                                     predict.group_shape(opts.mode, p["world"])))
    return cases


def _textbook_fits(records: list[dict[str, Any]]) -> dict[str, AlphaBeta]:
    """alpha-beta per collective with the algorithm gloo runs (fit.textbook_terms), fit cases only."""
    rows: dict[str, list[DesignRow]] = {}
    for r in records:
        if r["kind"] == "collective" and r["role"] == "fit":
            p = r["params"]
            a, b = textbook_terms(p["op"], p["world"], p["size_bytes"])
            rows.setdefault(p["op"], []).append(DesignRow(a, b, r["measured_s"]))
    return {op: fit_alpha_beta(op_rows) for op, op_rows in sorted(rows.items()) if len(op_rows) >= 2}


def _ab_json(ab: AlphaBeta) -> dict[str, Any]:
    return {"alpha_us": round(ab.alpha_s * 1e6, 3), "bw_GBps": round(ab.bw_bytes_per_s / units.GB, 6),
            "points": ab.points, "fit_median_abs_err_pct": round(ab.median_abs_err_pct, 3)}


def calibrate(records: list[dict[str, Any]], opts: ValidateOptions, link: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """Fit the constants and write the calibrated profile; returns its path and the fits."""
    from clustersim.hardware.spec import FabricSpec, GpuSpec
    by_name = {r["name"]: r for r in records}
    gemms = [r for r in records if r["kind"] == "compute" and r["params"]["bench"] == "gemm" and r["role"] == "fit"]
    copies = [r for r in records if r["kind"] == "compute" and r["params"]["bench"] == "memcpy"]
    if not gemms or not copies:
        raise RuntimeError("the fit set lacks GEMM or memory-copy measurements")
    peak = fit_rate([r["flops"] for r in gemms], [r["measured_s"] for r in gemms])
    mem_bw = copies[0]["bytes_moved"] / copies[0]["measured_s"]
    gpu_name, fabric_name, cluster_name = _names(opts)
    capacity = _host_memory_bytes() // opts.nprocs
    gpu_spec = GpuSpec(name=gpu_name, peak_flops_per_s=(("fp32", peak),), hbm_capacity_bytes=capacity,
                       hbm_bw_bytes_per_s=mem_bw, gemm_efficiency=1.0)
    env = next(iter(by_name.values()))["env"]
    date = env.get("date", "")
    when = f"`clustersim validate{' --netns' if opts.netns else ''} --{opts.level} --nprocs {opts.nprocs}`"
    src = f"measured {date} by {when}, torch {env.get('torch')} {opts.backend}"
    nominal = opts.rate_mbit * 1e6 / 8 if opts.netns else None  # tc tbf rate, bits -> bytes
    ping_s = float(link.get("ping_one_way_us", 50.0)) * 1e-6
    start = FabricSpec(name=fabric_name, kind="ethernet" if opts.backend == "gloo" else "nvlink",
                       bw_bytes_per_s=nominal or 1e9, latency_s=ping_s)
    gloo_fits = _textbook_fits(records)
    selection = fit_points.select(records, opts.mode, link)
    fit_cases = _fit_cases(records, opts, gpu_spec, selection.used)
    if not fit_cases:
        raise RuntimeError("the fit set lacks collective measurements")
    # the link cannot average more than its shaped rate (netns); the latency is the measured ping
    fitted, joint = predict.fit_bandwidth(fit_cases, start, nominal)
    fabric = fabric_from_fit(fabric_name, start.kind, nominal, fitted.bw_bytes_per_s, ping_s,
                             f"{src}; link {link.get('kind')}"
                             + (f" tbf {opts.rate_mbit:g} Mbit/s" if opts.netns else "")
                             + f", TCP ping one-way {link.get('ping_one_way_us')} us",
                             "measured TCP ping, one way (gloo's per-step software cost is not the link's; "
                             "docs/validation.md)")
    cpu = env.get("ranks", [{}])[0].get("device", "")
    g = CalibratedGpu(gpu_name, peak, mem_bw, capacity, f"{cpu}, one core and one thread per rank; {src}")
    netns = opts.netns
    cluster = CalibratedCluster(cluster_name, gpu_name, 1 if netns else opts.nprocs, opts.nprocs if netns else 1,
                                fabric_name, fabric_name, 1,
                                "each rank its own host (one namespace each)" if netns else "all ranks in one node")
    header = (f"Calibrated hardware profile written by clustersim validate ({opts.mode}, {opts.backend}).\n"
              f"Use: clustersim run --profile THIS_FILE with cluster.preset {cluster_name}, or\n"
              f"CLUSTERSIM_PROFILES=THIS_FILE clustersim collective all_reduce --cluster {cluster_name} ...\n"
              "Every number was measured in the run named beside it; see docs/validation.md.")
    path = write_profile(opts.out_dir / f"{cluster_name}.yaml", render_profile([g], [fabric], [cluster], header))
    fits = {"gemm_TFLOPS": round(peak / units.TFLOPS, 6), "mem_bw_GBps": round(mem_bw / units.GB, 3),
            "collectives": {"simulator": _ab_json(joint),
                            "gloo_alpha_beta": {op: _ab_json(ab) for op, ab in gloo_fits.items()}},
            "fit_points": selection.used, "not_fitted": selection.skipped,
            "fabric": {"bw_GBps": fabric.bw_bytes_per_s / units.GB, "efficiency": round(fabric.efficiency, 6),
                       "latency_us": round(fabric.latency_s * 1e6, 3)},
            "link": link}
    return path, fits


# -- prediction ---------------------------------------------------------------------------

def predict_records(records: list[dict[str, Any]], opts: ValidateOptions, profile: Path,
                    ) -> tuple[list[CaseResult], list[str]]:
    """Predict every measured case with the calibrated profile loaded like any preset."""
    with profile_in_env(profile):
        return _predict_all(records, opts)


def _predict_all(records: list[dict[str, Any]], opts: ValidateOptions) -> tuple[list[CaseResult], list[str]]:
    from clustersim.hardware.load import load_cluster
    _, _, preset = _names(opts)
    results, notes = [], []
    for r in records:
        p = r["params"]
        try:
            if r["kind"] == "collective":
                world = p["world"]
                cluster = (load_cluster(preset, world) if opts.netns
                           else load_cluster(preset, 1, gpus_per_node=world))
                t = predict.collective_time_s(p["op"], p["size_bytes"], cluster, predict.group_shape(opts.mode, world))
            elif r["kind"] == "compute":
                gpu = load_cluster(preset).gpu
                t = (predict.gemm_time_s(r["flops"], gpu) if p["bench"] == "gemm"
                     else predict.memcpy_time_s(r["bytes_moved"], gpu))
            else:
                t = predict.predict_step_s(r["kind"], p, preset, opts.mode, r.get("probe_local_step_s"))
        except Exception as exc:  # a case the simulator cannot predict is reported, not fatal
            notes.append(f"{r['name']}: no prediction ({type(exc).__name__}: {exc})")
            continue
        results.append(CaseResult(r["name"], "compute" if r["kind"] == "compute" else r["kind"], r["role"],
                                  float(t), float(r["measured_s"])))
    return results, notes


def validate(opts: ValidateOptions, progress: Callable[[int, int, str], None] | None = None) -> ValidationResult:
    records, link = measure(opts, progress)
    return evaluate(records, opts, link)


def evaluate(records: list[dict[str, Any]], opts: ValidateOptions, link: dict[str, Any]) -> ValidationResult:
    """Fit, write the profile, predict every measured case with it, check it against its own fit
    points (fit_points.check) and compare; ``records`` as `measure` returns them."""
    order = {c["name"]: i for i, c in enumerate(record_items(build_plan(opts.level, opts.nprocs)))}
    records = sorted((r for r in records if r["name"] in order), key=lambda r: order[r["name"]])
    # the last record of each case wins (a case measured twice after a resume)
    latest = {r["name"]: r for r in records}
    records = [latest[n] for n in sorted(latest, key=order.__getitem__)]
    profile, fits = calibrate(records, opts, link)
    results, notes = predict_records(records, opts, profile)
    with profile_in_env(profile):   # the machine's compute rate beside each step (validation/bench_steps.py)
        scales = {r["name"]: predict.probe_scale(r["params"], _names(opts)[2], opts.mode, r["probe_local_step_s"])
                  for r in records if r.get("probe_local_step_s")}
        fits["step_probe_compute_scale"] = {n: round(k, 4) for n, k in scales.items() if k is not None}
        for r in records:
            if r.get("probe_local_step_s") and scales.get(r["name"]) is None:
                floor_s = predict.local_floor_s(r["params"], _names(opts)[2], opts.mode)
                notes.append(f"{r['name']}: its local probe ({r['probe_local_step_s']:.4g} s) is below the "
                             f"simulator's non-compute floor of that step ({floor_s:.4g} s, the host's share at any "
                             "compute rate): no compute_scale reproduces it, and the step is predicted at the "
                             "profile's own rate")
    if fits["step_probe_compute_scale"]:   # what the written profile alone does not carry
        scales = sorted(fits["step_probe_compute_scale"].values())
        notes.append(f"the step cases are predicted at the compute rate their local probe measured beside each step "
                     f"(compute_scale {scales[0]:g}-{scales[-1]:g}; docs/validation.md, \"Steps and the machine's load\"): "
                     "`clustersim run --profile` of the written profile has no probe and predicts these steps at "
                     "the profile's own GEMM rate, so its errors on them can be larger than the table's")
    title = (f"clustersim validate: {opts.mode}, {opts.backend}, {opts.nprocs} ranks, {opts.level}"
             + (f", {opts.rate_mbit:g} Mbit/s" if opts.netns else ""))
    plot = save_plot(results, opts.out_dir / f"validation-{opts.mode}.png", title)
    env = records[0]["env"] if records else {}
    return ValidationResult(results, profile, plot, fits, summary(results, "holdout"), summary(results, "fit"),
                            notes, env, records, link, fit_points.check(results, fits["fit_points"]))


def default_out_dir(netns: bool, backend: str) -> Path:
    root = Path(os.environ.get("CLUSTERSIM_VALIDATION_DIR", "validation/measurements"))
    return root / ("netns" if netns else ("loopback" if backend == "gloo" else "gpus"))
