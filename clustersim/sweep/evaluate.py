"""The work of one sweep task, run inside an executor's worker.

A task is a shape and some of its micro-batch sizes; the worker enumerates the layouts itself,
so that only a few integers travel to it and plain tuples of numbers travel back. Per layout:
the memory pre-check first (cheap), the closed-form estimate only where the layout fits.

The functions a task calls travel with the spec as function objects: the closed form and the
event engine in ``SweepSpec.evaluators`` (clustersim.sweep.evaluators, passed in from above: the
sweep imports no API), the screen and its bound levels as fields of their own. All are defined at
module level, so a process pool pickles them by reference (their module and name).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from clustersim.errors import BudgetError
from clustersim.memory.report import VERDICTS
from clustersim.parallel.attention_rules import a2a_required
from clustersim.scenario import Scenario
from clustersim.sweep.constraints import Constraints
from clustersim.sweep.evaluators import Evaluators
from clustersim.sweep.replay import replay_bounds
from clustersim.sweep.screen import compiled_bounds, exact_bounds, kernel_screen_shape, screen_shape
from clustersim.sweep.space import SearchSpace, Shape, layout_from_key

# (scenario, shape, micro_batches, space) -> rows KEY_FIELDS + SCREEN_FIELDS
Screener = Callable[[Scenario, Shape, tuple[int, ...], SearchSpace], np.ndarray]
# (scenario, layout keys) -> one bound per key
Bounder = Callable[[Scenario, tuple[tuple[int, ...], ...]], np.ndarray]
# clustersim's screeners: ``screen_shape``'s bounds are at the first level (the compiled units),
# ``kernel_screen_shape``'s at level 0 (kernels alone), raised lazily by ``compiled_bounds`` (tests)
OWN_SCREENS = (screen_shape, kernel_screen_shape)

# The sweep's table, one float64 row per layout: the canonical key (space.layout_key, small
# integers, exact in float64), the screen's columns, then the closed form's (NaN where it did
# not run: the layout does not fit, or its bound shows it cannot matter).
KEY_FIELDS = ("tp", "cp", "pp", "dp", "ep", "expert_tp", "micro_batch", "zero_stage", "recompute",
              "sequence_parallel", "schedule", "virtual_stages", "offload_optimizer")
SCREEN_FIELDS = ("fits", "peak_bytes_per_gpu", "bound_step_time_s", "verdict")  # verdict: index in VERDICTS
ESTIMATE_FIELDS = ("step_time_s", "tokens_per_s", "mfu")
COLUMNS = KEY_FIELDS + SCREEN_FIELDS + ESTIMATE_FIELDS
COL = {name: i for i, name in enumerate(COLUMNS)}
# What a StepReport gives, for the closed form and the event engine alike.
METRIC_FIELDS = ("fits", "peak_bytes_per_gpu", "step_time_s", "tokens_per_s", "mfu", "verdict")
NAN = math.nan


def host_unfit_mask(table: np.ndarray) -> np.ndarray:
    """Rows that fit the GPU's memory but not a node's host memory: ``fits`` 0 with a GPU verdict
    other than does-not-fit (the screen's ``Screen.screen_host`` and ``report_metrics`` write them so)."""
    return (table[:, COL["fits"]] == 0.0) & (table[:, COL["verdict"]] != float(VERDICTS.index("does-not-fit")))


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """What every task of one sweep shares."""

    scenario: Scenario  # the base: model, cluster, training; its layout is the template
    space: SearchSpace = SearchSpace()
    # the rows of a shape's layouts, with the first bound on each (``OWN_SCREENS``)
    screener: Screener = screen_shape
    # the second-level bound of each layout, where the screener's bound is a first level below it;
    # None (or another screener): the bounds are final
    refiner: Bounder | None = exact_bounds
    # a third-level bound of each layout (0: none), at most clustersim's closed form where
    # ``evaluators.bounds_hold``; None (or another screener or estimator): no third level
    replayer: Bounder | None = replay_bounds
    # evaluate one of each pair of ZeRO-1 / ZeRO-2 twins in closed form (``time_twins``)
    share_twins: bool = True
    # what narrowed ``space`` (``--fix``, ``--max``, ``--only-validated``; runner.sweep_spec applies them)
    constraints: Constraints = Constraints()
    # whether the template's layout is the scenario's own (False: a stand-in, clustersim.sweep.template;
    # it is then not re-ranked and reported as the scenario's layout)
    own_layout: bool = True
    # the closed form and the event engine (clustersim.api.SWEEP_EVALUATORS), passed in from above
    evaluators: Evaluators = field(kw_only=True)

    def __post_init__(self) -> None:
        # a model whose attention runs under CP with a2a only (clustersim.parallel.attention_rules): the
        # template's cp > 1 candidates take a2a, the exchange `run` accepts (they were timed with p2p,
        # which `run` refuses for this model)
        par = self.scenario.parallel
        if par.cp_comm != "a2a" and a2a_required(self.scenario.model):
            object.__setattr__(self, "scenario", replace(self.scenario, parallel=replace(par, cp_comm="a2a",
                                                                                       hierarchical_cp_sizes=())))

    @property
    def own_screen(self) -> bool:
        """Whether the screener is clustersim's (``OWN_SCREENS``)."""
        return self.screener in OWN_SCREENS

    @property
    def lazy_bounds(self) -> bool:
        """Whether the screen's bounds are a level that ``refine_levels`` tighten."""
        return bool(self.refine_levels)

    @property
    def refine_levels(self) -> tuple[Bounder, ...]:
        """The refiners that raise a lazy bound, level by level: from level 0 (``kernel_screen_shape``)
        the compiled units (``compiled_bounds``); then the second level (``refiner``), which for dense
        models adds nothing to the compiled units (the data-parallel stream term is MoE's,
        ``Screen.dp_term``)."""
        if self.refiner is None or not self.own_screen:
            return ()
        levels: tuple[Bounder, ...] = (compiled_bounds,) if self.screener is kernel_screen_shape else ()
        return levels + (self.refiner,) if self.scenario.model.is_moe else levels

    @property
    def time_twins(self) -> bool:
        """Whether layouts that differ only in ZeRO stage 1 against 2 share their closed-form step
        time where the ZeRO-2 one reduces its gradients once (one micro-batch: the shipped engines
        then read the stage only as 0, 1-2 or 3 for time; ``plan.data_parallel.grads_every_micro_batch``
        says where ZeRO-2 reduces after every backward instead, and ``bnb._twins`` runs both there),
        so the branch and bound runs one twin and gives the other its time with its own memory from
        the screen, which is the closed form's (tests/sweep/test_twins.py checks both on random layouts)."""
        return self.share_twins and self.own_screen and self.evaluators.zero_twins_share_time

    @property
    def zero2_dominated(self) -> bool:
        """Whether a ZeRO-2 layout that reduces every micro-batch's gradients is never faster than
        its ZeRO-1 twin, so that the sweep may leave it out where the twin fits as well
        (clustersim.sweep.dominance): the shipped step models' ZeRO semantics
        (``Evaluators.zero_twins_share_time``; tests/sweep/test_twins.py checks it on random layouts)."""
        return self.own_screen and self.evaluators.zero_twins_share_time

    @property
    def replay_bounds(self) -> bool:
        """Whether ``replayer`` gives a third level (it bounds clustersim's closed form only:
        ``Evaluators.bounds_hold``)."""
        return self.replayer is not None and self.own_screen and self.evaluators.bounds_hold


@dataclass(frozen=True, slots=True)
class Task:
    """Blocks of layouts to screen, each a shape and some of its micro-batch sizes; the blocks of
    one task share their unit-time classes (``runner.make_tasks``)."""

    blocks: tuple[tuple[Shape, tuple[int, ...]], ...]


def report_metrics(report: Any) -> tuple[float, ...]:
    """METRIC_FIELDS of a StepReport: ``fits`` where the GPU's memory and the node's host memory
    (``StepReport.host``, the rule `run` reports as ``memory.host``) hold the layout, ``verdict``
    the GPU's (as the screen's rows: ``Screen.screen_host``). An evaluator's report without ``host``
    (a test's) offloads nothing."""
    mem, host = report.memory, getattr(report, "host", None)
    fits = bool(mem.fits) and (host is None or host.fits)
    return (float(fits), float(mem.peak_bytes_per_gpu), float(report.step_time_s),
            float(report.tokens_per_s), float(report.mfu), float(VERDICTS.index(mem.verdict)))


def screen_task(spec: SweepSpec, task: Task) -> np.ndarray:
    """Rows ``KEY_FIELDS + SCREEN_FIELDS`` of every layout of ``task``, block after block, each
    in canonical order."""
    parts = [spec.screener(spec.scenario, shape, mbs, spec.space) for shape, mbs in task.blocks]
    return np.concatenate(parts, axis=0) if parts else np.zeros((0, len(KEY_FIELDS) + len(SCREEN_FIELDS)))


def level_keys(refiner: Bounder, spec: SweepSpec, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The bound of each layout key by ``refiner`` (one of ``spec.refine_levels``)."""
    return refiner(spec.scenario, keys)


def replay_keys(spec: SweepSpec, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The replayer's third-level bound of each layout key (one float per key; 0: none)."""
    if spec.replayer is None:
        raise RuntimeError("replay_keys needs a replayer (SweepSpec.replay_bounds)")
    return spec.replayer(spec.scenario, keys)


# A layout whose step exceeds an engine's budget (clustersim.limits) gets no numbers from it:
# the sweep keeps what it has (the screen's bound and memory, or the closed form) instead of failing.
OVER_BUDGET = (NAN,) * len(METRIC_FIELDS)


def _metrics_within_budget(run: Callable[[Scenario], Any], scenario: Scenario) -> tuple[float, ...]:
    try:
        return report_metrics(run(scenario))
    except BudgetError:
        return OVER_BUDGET


def estimate_keys(spec: SweepSpec, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """METRIC_FIELDS of each layout through the closed form (NaN: over the closed form's budget)."""
    estimate = spec.evaluators.estimate
    base = spec.scenario
    rows = [_metrics_within_budget(estimate, replace(base, parallel=layout_from_key(k, base.parallel))) for k in keys]
    return np.array(rows, dtype=np.float64).reshape(len(keys), len(METRIC_FIELDS))


def simulate_key(spec: SweepSpec, key: tuple[int, ...]) -> tuple[float, ...]:
    """METRIC_FIELDS of one layout through the event engine (re-ranking; NaN: over its budget)."""
    simulate = spec.evaluators.simulate
    layout = layout_from_key(key, spec.scenario.parallel)
    return _metrics_within_budget(simulate, replace(spec.scenario, parallel=layout))
