"""Screening every layout cheaply: its exact peak memory and a lower bound on its step time.

The closed form (``clustersim.api.estimate``) replays the whole pipeline schedule, so it costs
milliseconds to a second per layout; the sweep cannot afford it on ~10^6 layouts. The screen
computes, from the plan's own functions and with results shared between layouts:

* **Peak memory per GPU**, exactly as the plan does (``sweep.memory_screen``, on arrays in
  ``sweep.rows``), for every pipeline rank that can hold the peak (``sweep.profiles``). Layouts
  that do not fit are pruned.
* **A lower bound on the closed-form step time** (``Screen.step_bound_s``) in levels, each at
  most the next: the pipeline term (``sweep.pipe_bound``) on the class's unit times
  (``sweep.unit_times``: level 0 the kernels alone, level 1 the compiled units), plus the step's
  other terms (``sweep.step_terms``: optimizer step, data-parallel tail, ZeRO-3 gathers) and, at
  level 2 for MoE models, the data-parallel stream terms (``sweep.stream_terms``). The third
  level replays the schedule (``sweep.replay``).

``Screen`` holds one base scenario's run: its ``SweepMemo`` and the objects that read it. A worker
process keeps one per base scenario (``screen_for``). ``tests/sweep/test_screen.py`` checks both
numbers against ``api.estimate`` on random layouts: equal memory, and bound <= step time.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from clustersim.compute.variation import sync_wait_fraction
from clustersim.memory.host import HostMemory, host_memory
from clustersim.memory.policies import uniform_policies
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES, ParallelLayout
from clustersim.plan.step_plan import runs_rank_classes
from clustersim.plan.step_terms import fixed_host_s
from clustersim.scenario import Scenario
from clustersim.sweep.memo import SweepMemo
from clustersim.sweep.memory_screen import MemoryModel
from clustersim.sweep.pipe_bound import (
    BOUND_SLACK,
    FIRST_SLACK,
    KERNEL_SLACK,
    WaitTerms,
    first_level_pipe_s,
    pipeline_bound_s,
    wait_floor_of,
)
from clustersim.sweep.profiles import ScheduleProfile, schedule_profile
from clustersim.sweep.rows import (
    FITS_COL,
    KEY_WIDTH,
    OFFLOAD_OPTIMIZER_COL,
    RECOMPUTE_COL,
    ROW_WIDTH,
    SEQUENCE_PARALLEL_COL,
    VectorRows,
)
from clustersim.sweep.space import (
    SearchSpace,
    Shape,
    layout_from_key,
    offload_options,
    recompute_fits,
    recompute_options,
    schedule_options,
    schedule_zero_ok,
    sequence_parallel_options,
    with_recompute,
    zero_options,
)
from clustersim.sweep.step_terms import StepTerms
from clustersim.sweep.stream_terms import StreamTerms
from clustersim.sweep.unit_times import ClassTimes, UnitTimes, runs_pairs


class Screen:
    """Memory and step-time bound of layouts of one base scenario, with the run's ``SweepMemo``
    (tables keyed by a few integers, so that the big Scenario is never hashed per layout):
    ``classes`` the unit times per class, ``terms`` the step's terms, ``streams`` the
    data-parallel stream terms, ``memory`` the memory per pipeline rank."""

    def __init__(self, base: Scenario, memo: SweepMemo | None = None) -> None:
        self.base = base
        self.memo = memo if memo is not None else SweepMemo()
        self.memory = MemoryModel(base, self.memo)
        self.classes = ClassTimes(base, self.memo)
        self.terms = StepTerms(base, self.memo)
        self.per_rank = runs_rank_classes(base)
        # the step's synchronising calls, the host's floor that every layout pays (wait_floor_s)
        self.fixed_host_s = 0.0 if self.per_rank else fixed_host_s(base, 0.0)
        self.streams = StreamTerms(base, self.memo, self.classes, self.terms, self.per_rank)
        # the data-parallel stream term of the second level: on for MoE models (total_s)
        self.dp_term = base.model.is_moe

    def count_classes(self, keys: np.ndarray) -> int:
        """Distinct unit-time classes of these rows of (tp, cp, pp, dp, ep, expert_tp, micro_batch,
        recompute index, sequence_parallel)."""
        tmpl = self.base.parallel
        return self.classes.count_classes(layout_from_key((tp, cp, pp, dp, ep, etp, mb, 0, rec, sp, 1, 1, 0), tmpl)
                                          for tp, cp, pp, dp, ep, etp, mb, rec, sp in keys.astype(np.int64).tolist())

    def worst(self, layout: ParallelLayout, profile: ScheduleProfile,
              cache: dict[tuple[object, ...], tuple[int, int, int]] | None = None) -> tuple[int, int]:
        """(verdict index, reserved peak) of the pipeline rank that decides the verdict (the
        engine's ``worst_stage``). ``cache`` shares ranks between schedules of one layout
        (uniform recompute policies only)."""
        uniform = cache is not None or uniform_policies(layout)
        best: tuple[int, int, int] | None = None
        if cache is not None:
            # a rank's memory depends on its rank number only through non-uniform policies: the
            # entries of one layout are shared by ranks and schedules alike (the parts that do not
            # depend on the in-flight counts under the key None)
            block = cache.setdefault(None, {})  # type: ignore[call-overload]
        for r in profile.check_ranks if uniform else range(layout.pp):
            held, inflight = profile.ranks[r]
            first, last, ends, moe = profile.firsts[r], profile.lasts[r], profile.ends[r], profile.moe_held[r]
            if cache is not None:
                key = (held, inflight, ends, first, last, moe)
                vp = cache.get(key)
                if vp is None:
                    vp = cache[key] = self.memory.rank_key(layout, r, held, inflight, first, last, ends, moe, block)[:2]
                entry = (vp[0], vp[1], -r)
            else:
                entry = self.memory.rank_key(layout, r, held, inflight, first, last, ends, moe)
            if best is None or entry > best:
                best = entry
        assert best is not None
        return best[0], best[1]

    def host(self, layout: ParallelLayout, profile: ScheduleProfile) -> HostMemory | None:
        """A node's host memory against what the layout offloads: the rule `run` reports as
        ``memory.host`` (clustersim.memory.host.host_memory) on every pipeline rank's offloaded bytes,
        the memory model's as the engine's ``memory_by_stage``; None where nothing is offloaded."""
        def offloaded(r: int) -> int:
            held, inflight = profile.ranks[r]
            return self.memory.report(layout, r, held, inflight, profile.firsts[r], profile.lasts[r], profile.ends[r],
                                      profile.moe_held[r]).host_bytes_per_gpu
        return host_memory([offloaded(r) for r in range(layout.pp)], self.base.cluster,
                           layout.tp * layout.cp * layout.dp)

    def screen_host(self, rows: np.ndarray) -> None:
        """Mark the rows (KEY_FIELDS + SCREEN_FIELDS) whose layout offloads more than a node's host
        memory holds as not fitting: ``fits`` 0, the GPU's ``verdict`` kept, so that a row that fits
        the GPU but not the host reads ``fits`` 0 with a verdict other than does-not-fit (the reason
        the sweep's output gives: clustersim.sweep.result.SweepResult.host_unfit)."""
        tmpl = self.base.parallel
        if not self.base.cluster.host_memory_bytes or not rows.shape[0]:
            return
        offloads = rows[:, OFFLOAD_OPTIMIZER_COL] == 1.0 if not (tmpl.offload_params or tmpl.offload_activations) \
            else np.ones(rows.shape[0], dtype=bool)
        # without activation offload the host holds states only (memory.report.offload): they read
        # the layout's degrees, ZeRO stage and offload and each rank's layers (its profile), not
        # recompute, sequence parallelism or the micro-batch: one check per such key
        memo = self.memo.host
        idx = np.flatnonzero(offloads & (rows[:, FITS_COL] == 1.0))
        if not idx.size:
            return
        cols = [c for c in range(KEY_WIDTH)
                if tmpl.offload_activations or c not in (RECOMPUTE_COL, SEQUENCE_PARALLEL_COL)]
        groups, first, inverse = np.unique(rows[idx][:, cols], axis=0, return_index=True, return_inverse=True)
        signatures: dict[tuple[int, ...], tuple[object, ...]] = {}
        unfit = np.zeros(len(groups), dtype=bool)
        # each group's first row's key as Python integers, converted at once (the key columns hold
        # whole numbers: the same integers as int() of each)
        heads = rows[idx[first], :KEY_WIDTH].astype(np.int64).tolist()
        for j, head in enumerate(heads):
            key = tuple(head)
            tp, cp, pp, dp, ep, etp, mb, zero, _, _, sched, v, off = key
            if tmpl.offload_activations:
                short: tuple[object, ...] = key
            else:
                program = (sched, pp, tmpl.global_batch // (dp * mb), v)
                sig = signatures.get(program)
                if sig is None:
                    prof = self.profile_of(SCHEDULES[sched], pp, program[2], v)
                    sig = signatures[program] = tuple(zip([r[0] for r in prof.ranks], prof.moe_held, prof.firsts,
                                                          prof.lasts, strict=True))
                short = (tp, cp, pp, dp, ep, etp, zero, off, sig)
            fits = memo.get(short)
            if fits is None:
                layout = layout_from_key(key, tmpl)
                host = self.host(layout, self.profile(layout))
                fits = memo[short] = host is None or host.fits
            unfit[j] = not fits
        rows[idx[unfit[inverse.reshape(-1)]], FITS_COL] = 0.0

    def peak_bytes(self, layout: ParallelLayout, profile: ScheduleProfile) -> int:
        """Peak memory per GPU of the deciding rank."""
        return self.worst(layout, profile)[1]

    def step_bound_s(self, layout: ParallelLayout, profile: ScheduleProfile, exact: bool = True,
                     level: int | None = None) -> float:
        """A lower bound on ``api.estimate(...).step_time_s`` at ``level`` (default: 2 if
        ``exact`` else 0): 0 each unit's kernels alone (``ClassTimes.lower_times``), 1 the compiled
        units (``ClassTimes.unit_times``) with the ZeRO-3 gathers, 2 also the data-parallel
        stream term of MoE models (``total_s``). Each level is at most the next."""
        if level is None:
            level = 2 if exact else 0
        if level == 0:
            u = self.classes.lower_times(layout)
            bound = self.kernel_pipe_s(layout, u, profile, layout.num_micro_batches, layout.schedule)
        else:
            u = self.classes.unit_times(layout)
            bound = self.exact_pipe_s(layout, u, profile, layout.num_micro_batches, layout.schedule)
            if level == 1:
                bound *= FIRST_SLACK
        return self.total_s(layout, u, profile, bound, level == 2, (layout.schedule, layout.virtual_stages)) \
            * (1.0 - BOUND_SLACK)

    def exact_pipe_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, num_micro_batches: int,
                     schedule: str) -> float:
        """The second level's ``pipeline_bound_s``; where the schedule runs a forward and a backward
        as one overlapped pair (DualPipe, DualPipe-V, Megatron's EP overlap: ``engine.pair``) a
        pair can take less than its two compiled actions, whose collectives hide behind each
        other's compute, so there every unit counts only ``unit_times.pair_unit_times``."""
        if runs_pairs(layout, schedule):
            lo = self.classes.pair_times(layout)
            return first_level_pipe_s(lo, self.terms.p2p_s(layout, lo.p2p_bytes), profile, num_micro_batches,
                                      layout.zero_stage == 3) * FIRST_SLACK
        return pipeline_bound_s(u, self.terms.extra(layout, u), profile, num_micro_batches)

    def kernel_pipe_s(self, layout: ParallelLayout, lower: UnitTimes, profile: ScheduleProfile,
                      num_micro_batches: int, schedule: str) -> float:
        """Level 0's pipeline bound: ``exact_pipe_s`` with each unit's kernels alone (``lower``, at
        most the compiled units and the pair times: the bound is increasing in them), ZeRO-3
        gathers included except in pair schedules, which level 1 prices without."""
        if layout.zero_stage == 3 and not runs_pairs(layout, schedule):
            return pipeline_bound_s(lower, self.terms.extra(layout, lower), profile, num_micro_batches) * KERNEL_SLACK
        return first_level_pipe_s(lower, self.terms.p2p_s(layout, lower.p2p_bytes), profile, num_micro_batches,
                                  layout.zero_stage == 3) * KERNEL_SLACK

    def total_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, pipe_s: float,
                exact: bool, schedule: tuple[str, int]) -> float:
        """The bound from the pipeline bound ``pipe_s``: plus the optimizer step and, with the
        backward chain, the data-parallel tail; at the second level (``exact``) of a MoE model at
        least the bound from the data-parallel streams (``StreamTerms.dp_bound_s``, or without
        the chain ``StreamTerms.stream_floor_s``); then the least wait for the slowest GPU
        (``wait_floor_s``). ``schedule``: the layout's (schedule, virtual stages), which the
        screen's ``layout`` does not carry.

        Dense models leave the data-parallel term out (still a bound, only looser): measured on
        idle cores it doubled the GPT-3 175B sweep (27.8 s -> 52.4 s wall, 45.6 -> 83.3 s CPU) and
        left its closed-form evaluations at 102 (the five-cluster compare: 2,686 -> 2,634), while
        a MoE bound without it is as low as 0.42 of the closed form (expert gradients over their
        own group; docs/sweep.md)."""
        terms = self.step_terms(layout, u, profile)
        opt = terms[0]
        bound = self.with_terms(layout, u, profile, pipe_s, terms)
        if exact and self.dp_term:
            if profile.backward_chain:
                bound = max(bound, self.streams.dp_bound_s(layout, schedule, u, profile, pipe_s, opt))
            else:
                bound = max(bound, self.streams.stream_floor_s(layout, schedule, u, profile, self.dp_term))
        return bound + self.wait_floor_s(layout, profile)

    def wait_floor_s(self, layout: ParallelLayout, profile: ScheduleProfile) -> float:
        """The least waits that the plan adds to any rank before its optimizer step
        (clustersim.plan.step_terms): for the slowest GPU (``sync_wait_fraction`` of the rank's
        kernel seconds), from the kernels alone of the fewest layers any rank holds, and for the
        host (``host_s``), from the own issue deficits of the fewest MoE layers any rank holds
        and the step's synchronising calls. Every bound above ends with some rank's optimizer
        step, which comes after those waits, so adding them keeps them bounds. Per-rank runs
        price their own spread, and run a slow GPU's units longer than the class's (0 here)."""
        return wait_floor_of(self.wait_terms(layout), profile, layout.num_micro_batches)

    def wait_terms(self, layout: ParallelLayout) -> WaitTerms:
        """What ``wait_floor_s`` reads of the layout (``pipe_bound.WaitTerms``)."""
        if self.per_rank:
            return WaitTerms()
        memo = self.memo
        frac = memo.sync_fraction.get(layout.num_gpus)
        if frac is None:
            frac = memo.sync_fraction[layout.num_gpus] = sync_wait_fraction(layout.num_gpus)
        layer_s = 0.0
        if frac > 0.0:
            key = self.classes.class_key(layout)
            layer_s = memo.floor_layer_s.get(key)
            if layer_s is None:
                lo = self.classes.lower_times(layout)
                layer_s = memo.floor_layer_s[key] = lo.layer_f_s + lo.layer_b_s
        moe = self.classes.moe_sync_s(layout) if self.base.model.is_moe else 0.0
        return WaitTerms(frac, layer_s, moe, self.fixed_host_s)

    def with_terms(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, pipe_s: float,
                   terms: tuple[float, float, float]) -> float:
        """The bound from the pipeline bound ``pipe_s`` and ``step_terms`` (before the slowest GPU's
        wait): the pipeline then the optimizer step and the tail, or ZeRO-2's floor from rank 0's
        data-parallel stream, with rank 0's kernels where they wait for its reductions."""
        opt, tail, floor = terms
        if floor:
            floor += self.terms.blocked_kernels_s(layout, u, profile)
        return max(pipe_s + opt + tail, floor)

    def step_terms(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile
                   ) -> tuple[float, float, float]:
        """What ``total_s`` adds to the pipeline bound below the second level: the optimizer step
        and, with the backward chain, the data-parallel tail (else 0); and a floor on the step
        from rank 0's data-parallel stream where ZeRO-2 reduces every micro-batch's gradients
        (``StepTerms.grad_stream_s`` then its optimizer step; else 0). All read the class only
        through its parameter counts."""
        opt = self.terms.optimizer_s(layout, u, profile)
        stream = self.terms.grad_stream_s(layout, u, profile) if profile.backward_chain else 0.0
        return (opt, self.terms.tail_s(layout, u, profile) if profile.backward_chain else 0.0,
                stream + opt if stream else 0.0)

    def profile(self, layout: ParallelLayout) -> ScheduleProfile:
        return self.profile_of(layout.schedule, layout.pp, layout.num_micro_batches, layout.virtual_stages)

    def profile_of(self, schedule: str, pp: int, num_micro_batches: int, virtual_stages: int) -> ScheduleProfile:
        m = self.base.model
        return schedule_profile(schedule, pp, num_micro_batches, virtual_stages, m.layers,
                                m.moe_layer_flags() if m.is_moe else None, m.mtp_layers)


# The screens of this process, one per base scenario, most recently used last: a worker builds
# its own and keeps it from task to task of one sweep (a compare runs one sweep per cluster).
_SCREENS: dict[Scenario, Screen] = {}
MAX_SCREENS = 4


def screen_for(base: Scenario) -> Screen:
    """This process's ``Screen`` (and ``SweepMemo``) of ``base``, built on first use."""
    sc = _SCREENS.pop(base, None)
    if sc is None:
        sc = Screen(base)
        if len(_SCREENS) >= MAX_SCREENS:
            del _SCREENS[next(iter(_SCREENS))]
    _SCREENS[base] = sc
    return sc


def kernel_screen_shape(base: Scenario, shape: Shape, micro_batches: tuple[int, ...],
                        space: SearchSpace) -> np.ndarray:
    """``screen_shape`` at level 0 (each unit's kernels alone), which ``compiled_bounds`` then
    raises lazily: the sweep's screener before the screen priced the compiled units itself
    (tests/sweep/test_lazy_bound.py keeps the three-level branch and bound exact)."""
    return screen_shape(base, shape, micro_batches, space, level=0)


def compiled_bounds(base: Scenario, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The first level of the bound (``step_bound_s`` at level 1: the compiled units and the ZeRO-3
    gathers, no data-parallel stream term) of each layout key."""
    sc = screen_for(base)
    out = np.empty(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        layout = layout_from_key(key, base.parallel)
        out[i] = sc.step_bound_s(layout, sc.profile(layout), level=1)
    return out


def exact_bounds(base: Scenario, keys: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The second-level bound (``step_bound_s`` with the class's unit times) of each layout key:
    what ``screen_shape(..., exact=True)`` puts in its bound column for the same layout."""
    sc = screen_for(base)
    out = np.empty(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        layout = layout_from_key(key, base.parallel)
        out[i] = sc.step_bound_s(layout, sc.profile(layout))
    return out


def screen_shape(base: Scenario, shape: Shape, micro_batches: tuple[int, ...],
                 space: SearchSpace, exact: bool = False, vectorized: bool = True, level: int = 1) -> np.ndarray:
    """Rows ``layout_key + (fits, peak_bytes_per_gpu, bound_step_time_s, verdict)`` (verdict: the index in
    clustersim.memory.report.VERDICTS; fits = not does-not-fit) of the layouts of ``shape`` with these micro-batch
    sizes, in the order of ``space.shape_layouts`` (the loops below are its loops; work that
    does not depend on an inner loop's option is done outside it). The bound is at ``level``
    (``Screen.step_bound_s``: 0 the kernels alone, 1 the compiled units) or, with ``exact``, at
    the second level; the sweep refines it where it matters (``exact_bounds``).
    ``vectorized``: a layout's schedules and offload options at once (``rows.VectorRows``) where its
    recompute policies are uniform (False: one by one through ``Screen.worst``, for tests)."""
    sc = screen_for(base)
    level = 2 if exact else level
    exact = level == 2
    model, tmpl = base.model, base.parallel
    gb, layers = tmpl.global_batch, model.layers
    sps = sequence_parallel_options(model, shape, space)
    zeros = zero_options(shape, space, tmpl.hsdp_replicas)
    offloads = {z: offload_options(model, space, base.cluster.host_memory_link is not None, z) for z in zeros}
    rows: list[np.ndarray] = []
    collect: VectorRows | None = None
    # the template under each recompute mode, with that mode's partial-recompute options (built once)
    by_recompute = {rec: with_recompute(tmpl, rec)
                    for rec in recompute_options(space, tmpl.overlap_moe_expert_parallel_comm)}
    for mb in micro_batches:
        nmb = gb // (shape.dp * mb)
        scheds = schedule_options(shape, nmb, layers, space, model.is_moe, tmpl.overlap_moe_expert_parallel_comm)
        profiles = [sc.profile_of(s, shape.pp, nmb, v) for s, v in scheds]
        bounds: dict[tuple[str, bool, bool], list[float]] = {}
        for zero in zeros:
            for rec in recompute_options(space, tmpl.overlap_moe_expert_parallel_comm):
                for sp in sps:
                    # the template carries the options the sweep does not search (overlaps, FSDP
                    # settings, partial recompute)
                    p0 = replace(by_recompute[rec], tp=shape.tp, pp=shape.pp, dp=shape.dp, cp=shape.cp, ep=shape.ep,
                                 expert_tp=shape.etp, sequence_parallel=sp, zero_stage=zero, micro_batch=mb,
                                 global_batch=gb, schedule="1f1b", virtual_stages=1,
                                 offload_optimizer=False)
                    uniform = uniform_policies(p0)
                    zero3 = zero == 3
                    pipe = bounds.get((rec, sp, zero3))
                    if level:
                        u = sc.classes.unit_times(p0)
                        if pipe is None:
                            slack = FIRST_SLACK if level == 1 else 1.0
                            pipe = bounds[(rec, sp, zero3)] = [sc.exact_pipe_s(p0, u, prof, nmb, sched) * slack
                                                               for (sched, _), prof in zip(scheds, profiles, strict=True)]
                    else:
                        u = sc.classes.lower_times(p0)
                        if pipe is None:
                            pipe = bounds[(rec, sp, zero3)] = [sc.kernel_pipe_s(p0, u, prof, nmb, sched)
                                                               for (sched, _), prof in zip(scheds, profiles, strict=True)]
                    key_head = (shape.tp, shape.cp, shape.pp, shape.dp, shape.ep, shape.etp, mb, zero,
                                RECOMPUTE.index(rec), int(sp))
                    fit = [recompute_fits(model, p0, shape.pp, v) for _, v in scheds]
                    r_scheds, r_profiles, r_pipe = (scheds, profiles, pipe) if all(fit) else (
                        [x for x, ok in zip(scheds, fit, strict=True) if ok],
                        [x for x, ok in zip(profiles, fit, strict=True) if ok],
                        [x for x, ok in zip(pipe, fit, strict=True) if ok])   # space.shape_layouts' rule
                    by_off = [(off, replace(p0, offload_optimizer=off) if off else p0) for off in offloads[zero]]
                    # no option: the framework offloads at none (ZeRO 0 under DeepSpeed with offload
                    # fixed), or recompute_num_layers fits no schedule's stages
                    if not by_off or not r_scheds:
                        continue
                    if uniform and not p0.offload_activations and vectorized:
                        if collect is None:
                            collect = VectorRows(sc.memory, sc)
                        collect.add(key_head, by_off, r_scheds, r_profiles, r_pipe, u, zero, exact, nmb)
                        continue
                    if collect is not None:  # keep the loops' order: what was collected goes first
                        rows.append(collect.array())
                        collect = None
                    ranks: dict[bool, dict[tuple[object, ...], tuple[int, int, int]]] = {}
                    block: list[tuple[float, ...]] = []
                    for (sched, v), prof, pipe_s in zip(r_scheds, r_profiles, r_pipe, strict=True):
                        if not schedule_zero_ok(sched, zero):
                            continue
                        for off, p in by_off:
                            pv = p if uniform else replace(p, schedule=sched, virtual_stages=v)
                            verdict, peak = sc.worst(pv, prof, ranks.setdefault(off, {}) if uniform else None)
                            bound = sc.total_s(p, u, prof, pipe_s, exact, (sched, v))
                            block.append((*key_head, SCHEDULES.index(sched), v, int(off), float(verdict != 2),
                                          float(peak), bound * (1.0 - BOUND_SLACK), float(verdict)))
                    rows.append(np.array(block, dtype=np.float64).reshape(len(block), ROW_WIDTH))
    if collect is not None:
        rows.append(collect.array())
    out = np.concatenate(rows, axis=0) if rows else np.zeros((0, ROW_WIDTH))
    sc.screen_host(out)   # the host memory of what the layouts offload (the rule run reports as memory.host)
    return out
