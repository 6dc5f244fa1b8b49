"""Predicted vs published per-GPU memory (validation/published/memory_runs.yaml).

For every published run: the scenario it states, clustersim's memory per pipeline rank (the
engine's own ``rank_memory``, activations in flight from the schedule), and the figure that
matches what the source measured - ``torch.cuda.max_memory_reserved`` (the allocator's reserved
peak: clustersim's reserved peak without the CUDA context and NCCL buffers, which live outside the
allocator) or ``max_memory_allocated`` - or what nvidia-smi showed (``device_gb``: the whole
device, clustersim's reserved peak with the CUDA context and NCCL buffers). ``residual =
published / predicted``. Runs that report only an outcome (ran / out of memory) are checked
against the verdict. Nothing is fitted here; clustersim/memory/evidence.py turns the residuals'
10th and 90th percentiles over the allocator-measured runs (``ALLOCATOR_METRICS``) into the
interval (tests/memory/test_evidence.py keeps the two in step).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from clustersim import units
from clustersim.inputs import read_yaml_file
from clustersim.memory import MemoryReport
from clustersim.parallel.pipeline import build_schedule
from clustersim.plan.memory_plan import rank_memory
from clustersim.scenario import Scenario, scenario_from_dict

RUNS_FILE = Path(__file__).resolve().parent / "published" / "memory_runs.yaml"
# the measures that torch.cuda reports exactly and that set the interval; "device" (nvidia-smi, rounded,
# a snapshot) is compared but not counted there
ALLOCATOR_METRICS = ("reserved", "allocated")
# nvidia-smi prints MiB; a published "59GB" reads 59,000 MiB
DEVICE_GB_BYTES = 1000 * units.MiB


@dataclass(frozen=True)
class Row:
    run: dict[str, Any]
    report: MemoryReport          # the rank the published figure is from
    predicted_gib: float | None   # the comparable predicted figure (GiB), None without a measurement
    published_gib: float | None
    metric: str                   # "reserved" | "allocated" | "device" | "outcome"

    @property
    def residual(self) -> float | None:
        if self.predicted_gib is None or self.published_gib is None:
            return None
        return self.published_gib / self.predicted_gib

    @property
    def explained(self) -> bool:
        """False for a run the table marks ``unexplained`` (its outcome is not predicted; the reason is
        in the run's entry)."""
        return "unexplained" not in self.run

    @property
    def outcome_ok(self) -> bool:
        """A run that ran must be predicted to fit or be tight; an out-of-memory run not to fit or be
        tight (tight: the interval straddles the capacity, the prediction does not call it)."""
        if self.run["outcome"] == "oom":
            return self.report.verdict in ("does-not-fit", "tight")
        return self.report.verdict in ("fits", "tight")


def load_runs(path: Path = RUNS_FILE) -> list[dict[str, Any]]:
    data = read_yaml_file(path, "memory_runs", "the published memory runs file")
    return list(data["runs"])


def scenario_of(run: dict[str, Any]) -> Scenario:
    data = {"name": run["id"], "framework": run["framework"], "model": run["model"], "cluster": run["cluster"],
            "parallel": run["parallel"], "training": run.get("training", {})}
    sc = scenario_from_dict(data)
    if "capacity_gib" in run:
        gpu = replace(sc.cluster.gpu, hbm_capacity_bytes=int(run["capacity_gib"] * units.GiB))
        sc = replace(sc, cluster=replace(sc.cluster, gpu=gpu))
    return sc


def stage_reports(sc: Scenario) -> tuple[MemoryReport, ...]:
    par = sc.parallel
    return rank_memory(sc, build_schedule(par.schedule, par.pp, par.num_micro_batches, par.virtual_stages))


def allocator_reserved(report: MemoryReport) -> int:
    """What torch.cuda.max_memory_reserved would show: the reserved peak without the memory that
    lives outside PyTorch's allocator."""
    return report.reserved_peak_bytes - report.cuda_context - report.nccl_buffers


def evaluate(run: dict[str, Any]) -> Row:
    reports = stage_reports(scenario_of(run))
    stage = run.get("stage")
    if stage == "last":
        report = reports[-1]
    elif stage == "first":
        report = reports[0]
    else:
        report = max(reports, key=lambda r: r.peak_bytes_per_gpu)
    measured = run.get("measured") or {}
    if "reserved_gib" in measured:
        return Row(run, report, allocator_reserved(report) / units.GiB, float(measured["reserved_gib"]), "reserved")
    if "allocated_gib" in measured:
        return Row(run, report, report.allocated_peak_bytes / units.GiB, float(measured["allocated_gib"]),
                   "allocated")
    if "device_gb" in measured:
        return Row(run, report, report.reserved_peak_bytes / units.GiB,
                   float(measured["device_gb"]) * DEVICE_GB_BYTES / units.GiB, "device")
    return Row(run, report, None, None, "outcome")


def rows() -> list[Row]:
    return [evaluate(run) for run in load_runs()]


def residual_quantiles(table: list[Row]) -> tuple[float, float]:
    """10th and 90th percentiles of published / predicted over the allocator-measured runs
    (``ALLOCATOR_METRICS``; inclusive method, 3 decimals)."""
    res = sorted(r.residual for r in table if r.residual is not None and r.metric in ALLOCATOR_METRICS)
    if len(res) < 2:
        raise ValueError("need at least two runs with a measured peak")
    deciles = statistics.quantiles(res, n=10, method="inclusive")
    return round(deciles[0], 3), round(deciles[-1], 3)
