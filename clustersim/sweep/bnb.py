"""The sweep's branch and bound: the closed form on every layout that can reach the best groups.

Fitting layouts go through the closed form (``api.estimate``) in rounds, in order of their
bound on the ranked value (``Target.scale``: the step time, or the upper end of its interval for
``--rank-by p90``), until the next bound exceeds the value of the ``keep``-th best *group* found
so far (clustersim.sweep.objective.group_codes: layouts differing only in virtual stages or in
ZeRO 1 against 2 share a row, so the threshold is the ``keep``-th best distinct row's). A layout
whose bound exceeds the best value found in its own group cannot change that group's row and is
left out too; with ``Target.plain`` so is a plain 3D layout only while its bound is above the
best plain 3D value found (the sweep reports the best plain layout beside #1). Each threshold
only falls and each bound only rises, so a layout left out stays out. Ties go to the smaller
layout key, so an equal bound is evaluated. See docs/sweep.md, "How the sweep evaluates".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.data_parallel import grads_every_micro_batch
from clustersim.sweep.evaluate import (
    COL,
    ESTIMATE_FIELDS,
    KEY_FIELDS,
    METRIC_FIELDS,
    SweepSpec,
    estimate_keys,
    level_keys,
    replay_keys,
)
from clustersim.sweep.executors import Executor
from clustersim.sweep.rank import key_codes
from clustersim.sweep.space import layout_from_key

N_KEY = len(KEY_FIELDS)
# key columns in the order that groups layouts of one unit-time class (Screen.class_key) together
CLASS_COLUMNS = tuple(KEY_FIELDS.index(f) for f in ("tp", "cp", "ep", "expert_tp", "micro_batch", "recompute",
                                                     "sequence_parallel", "dp", "pp", "schedule", "virtual_stages",
                                                     "zero_stage", "offload_optimizer"))
# Progress callback: (phase, done, total); phases "screen", "estimate", "simulate".
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Target:
    """What the branch and bound looks for, per row of the table."""

    groups: np.ndarray               # int64 group code (objective.group_codes)
    scale: np.ndarray | None = None  # ranked value = step time x scale (None: 1)
    plain: np.ndarray | None = None  # bool: plain 3D layouts, whose best is wanted too (None: not)


def keys_of(rows: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in row[:N_KEY]) for row in rows]


def chunks(items: list, n: int) -> list[tuple]:
    """``items`` cut into consecutive chunks of at most ``n``."""
    return [tuple(items[i:i + n]) for i in range(0, len(items), n)]


def _group_best(codes: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct codes, the least value of each)."""
    if codes.size == 0:
        return codes, values
    order = np.lexsort((values, codes))
    c = codes[order]
    first = np.concatenate(([True], c[1:] != c[:-1]))
    return c[first], values[order][first]


