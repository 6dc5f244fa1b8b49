"""The screen's rows of a task's layouts, their memory computed on arrays, to the byte.

``VectorRows`` collects the rows of the layouts whose recompute policies are uniform and that
offload no activations, layout by layout (each with its bound), and gives them their memory at
the end, all at once: the arithmetic of ``memory_screen.MemoryModel.rank_key``
(``memory.activations.combine``, ``memory.report.offload``, ``peak_numbers``, ``verdict_index``)
on arrays of the ranks that can hold the peak, to the byte (tests/sweep/test_lazy_bound.py
compares it with ``Screen.worst`` row by row).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from clustersim.memory.allocator import FRAGMENTATION
from clustersim.memory.buffers import CUBLAS_WORKSPACE_BYTES, CUDA_CONTEXT_BYTES
from clustersim.memory.report import gpu_states
from clustersim.parallel.layout import SCHEDULES, ParallelLayout
from clustersim.sweep.memory_screen import MemoryModel
from clustersim.sweep.pipe_bound import BOUND_SLACK, WaitTerms, wait_floor_of
from clustersim.sweep.profiles import ScheduleProfile
from clustersim.sweep.space import schedule_zero_ok
from clustersim.sweep.unit_times import UnitTimes


class Bounds(Protocol):
    """What the rows read of the bound (``screen.Screen``)."""

    def total_s(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile, pipe_s: float,
                exact: bool, schedule: tuple[str, int]) -> float: ...

    def step_terms(self, layout: ParallelLayout, u: UnitTimes, profile: ScheduleProfile) -> tuple[float, float]: ...

    def wait_terms(self, layout: ParallelLayout) -> WaitTerms: ...


# The columns of a screened row: the layout key (clustersim.sweep.evaluate.KEY_FIELDS, 13: the
# last is offload_optimizer), then fits, peak bytes per GPU, the bound and the memory verdict
# (SCREEN_FIELDS)
ROW_WIDTH = 17
KEY_WIDTH = 13
RECOMPUTE_COL, SEQUENCE_PARALLEL_COL, OFFLOAD_OPTIMIZER_COL = 8, 9, 12
FITS_COL = 13

# A peak and its verdict in one int64 that orders like (verdict, peak): peaks stay below 2**50
# (MAX_SIZE_BYTES, clustersim.limits), verdicts are 0-2.
_VERDICT_SCALE = 2**53


class VectorRows:
    """Rows of a task's layouts with uniform recompute policies and no activation offload,
    collected layout by layout and given their memory at the end, all at once: the arithmetic of
    ``MemoryModel.rank_key`` (``memory.activations.combine``, ``memory.report.offload``,
    ``peak_numbers``, ``verdict_index``) on arrays of the ranks that can hold the peak, to the
    byte (tests/sweep/test_lazy_bound.py compares it with ``Screen.worst`` row by row). Each
    (layout row, rank) pair is kept as two indices: the rank's schedule-dependent numbers
    (``dyn``) and the layout's static parts of that rank (``static``), both stored once."""

    def __init__(self, memory: MemoryModel, bounds: Bounds) -> None:
        self.memory, self.bounds = memory, bounds
        self.rows: list[tuple[float, ...]] = []
        self.dyn_of: list[int] = []      # per pair: its row of self.dyn
        self.static_of: list[int] = []   # per pair: its row of self.static
        self.dyn: list[tuple[float, ...]] = []
        self.static: list[tuple[float, ...]] = []
        self.starts: list[int] = []
        # per schedule profile, (schedule, virtual stages, micro-batches): its ranks' rows of dyn
        self._ranks: dict[tuple[str, int, int], list[tuple[int, tuple[object, ...], int]]] = {}
        # the optimizer step and tail of the bound per (profile, layout) of one micro-batch size
        # and ZeRO stage: they read the class only through its parameter counts (``total_s``),
        # which recompute and sequence parallelism leave alone
        self._steps: dict[tuple[object, ...], tuple[float, float, float]] = {}

    def _profile_ranks(self, key: tuple[str, int, int], prof: ScheduleProfile
                       ) -> list[tuple[int, tuple[object, ...], int]]:
        """Per rank of profile ``key`` that can hold the peak: its row of ``dyn`` ((held, in
        flight, ends, first, last)), the key of its static parts, the rank."""
        out = self._ranks.get(key)
        if out is None:
            out = self._ranks[key] = []
            for r in prof.check_ranks:
                out.append((len(self.dyn), (prof.ranks[r][0], prof.moe_held[r], prof.firsts[r], prof.lasts[r]), r))
                self.dyn.append((float(prof.ranks[r][0]), float(prof.ranks[r][1]), float(prof.ends[r][0]),
                                 float(prof.ends[r][1]), float(prof.firsts[r]), float(prof.lasts[r])))
        return out

    def add(self, key_head: tuple[int, ...], by_off: list[tuple[bool, ParallelLayout]],
            scheds: list[tuple[str, int]], profiles: list[ScheduleProfile], pipe: list[float], u: UnitTimes,
            zero: int, exact: bool, num_micro_batches: int) -> None:
        """The rows of one layout's schedules and offload options, in the order of the loops."""
        bounds = self.bounds
        memory = self.memory
        uparams = (u.layer_params, u.first_params, u.last_params, u.layer_all_params, u.moe_all_params,
                   u.layer_expert_params, u.layer_all_expert_params, u.moe_all_expert_params)
        # per offload option: its layout, its static parts by rank key, the memory keys it gives
        # every rank, and what the cache of step terms reads of it
        statics = [(off, p, {}, memory.layout_keys(p), (off, p.dp, p.cp, p.edp, p.zero_stage, uparams))
                   for off, p in by_off]
        waits = bounds.wait_terms(statics[0][1])
        rows, starts, dyn_of, static_of, static = self.rows, self.starts, self.dyn_of, self.static_of, self.static
        steps = self._steps
        slack = 1.0 - BOUND_SLACK
        for (sched, v), prof, pipe_s in zip(scheds, profiles, pipe, strict=True):
            if not schedule_zero_ok(sched, zero):
                continue
            pkey = (sched, v, num_micro_batches)
            ranks = self._profile_ranks(pkey, prof)
            dyns = [dyn for dyn, _, _ in ranks]
            head = (*key_head, SCHEDULES.index(sched), v)
            # the waits for the slowest GPU and the host read the layout only through its class
            # and GPU count, which the schedules and offload options share
            wait_s = None if exact else wait_floor_of(waits, prof, num_micro_batches)
            for off, p, parts, keys, tail in statics:
                starts.append(len(dyn_of))
                for _, key, r in ranks:
                    c = parts.get(key)
                    if c is None:
                        st, _, buf, pol, units, factors = memory.static_parts(p, r, key[0], key[2], key[3], key[1],
                                                                              keys)
                        w, g, o = gpu_states(p, st)   # memory.report.offload's rule
                        per = dict(units.per_policy)[p.recompute] if pol.counts else 0.0
                        c = parts[key] = len(static)
                        # the sweep's candidates split evenly, MTP modules on the last stage with the output
                        # (activations.combine's default, in its order), so their layers' bytes go with the output's
                        static.append((w, g, o, buf[0], buf[1], buf[2], per, units.embedding,
                                       units.output + units.mtp, units.working, units.loss, *factors,
                                       units.grad_cast, units.vocab_grad_cast, buf[3]))
                    static_of.append(c)
                dyn_of.extend(dyns)
                if exact:
                    bound = bounds.total_s(p, u, prof, pipe_s, exact, (sched, v))
                else:  # total_s below the second level
                    skey = (pkey, tail)
                    terms = steps.get(skey)
                    if terms is None:
                        terms = steps[skey] = bounds.step_terms(p, u, prof)
                    bound = (bounds.with_terms(p, u, prof, pipe_s, terms) if terms[2]
                             else pipe_s + terms[0] + terms[1]) + wait_s
                rows.append((*head, int(off), bound * slack))

    def array(self) -> np.ndarray:
        """The collected rows (KEY_FIELDS + SCREEN_FIELDS)."""
        if not self.rows:
            return np.zeros((0, ROW_WIDTH))
        d = np.array(self.dyn, dtype=np.float64)[np.array(self.dyn_of, dtype=np.int64)]
        held, k, e0, e1 = d[:, 0], d[:, 1], d[:, 2], d[:, 3]
        first, last = d[:, 4] == 1.0, d[:, 5] == 1.0
        a = np.array(self.static, dtype=np.float64)[np.array(self.static_of, dtype=np.int64)]
        w, g, o, buf0, buf1, nccl = (a[:, i].astype(np.int64) if i in (0, 1, 2, 5) else a[:, i] for i in range(6))
        per, emb, outb, working, loss, lo, hi, cast, vcast = (a[:, i] for i in range(6, 15))
        step_end = a[:, 15].astype(np.int64)
        act = np.where(held > 0, held * per, 0.0) * k                       # combine
        act = np.where(first, act + emb * e0, act)
        act = np.where(last, act + outb * e1, act)
        busy = (held > 0) & (k != 0.0)
        trans = np.where(busy, working + buf1, 0.0)
        trans = np.where(busy & last, np.maximum(trans, loss), trans)
        cast = np.where(first | last, np.maximum(cast, vcast), cast)
        trans = np.where((cast > 0) & (k != 0.0), np.maximum(trans, cast - np.where(held > 0, held * per, 0.0)), trans)
        states_b = w + g + o                                                # peak_numbers
        held_b = np.rint(act).astype(np.int64) + np.rint(trans).astype(np.int64) + np.rint(buf0).astype(np.int64)
        allocated = states_b + np.maximum(held_b, step_end) + CUBLAS_WORKSPACE_BYTES
        frag = np.rint(np.maximum(0.0, (held_b + CUBLAS_WORKSPACE_BYTES).astype(np.float64)) * FRAGMENTATION
                       ).astype(np.int64) + np.minimum(held_b, step_end)
        outside = CUDA_CONTEXT_BYTES + nccl
        lo_b = np.rint((allocated + outside).astype(np.float64) * lo).astype(np.int64)
        hi_b = np.rint((allocated + frag + outside).astype(np.float64) * hi).astype(np.int64)
        peak = allocated + frag + outside
        cap = self.memory.capacity
        verdict = np.where(lo_b > cap, 2, np.where(hi_b <= cap, 0, 1))     # verdict_index
        worst = np.maximum.reduceat(verdict * _VERDICT_SCALE + peak, np.array(self.starts))
        v_w, peak_w = worst // _VERDICT_SCALE, worst % _VERDICT_SCALE
        rows = np.array(self.rows, dtype=np.float64)
        out = np.empty((len(self.rows), ROW_WIDTH))
        out[:, :13] = rows[:, :13]
        out[:, 13] = v_w != 2
        out[:, 14] = peak_w
        out[:, 15] = rows[:, 13]
        out[:, 16] = v_w
        return out
