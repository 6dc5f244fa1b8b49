"""GoodputReport: a whole run of a scenario with failures, checkpoints and restarts.

The headline figures (``goodput``, ``interruptions``, ``lost_gpu_hours``) are the exact
long-run expectation (clustersim.goodput.expectation) applied to the window; the seeded
Monte-Carlo (clustersim.goodput.montecarlo) gives their spread over ``trials`` runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from clustersim.errors import InputError
from clustersim.goodput.checkpoint import CheckpointCost, checkpoint_cost
from clustersim.goodput.config import GoodputSpec, goodput_spec
from clustersim.goodput.expectation import (
    Fractions,
    RunParams,
    best_interval_steps,
    daly_interval_s,
    expected,
    young_interval_s,
)
from clustersim.goodput.montecarlo import RunSamples, simulate_runs
from clustersim.goodput.rates import FailureClass, failure_classes
from clustersim.hardware.spec import ClusterSpec
from clustersim.perrank.hetero import stage_groups
from clustersim.report import StepReport
from clustersim.scenario import Scenario

SECONDS_PER_DAY = 86400.0
MAX_DAYS = 3650.0                     # ten years: beyond any training run
MAX_EXPECTED_INTERRUPTIONS = 25_000   # per run: 200 Monte-Carlo runs stay within ~5 s on 2 cores
MAX_RUN_EVENTS = 10_000_000           # Monte-Carlo runs x expected interruptions: ~10 s on 2 cores


@dataclass(frozen=True, slots=True)
class GoodputReport:
    step: StepReport
    spec: GoodputSpec
    days: float
    classes: tuple[FailureClass, ...]
    checkpoint: CheckpointCost
    params: RunParams
    interval_steps: int            # the interval the run uses (the user's, or the best)
    optimal_steps: int             # the interval that maximises expected goodput
    at_interval: Fractions
    at_optimal: Fractions
    samples: RunSamples

    @property
    def window_s(self) -> float:
        return self.days * SECONDS_PER_DAY

    @property
    def num_gpus(self) -> int:
        return self.step.num_gpus

    def _minutes(self, steps: int) -> float:
        return steps * self.step.step_time_s / 60.0

    def to_json(self) -> dict[str, Any]:
        f, w, gpus, step_s = self.at_interval, self.window_s, self.num_gpus, self.step.step_time_s
        mtbf_s = 1.0 / self.params.lam
        blocking = self.checkpoint.blocking_s
        sc = self.step.scenario
        tokens_per_step = sc.parallel.global_batch * sc.model.seq_len
        useful_s = f.goodput * w
        by_cause = {c.name: c.rate_per_s * w for c in self.classes}
        by_cause["planned"] = f.planned_per_s * w
        mc = self.samples

        def spread(values: np.ndarray) -> dict[str, float]:
            return {"mean": float(np.mean(values)), "p10": float(np.percentile(values, 10)),
                    "p50": float(np.percentile(values, 50)), "p90": float(np.percentile(values, 90))}

        return {
            "scenario": sc.name, "days": self.days, "gpus": gpus, "nodes": sc.cluster.num_nodes,
            "engine": self.step.engine, "step_time_s": step_s, "method": "expectation",
            "goodput": f.goodput,
            "interruptions": (f.unplanned_per_s + f.planned_per_s) * w,
            "lost_gpu_hours": (1.0 - f.goodput) * w * gpus / 3600.0,
            "checkpoint_interval_min": self._minutes(self.interval_steps),
            "checkpoint_interval_steps": self.interval_steps,
            "optimal_checkpoint_interval_min": self._minutes(self.optimal_steps),
            "optimal_goodput": self.at_optimal.goodput,
            "young_interval_min": young_interval_s(blocking, mtbf_s) / 60.0,
            "daly_interval_min": daly_interval_s(blocking, mtbf_s) / 60.0,
            "effective_training_days": useful_s / SECONDS_PER_DAY,
            "steps": useful_s / step_s, "tokens": useful_s / step_s * tokens_per_step,
            "interruptions_by_cause": by_cause,
            "lost_hours": {"checkpoint": f.checkpoint * w / 3600.0, "rework": f.rework * w / 3600.0,
                           "restart": f.restart * w / 3600.0},
            "job_mtbf_h": mtbf_s / 3600.0,
            "components": {c.name: c.count for c in self.classes},
            "mtbf_h": {c.name: c.mtbf_h for c in self.classes},
            "planned_interval_h": self.spec.planned_interval_s / 3600.0 or None,
            "checkpoint": {"mode": self.checkpoint.mode, "size_bytes": self.checkpoint.size_bytes,
                           "per_gpu_bytes": self.checkpoint.per_gpu_bytes, "read_bytes": self.checkpoint.read_bytes,
                           "snapshot_s": self.checkpoint.snapshot_s, "write_s": self.checkpoint.write_s,
                           "blocking_s": blocking, "load_s": self.checkpoint.load_s},
            "restart_s": {"after_failure": self.params.restart_failure_s,
                          "after_planned": self.params.restart_planned_s, "detect": self.spec.detect_s,
                          "requeue": self.spec.requeue_s, "init": self.spec.init_s,
                          "load": self.checkpoint.load_s},
            "monte_carlo": {
                "trials": self.spec.trials, "seed": self.spec.seed,
                "goodput": spread(mc.useful_s / w),
                "interruptions": spread(mc.unplanned + mc.planned),
                "lost_gpu_hours": spread((w - mc.useful_s) * gpus / 3600.0),
            },
        }


def check_days(days: float) -> float:
    if not (isinstance(days, (int, float)) and math.isfinite(days) and 0 < days <= MAX_DAYS):
        raise InputError("--days", days, f"a number of days > 0 and <= {MAX_DAYS:g}")
    return float(days)


def _stage_hosts(sc: Scenario, stages: int) -> list[tuple[ClusterSpec, ...]] | None:
    """Per pipeline stage, the hardware of the node groups holding its GPUs over every replica
    (clustersim.perrank.hetero.stage_groups); None on a cluster of one kind."""
    if not sc.node_groups:
        return None
    par = sc.parallel
    out = []
    for p in range(stages):
        groups = sorted({i for d in range(par.dp) for i in stage_groups(sc, d, p % par.pp)})
        out.append(tuple(sc.node_groups[i].cluster for i in groups))
    return out


def goodput_report(step: StepReport, days: float, spec: GoodputSpec | None = None) -> GoodputReport:
    """A whole run of ``days`` days of the scenario behind ``step`` (its simulated step)."""
    days = check_days(days)
    if days * 86400.0 < step.step_time_s:   # not one step: 0.86 s against an 8.2 s step read as 0.07 steps
        raise InputError("--days", days, f"a run of at least one step ({step.step_time_s:.3g} s = "
                                         f"{step.step_time_s / 86400.0:.3g} days)")
    sc = step.scenario
    spec = spec or sc.goodput or goodput_spec(None)
    classes = failure_classes(sc.cluster, spec.mtbf, [(g.nodes, g.cluster) for g in sc.node_groups])
    ckpt = checkpoint_cost(sc, step.memory_by_stage, spec, _stage_hosts(sc, len(step.memory_by_stage)))
    lam = sum(c.rate_per_s for c in classes)
    mu = 1.0 / spec.planned_interval_s if spec.planned_interval_s > 0 else 0.0
    window = days * SECONDS_PER_DAY
    events = (lam + mu) * window
    if events > MAX_EXPECTED_INTERRUPTIONS:
        raise InputError("--days", days, f"a window with at most {MAX_EXPECTED_INTERRUPTIONS:,} expected interruptions "
                         f"(this job expects {(lam + mu) * SECONDS_PER_DAY:,.1f} per day: check goodput.mtbf_h)")
    if events * spec.trials > MAX_RUN_EVENTS:
        raise InputError("--trials", spec.trials, f"at most {int(MAX_RUN_EVENTS // max(events, 1.0)):,} Monte-Carlo runs "
                         f"for {events:,.0f} expected interruptions (runs x interruptions <= {MAX_RUN_EVENTS:,})")
    load = ckpt.load_s
    params = RunParams(lam=lam, mu=mu, blocking_s=ckpt.blocking_s, lag_s=ckpt.lag_s, final_save_s=ckpt.final_save_s,
                       restart_failure_s=spec.detect_s + spec.requeue_s + spec.init_s + load,
                       restart_planned_s=spec.requeue_s + spec.init_s + load)
    step_s = step.step_time_s
    max_steps = max(1, int(window // step_s))
    optimal = best_interval_steps(params, step_s, max_steps)
    chosen = optimal
    if spec.checkpoint_interval_s > 0:
        if spec.checkpoint_interval_s > window:
            # it was cut to the window silently, and the long-run expectation of an interval that
            # never comes round fell outside the run's own Monte-Carlo range (9.5% against 13.7-24.8%)
            raise InputError("goodput.checkpoint_interval_min", spec.checkpoint_interval_s / 60,
                             f"at most the run's length, {window / 60:,.6g} min (--days {days:g})")
        chosen = min(max_steps, max(1, round(spec.checkpoint_interval_s / step_s)))
    samples = simulate_runs(params, np.array([c.rate_per_s for c in classes]), chosen * step_s, window,
                            spec.trials, spec.seed)
    return GoodputReport(step, spec, days, classes, ckpt, params, chosen, optimal,
                         expected(params, chosen * step_s), expected(params, optimal * step_s), samples)


__all__ = ["MAX_DAYS", "GoodputReport", "check_days", "goodput_report"]