def branch_and_bound(spec: SweepSpec, table: np.ndarray, executor: Executor, keep: int, pareto: bool,
                     progress: Progress | None, target: Target) -> tuple[np.ndarray, np.ndarray | None]:
    """Fill the closed-form columns of every layout that can reach the best ``keep`` groups
    (module doc).

    Groups that fit rank before tight ones (objective ranking), so the best ``keep`` come from the
    layouts whose memory verdict is ``fits`` when that many groups have one; tight layouts are
    evaluated only when fewer fit.

    With lazy bounds (``SweepSpec.lazy_bounds``) the screen's bound column holds a lower level
    (the shipped screen: level 1, the compiled units with the ZeRO-3 gathers; the tests' level-0
    screener: each unit's kernels alone) and a round first raises it, level by level
    (``SweepSpec.refine_levels``: ``screen.compiled_bounds`` after a level-0 screen; then, for MoE
    models, the data-parallel stream terms, ``screen.exact_bounds``), for every wanted layout whose bound
    at the level below is at most the bound of the last layout the round would pick; a layout
    not raised has a higher level at least its bound, above that edge, so it sorts after every
    picked one. Whether a layout is wanted depends only on its own bound against thresholds, so
    each round picks the layouts that the last of these levels alone would pick, and the closed
    form runs on the same layouts as with it everywhere (tests/sweep/test_lazy_bound.py). With the
    third level (``SweepSpec.replay_bounds``) a round's picks must be at that level: those below
    the edge are replayed first (``max`` with their bound) and the round starts again, so every
    layout left out has a final bound above the threshold (tests/sweep/test_replay.py)."""
    clear = (table[:, COL["verdict"]] == 0.0) & (table[:, COL["fits"]] == 1.0)   # fits: the host's memory too
    clear_groups = np.unique(target.groups[clear]).size
    by_clear = clear_groups >= keep
    fits = np.flatnonzero(clear if by_clear else table[:, COL["fits"]] == 1.0)
    krank = key_codes(table)  # orders rows like their keys
    bcol = COL["bound_step_time_s"]
    scale, groups, plain = target.scale, target.groups, target.plain

    def bound(rows: np.ndarray) -> np.ndarray:  # the bound on the ranked value
        return table[rows, bcol] if scale is None else table[rows, bcol] * scale[rows]

    def by_bound(rows: np.ndarray) -> np.ndarray:  # by bound, then key
        return rows[np.lexsort((krank[rows], bound(rows)))]

    def resorted(rows: np.ndarray, raised: np.ndarray) -> np.ndarray:
        """``rows`` (in order) after the bounds of ``raised`` (some of them) rose: the others keep
        their order, the raised ones go back in by merging, in time linear in ``rows``."""
        gone = np.zeros(table.shape[0], dtype=bool)
        gone[raised] = True
        rest = rows[~gone[rows]]
        moved = by_bound(raised)
        b, k = bound(rest), krank[rest]
        mb, mk = bound(moved), krank[moved]
        lo = np.searchsorted(b, mb, side="left")
        hi = np.searchsorted(b, mb, side="right")
        for i in np.flatnonzero(hi > lo):  # equal bounds: by key (rare)
            lo[i] += int(np.searchsorted(k[lo[i]:hi[i]], mk[i]))
        return np.insert(rest, lo, moved)

    order = by_bound(fits)
    # the level of each row's bound: 0 the screen's, k + 1 that of refiners[k], then the replayer's (final)
    refiners = spec.refine_levels
    nref = len(refiners)
    top = nref + 1 if spec.replay_bounds else nref
    level = np.zeros(table.shape[0], dtype=np.int8)
    workers = max(1, getattr(executor, "workers", 1))
    # layouts a round picks: twice the best kept (the 1,024-GPU Mixtral sweep runs the same 374 closed
    # forms in 37 rounds instead of 74 with ``keep``; a round costs a trip through the workers). After
    # the first round, where ZeRO-1/2 twins share a closed form (about half the picks), twice that:
    # about 2 x keep closed forms a round (the Mixtral sweep's 899 closed forms of 1,775 picks, with
    # one row per group, in 45 rounds instead of 89)
    batch = max(4 * workers, 2 * keep)
    later = 2 * batch if spec.time_twins else batch
    # what raises a bound from each level to the next: the refiners, then the replayer (its
    # bounds taken with ``max``: a replay never lowers one)
    raisers = [functools.partial(level_keys, refiner) for refiner in refiners] + [replay_keys] * (top - nref)
    # layouts raised per round and level, doubling: few rounds, at most twice the needed work
    # (replays at least four batches: a replay costs a tenth of the closed form; doubling too:
    # every wanted layout is below the threshold, so it is replayed or evaluated unless the
    # threshold falls below it first, and each round costs a pass over the order)
    raise_n = [8 * batch] * nref + [4 * batch] * (top - nref)
    evaluated = 0
    timed: dict[tuple[float, ...], int] = {}  # twin key -> the row run in closed form
    picked = np.zeros(0, dtype=np.int64)   # the rows picked so far (only they have a closed-form time)
    mark = np.zeros(table.shape[0], dtype=bool)
    while len(order):
        steps = table[picked, COL["step_time_s"]]
        feasible = table[picked, COL["fits"]] == 1.0
        if by_clear:
            feasible &= table[picked, COL["verdict"]] == 0.0
        known = picked[~np.isnan(steps) & feasible]
        values = table[known, COL["step_time_s"]] * (1.0 if scale is None else scale[known])
        codes, best = _group_best(groups[known], values)
        rest = order
        b = bound(rest)
        if by_clear:
            threshold = np.sort(best)[keep - 1] if best.size >= keep else math.inf
            below = b <= threshold
        else:
            # fewer than keep groups fit for certain: all of them rank first, whatever their
            # time, so a fitting layout is wanted until its group's best is known (pruning it
            # against the tight rows' threshold made #1 depend on --top); the tight layouts race
            # for the keep - clear_groups places left
            tight = ~clear[known]
            _, tight_best = _group_best(groups[known][tight], values[tight])
            left = keep - clear_groups
            threshold = np.sort(tight_best)[left - 1] if tight_best.size >= left else math.inf
            below = (b <= threshold) | clear[rest]
        if plain is not None:
            on = plain[known]
            plain_best = values[on].min() if on.any() else math.inf
            below |= plain[rest] & (b <= plain_best)
        if codes.size:  # a layout above its group's best cannot change the group's row
            at = np.minimum(np.searchsorted(codes, groups[rest]), codes.size - 1)
            below &= ~((codes[at] == groups[rest]) & (b > best[at]))
        if not pareto:  # bounds only rise and the thresholds only fall: a layout above them stays out
            rest = order = rest[below]
            wanted = rest
        else:
            wanted = rest[below]
            if known.size:
                wanted = np.union1d(wanted, _pareto_candidates(table, rest))
                wanted = rest[np.isin(rest, wanted)]
        if wanted.size == 0:
            break
        pick = wanted[:batch if picked.size == 0 else later]
        edge = bound(pick[-1:])[0]
        raised = False
        for k, raiser in enumerate(raisers):  # the lowest level first
            lazy = wanted[level[wanted] == k]
            if lazy.size and bound(lazy[:1])[0] <= edge:
                lazy = lazy[:max(raise_n[k], int((bound(lazy) <= edge).sum()))]
                raise_n[k] *= 2
                new = _refine(spec, table[lazy], executor, raiser)
                table[lazy, bcol] = new if k < nref else np.maximum(table[lazy, bcol], new)
                level[lazy] = k + 1
                raised = True
                break
        if raised:
            order = resorted(order, lazy)
            continue
        run, copies = pick, []
        if spec.time_twins:  # one closed form per ZeRO-1/2 twin pair (SweepSpec.time_twins)
            run, copies = _twins(table, pick, timed, spec.scenario.parallel)
        if len(run):
            chunk = max(1, math.ceil(len(run) / (2 * workers)))
            jobs = chunks(keys_of(table[run]), chunk)
            results = executor.run(functools.partial(estimate_keys, spec), jobs)
            metrics = np.concatenate(results, axis=0)
            # The closed form's own memory verdict is final (the screen computes the same numbers);
            # a layout over the closed form's budget (NaN) keeps the screen's verdict and its bound.
            ran = ~np.isnan(metrics[:, 0])
            done = run[ran]
            table[done, COL["fits"]] = metrics[ran, 0]
            table[done, COL["peak_bytes_per_gpu"]] = metrics[ran, 1]
            table[done, COL["verdict"]] = metrics[ran, METRIC_FIELDS.index("verdict")]
            for f in ESTIMATE_FIELDS:
                table[done, COL[f]] = metrics[ran, METRIC_FIELDS.index(f)]
        for row, source in copies:  # the twin's time; memory stays the screen's (the closed form's)
            for f in ESTIMATE_FIELDS:
                table[row, COL[f]] = table[source, COL[f]]
        evaluated += len(pick)
        picked = np.concatenate([picked, pick])
        mark[pick] = True
        order = rest[~mark[rest]]
        mark[pick] = False
        if progress:  # the total is what the bound still admits: it shrinks as better layouts turn up
            progress("estimate", evaluated, evaluated + int(wanted.size) - len(pick))
    return table, level >= 1 if spec.lazy_bounds else None


