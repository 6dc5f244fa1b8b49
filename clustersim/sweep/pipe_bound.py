"""The pipeline term of the bound: each rank's actions one after another, after the pipeline's fill.

The compute stream of a pipeline rank runs every work unit of its actions one after another
(the closed form, ``engine.recurrence``: the rank's clock advances by each unit's time and only
waits otherwise), so with ``W_r`` the sum of rank ``r``'s action times over the step and
``F_s``/``B_s`` those of one forward / backward of chunk 0 on rank ``s``:

* rank r cannot start before micro-batch 0 has gone forward through ranks 0..r-1;
* when every rank ends with the backward of chunk 0 of the same micro-batch (GPipe, 1F1B and
  interleaved 1F1B: ``ScheduleProfile.backward_chain``), rank r-1 ends after rank r ends plus its
  own B;

so rank 0 ends no earlier than ``max_r [ sum_{s<r} (F_s + B_s) + W_r ]``: Narayanan et al.
2021's ``(m + p - 1) (t_f + t_b)`` for uniform 1F1B (arXiv 2104.04473, §2.2.1), with the
interleaved schedule's fill shortened to one chunk (§2.2.2) and one pipeline transfer per hop at
the fastest boundary's time. An action lasts at least ``action_s`` of its units (under ZeRO-3
its parameter gathers on the rank's one data-parallel stream); the zero-bubble and DualPipe ranks
start no earlier than the forward chains their first action awaits (``programs.start_paths``).
Every term is a sum of lower bounds of the closed form's, so the result is a lower bound on when
rank 0's last action ends (``screen.Screen.total_s`` adds the step's other terms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from clustersim.sweep.profiles import ScheduleProfile
from clustersim.sweep.unit_times import UnitTimes

# The bound is compared with floating-point sums taken in another order: shave a little off so
# that a layout whose step time equals its bound is never pruned by rounding.
BOUND_SLACK = 1e-9
# The first level of the bound sums the same seconds in yet another order than the second: shave
# a little more off, so that it never exceeds the second by rounding (the lazy branch and bound
# relies on first <= second).
FIRST_SLACK = 1.0 - 1e-9
# and the kernels-only level (0) a little more again, below the first (compiled units) level
KERNEL_SLACK = 1.0 - 3e-9


@dataclass(frozen=True, slots=True)
class Extra:
    """Per micro-batch seconds that the bound adds for one layout's DP and pipeline groups: the
    ZeRO-3 parameter gather of each unit (before its forward and again before its backward;
    0 below ZeRO-3) and one pipeline transfer."""

    gather_layer_s: float = 0.0
    gather_first_s: float = 0.0
    gather_last_s: float = 0.0
    p2p_s: float = 0.0
    backward_gathers: int = 1  # gathers of a unit in each backward (plan.zero3.zero3_backward_gathers)


def action_s(n: int, c: float, g: float, extra_c: float = 0.0, extra_g: float = 0.0,
              extra_min_c: float | None = None, extra_min_g: float | None = None) -> float:
    """Least duration of one action over ``n`` layers (compute ``c``, ZeRO-3 gather ``g`` each)
    plus an embedding/output unit (``extra_*``).

    ``engine.recurrence``: at the action's start the DP stream is given every unit's gather, in
    order; a unit computes once its gather is done. So the action lasts at least the first
    gather plus all compute, and all gathers plus the last unit's compute. Without ZeRO-3 the
    gathers are 0 and this is the compute.
    """
    total_c = n * c + extra_c
    total_g = n * g + extra_g
    min_g = min([g] * (n > 0) + ([extra_min_g] if extra_min_g is not None else []), default=0.0)
    min_c = min([c] * (n > 0) + ([extra_min_c] if extra_min_c is not None else []), default=0.0)
    return max(total_c + min_g, total_g + min_c)


def pipeline_bound_s(u: UnitTimes, x: Extra, profile: ScheduleProfile, num_micro_batches: int) -> float:
    """``max_r [fill_r + W_r]`` (module docstring), without the optimizer; every action lasts at
    least ``action_s``."""
    if x.gather_layer_s == 0.0 and x.gather_first_s == 0.0 and x.gather_last_s == 0.0:
        return plain_bound_s(u, x.p2p_s, profile, num_micro_batches)
    pp = len(profile.ranks)
    f, b, g = u.layer_f_s, u.layer_b_s, x.gather_layer_s
    k = x.backward_gathers
    if k != 1:  # B actions: k gathers per unit; compute after the last gather unknown: take none
        return bound_with_backward_gathers(u, x, profile, num_micro_batches)
    n0, nl = profile.first_layers, profile.last_layers
    single = pp == 1 and len(profile.plain_chunks[0]) == 0 and n0 == profile.ranks[0][0]  # one chunk, both ends
    if single:
        ef, eb = u.first_f_s + u.last_f_s, u.first_b_s + u.last_b_s
        eg = x.gather_first_s + x.gather_last_s
        first_f = action_s(n0, f, g, ef, eg, min(u.first_f_s, u.last_f_s), min(x.gather_first_s, x.gather_last_s))
        first_b = action_s(n0, b, g, eb, eg, min(u.first_b_s, u.last_b_s), min(x.gather_first_s, x.gather_last_s))
    else:
        first_f = action_s(n0, f, g, u.first_f_s, x.gather_first_s, u.first_f_s, x.gather_first_s)
        first_b = action_s(n0, b, g, u.first_b_s, x.gather_first_s, u.first_b_s, x.gather_first_s)
    last_f = action_s(nl, f, g, u.last_f_s, x.gather_last_s, u.last_f_s, x.gather_last_s)
    last_b = action_s(nl, b, g, u.last_b_s, x.gather_last_s, u.last_b_s, x.gather_last_s)
    best = 0.0
    fill = 0.0  # rank r starts after chunk 0's F on ranks < r (and ends before their B: the chain)
    # action_s of a forward / backward over n layers, once per n (ranks share them)
    sizes = {n for chunks in profile.plain_chunks for n, _ in chunks} | set(profile.chunk0_layers)
    fwd = {n: action_s(n, f, g) for n in sizes}
    bwd = {n: action_s(n, b, g) for n in sizes}
    af, ab = fwd.__getitem__, bwd.__getitem__
    for r in range(pp):
        work = sum(k * (af(n) + ab(n)) for n, k in profile.plain_chunks[r])
        if r == 0:
            work += first_f + first_b
        if r == pp - 1 and not single:
            work += last_f + last_b
        best = max(best, fill + num_micro_batches * work)
        c0 = profile.chunk0_layers[r]
        fill += (first_f if r == 0 else af(c0)) + x.p2p_s
        if profile.backward_chain:
            fill += (first_b if r == 0 else ab(c0)) + x.p2p_s
    return best


def bound_with_backward_gathers(u: UnitTimes, x: Extra, profile: ScheduleProfile, num_micro_batches: int) -> float:
    """``pipeline_bound_s`` when a backward gathers each unit 0 or 2 times: forwards as in
    ``action_s``; a backward lasts at least its compute plus its first unit's first gather, and
    at least all its gathers (the compute after the last one is not counted: a bound)."""
    pp = len(profile.ranks)
    f, b, g, k = u.layer_f_s, u.layer_b_s, x.gather_layer_s, x.backward_gathers

    def fwd(n: int, ec: float, eg: float) -> float:
        return action_s(n, f, g, ec, eg, ec if n == 0 else None, eg if n == 0 else None)

    def bwd(n: int, ec: float, eg: float) -> float:
        if k == 0:
            return n * b + ec
        first_g = g if n else eg
        return max(n * b + ec + first_g, k * (n * g + eg))

    best = fill = 0.0
    for r, (held, _) in enumerate(profile.ranks):
        ec_f = (u.first_f_s if r == 0 else 0.0) + (u.last_f_s if r == pp - 1 else 0.0)
        ec_b = (u.first_b_s if r == 0 else 0.0) + (u.last_b_s if r == pp - 1 else 0.0)
        eg = (x.gather_first_s if r == 0 else 0.0) + (x.gather_last_s if r == pp - 1 else 0.0)
        work = fwd(held, ec_f, eg) + bwd(held, ec_b, eg)
        best = max(best, fill + num_micro_batches * work)
        c0 = profile.chunk0_layers[r]
        fill += c0 * f + x.p2p_s
        if profile.backward_chain:
            fill += c0 * b + x.p2p_s
    return best


def plain_bound_s(u: UnitTimes, p2p_s: float, profile: ScheduleProfile, num_micro_batches: int,
                   fill_first: bool = True) -> float:
    """``pipeline_bound_s`` without ZeRO-3 gathers: every action lasts its compute, so a rank's
    work is its layers times (F + B) plus the embedding / output units. ``fill_first=False``
    leaves the embedding out of the fill (``first_level_pipe_s``)."""
    layer = u.layer_f_s + u.layer_b_s
    first = u.first_f_s + u.first_b_s
    last = u.last_f_s + u.last_b_s
    chain = profile.backward_chain
    step_layer = layer if chain else u.layer_f_s
    step_first = first if chain else u.first_f_s
    hop = 2 * p2p_s if chain else p2p_s
    best = fill = 0.0
    c0 = profile.chunk0_layers
    emb_f = u.first_f_s if fill_first else 0.0
    for r, (held, _) in enumerate(profile.ranks):
        work = held * layer
        if profile.firsts[r]:
            work += first
        if profile.lasts[r]:
            work += last
        if profile.starts:  # the zero-bubble and DualPipe programs: the chains the rank's first action awaits
            fill = max((n * u.layer_f_s + e * emb_f + h * u.last_f_s + k * p2p_s for n, e, h, k in profile.starts[r]),
                       default=0.0)
        total = fill + num_micro_batches * profile.share * work
        if total > best:
            best = total
        if profile.fill:
            fill += c0[r] * step_layer + hop + (step_first if r == 0 and fill_first else 0.0)
    return best


def first_level_pipe_s(u: UnitTimes, p2p_s: float, profile: ScheduleProfile, num_micro_batches: int,
                       zero3: bool) -> float:
    """The first level of ``pipeline_bound_s``: no ZeRO-3 gathers at all (every action lasts at
    least its compute, ``action_s``), and under ZeRO-3 no embedding in the fill (as
    ``bound_with_backward_gathers`` counts it), so that with ``u`` at most the class's unit
    times it is at most ``pipeline_bound_s`` of any ZeRO stage (tests/sweep/test_lazy_bound.py)."""
    return plain_bound_s(u, p2p_s, profile, num_micro_batches, fill_first=not zero3)


class WaitTerms(NamedTuple):
    """What ``Screen.wait_floor_s`` reads of a layout (the same for layouts that differ only in
    schedule or offload options): the plan's wait fraction for the slowest GPU at the layout's
    GPU count and a layer's kernel seconds (forward and backward) in its class; the least issue
    deficit a MoE layer pays by itself per micro-batch (``unit_times.moe_sync_s``); the step's
    synchronising calls without their barrier (``plan.step_terms.fixed_host_s``)."""

    frac: float = 0.0
    layer_s: float = 0.0
    moe_sync_s: float = 0.0
    fixed_s: float = 0.0


def wait_floor_of(terms: WaitTerms, profile: ScheduleProfile, num_micro_batches: int) -> float:
    """``Screen.wait_floor_s`` from its ``wait_terms`` and the schedule's profile: the waits of
    the rank that runs the fewest layers and the fewest MoE layers."""
    runs = profile.share * num_micro_batches
    jitter = terms.frac * profile.least_layers * terms.layer_s if terms.frac > 0.0 else 0.0
    return runs * (jitter + profile.least_moe_layers * terms.moe_sync_s) + terms.fixed_s
