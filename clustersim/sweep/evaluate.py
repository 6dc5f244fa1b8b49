"""The work of one sweep task, run inside an executor's worker.

A task is a shape and some of its micro-batch sizes; the worker enumerates the layouts itself,
so that only a few integers travel to it and plain tuples of numbers travel back. Per layout:
the memory pre-check first (cheap), the closed-form estimate only where the layout fits.

Evaluator functions are named as ``"module:function"`` strings and imported in the worker, so a
task pickles to a few hundred bytes whichever executor runs it.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from clustersim.parallel.layout import RECOMPUTE, SCHEDULES, ParallelLayout
from clustersim.scenario import Scenario
from clustersim.sweep.space import SearchSpace, Shape, layout_key, shape_layouts

ESTIMATE = "clustersim.api:estimate"
SIMULATE = "clustersim.api:simulate"
MEMORY_CHECK = "clustersim.sweep.prune:fits_in_memory"

# A task's result is a float64 table, one row per layout: the canonical key (space.layout_key,
# small integers, exact in float64), then the metrics (fits as 0/1; NaN times where memory-pruned).
KEY_FIELDS = ("tp", "cp", "pp", "dp", "ep", "micro_batch", "zero_stage", "recompute", "sequence_parallel",
              "schedule", "virtual_stages")
METRIC_FIELDS = ("fits", "peak_bytes_per_gpu", "step_time_s", "tokens_per_s", "mfu")
COLUMNS = KEY_FIELDS + METRIC_FIELDS
COL = {name: i for i, name in enumerate(COLUMNS)}
NAN = math.nan


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """What every task of one sweep shares."""

    scenario: Scenario  # the base: model, cluster, training; its layout is the template
    space: SearchSpace = SearchSpace()
    estimator: str = ESTIMATE
    simulator: str = SIMULATE
    memory_check: str | None = MEMORY_CHECK  # "module:function"(scenario) -> (fits, peak_bytes); None: off


@dataclass(frozen=True, slots=True)
class Task:
    shape: Shape
    micro_batches: tuple[int, ...]


@functools.cache
def resolve(name: str) -> Callable[..., Any]:
    """Import ``"package.module:function"``."""
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def layout_from_key(key: tuple[int, ...], template: ParallelLayout) -> ParallelLayout:
    """Inverse of ``space.layout_key`` (options the sweep does not search come from ``template``)."""
    tp, cp, pp, dp, ep, mb, zero, rec, sp, sched, v = key
    return replace(template, tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, micro_batch=mb, zero_stage=zero,
                   recompute=RECOMPUTE[rec], sequence_parallel=bool(sp), schedule=SCHEDULES[sched],
                   virtual_stages=v)


def report_metrics(report: Any) -> tuple[Any, ...]:
    """METRIC_FIELDS of a StepReport."""
    mem = report.memory
    return (bool(mem.fits), int(mem.peak_bytes_per_gpu), float(report.step_time_s),
            float(report.tokens_per_s), float(report.mfu))


def evaluate_task(spec: SweepSpec, task: Task) -> np.ndarray:
    """The table (COLUMNS) of every layout of ``task``: memory-pruned ones carry NaN times."""
    base = spec.scenario
    return evaluate_layouts(spec, shape_layouts(base.model, task.shape, base.parallel, spec.space,
                                                micro_batches=task.micro_batches))


def evaluate_keys(spec: SweepSpec, keys: list[tuple[int, ...]]) -> np.ndarray:
    """The table (COLUMNS) of the layouts named by their keys."""
    return evaluate_layouts(spec, [layout_from_key(k, spec.scenario.parallel) for k in keys])


def evaluate_layouts(spec: SweepSpec, layouts: list[ParallelLayout]) -> np.ndarray:
    """The table (COLUMNS) of ``layouts``: memory check first, the estimate only where it fits."""
    estimate = resolve(spec.estimator)
    check = resolve(spec.memory_check) if spec.memory_check else None
    base = spec.scenario
    rows: list[tuple[Any, ...]] = []
    for layout in layouts:
        scenario = replace(base, parallel=layout)
        key = layout_key(layout)
        if check is not None:
            fits, peak = check(scenario)
            if not fits:
                rows.append((*key, False, int(peak), NAN, NAN, NAN))
                continue
        rows.append((*key, *report_metrics(estimate(scenario))))
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(COLUMNS))


def simulate_key(spec: SweepSpec, key: tuple[int, ...]) -> tuple[Any, ...]:
    """METRIC_FIELDS of one layout through the event engine (re-ranking)."""
    simulate = resolve(spec.simulator)
    layout = layout_from_key(key, spec.scenario.parallel)
    return report_metrics(simulate(replace(spec.scenario, parallel=layout)))