def _twins(table: np.ndarray, pick: np.ndarray, timed: dict[tuple[float, ...], int], template: ParallelLayout
           ) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Split ``pick`` into the rows to run in closed form and (row, twin) pairs whose ZeRO-1/2
    twin ran already or runs in this round (``SweepSpec.time_twins``); ``timed`` maps each
    twin key (the layout key with ZeRO stage 2 read as 1) to the row that ran. Twins whose
    ZeRO-2 member reduces every micro-batch's gradients (``plan.data_parallel.grads_every_micro_batch``)
    differ in time and are each run."""
    zcol = COL["zero_stage"]
    run, copies = [], []
    for row in pick.tolist():
        key = table[row, :N_KEY].copy()
        if key[zcol] in (1.0, 2.0):
            zero2 = key.copy()
            zero2[zcol] = 2.0
            if not grads_every_micro_batch(layout_from_key(tuple(int(v) for v in zero2), template)):
                key[zcol] = 1.0
        twin = tuple(key.tolist())
        source = timed.get(twin)
        if source is None:
            timed[twin] = row
            run.append(row)
        else:
            copies.append((row, source))
    return np.array(run, dtype=pick.dtype), copies


def _refine(spec: SweepSpec, rows: np.ndarray, executor: Executor,
            bounds: Callable[[SweepSpec, tuple[tuple[int, ...], ...]], np.ndarray]) -> np.ndarray:
    """The next level's bounds of ``rows`` (table rows), computed by the executor's workers."""
    workers = max(1, getattr(executor, "workers", 1))
    # by key, so that each worker gets whole unit-time classes (tp, cp, ep, expert tp lead)
    by_class = np.lexsort([rows[:, c] for c in reversed(CLASS_COLUMNS)])
    keys = keys_of(rows[by_class])
    jobs = chunks(keys, max(64, math.ceil(len(keys) / (2 * workers))))
    out = np.empty(len(keys))
    out[by_class] = np.concatenate(executor.run(functools.partial(bounds, spec), jobs))
    return out


def _pareto_candidates(table: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Rows of ``rest`` that could still be on the Pareto front: no evaluated layout with at most
    their memory has a step time below their bound."""
    steps = table[:, COL["step_time_s"]]
    ok = np.flatnonzero(~np.isnan(steps) & (table[:, COL["fits"]] == 1.0))
    peaks = table[ok, COL["peak_bytes_per_gpu"]]
    by_peak = np.argsort(peaks, kind="stable")
    best_below = np.minimum.accumulate(steps[ok][by_peak])  # fastest step at or below each peak
    idx = np.searchsorted(peaks[by_peak], table[rest, COL["peak_bytes_per_gpu"]], side="right") - 1
    best = np.where(idx >= 0, best_below[np.maximum(idx, 0)], math.inf)
    return rest[table[rest, COL["bound_step_time_s"]] <= best]
