"""Identical steady-state micro-batches, computed once: periodic extrapolation of the recurrence.

In the steady state of a pipeline schedule every rank repeats the same actions with the
micro-batch index advanced: 1F1B alternates one forward and one backward (period P = 2 actions,
M = 1 micro-batch), interleaved 1F1B cycles ``pp`` micro-batches through every chunk (P = 2 pp v,
M = pp), GPipe runs forwards then backwards (P = 1, M = 1). The recurrence is a max-plus system
(start = max(stream free, input arrived) + duration) and such a system, driven by a periodic
input, becomes periodic after a transient: once the whole state at a cut - every rank's clock,
its streams' busy time, the inputs in flight, the links' busy time - equals the state one period
earlier shifted by a time T, every later period repeats it shifted by T again, for as long as the
actions keep repeating (Baccelli, Cohen, Olsder, Quadrat, "Synchronization and Linearity", 1992,
ch. 3: cyclicity of max-plus linear systems).

``run_collapsed`` runs the recurrence period by period through the steady state; when two
consecutive cuts agree (within a relative 1e-12: rounding), it jumps over all the periods the
schedule still repeats, adding K x T to every time and K x the period's seconds to every cause.
Values that can no longer matter (a stream or link that was free before its rank's clock, an
input that arrived before its consumer was ready) are compared as "free now", so that stale
history does not prevent the jump. The result equals running every micro-batch to rounding
(tests/engine/test_fast_paths.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from clustersim.engine.recurrence import Recurrence
from clustersim.plan.step_plan import RankAction, SimRank, StepPlan, classic_actions, classic_final

REL_TOL = 1e-12


def rooms(rk: SimRank, period: int, shift: int) -> list[int]:
    """For each action index i: how many consecutive actions from i are followed, ``period``
    actions later, by the same action ``shift`` micro-batches on (and not a chunk's last backward,
    and holding its rank after its sends as that action does: ``SimRank.blocks_from``)."""
    return _rooms(rk.actions, rk.final_b, period, shift, rk.blocks_from)


def _rooms(acts: tuple[RankAction, ...], final_b: frozenset[int], period: int, shift: int,
           blocks_from: int) -> list[int]:
    n = len(acts)
    out = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        j = i + period
        same = (j < n and acts[j].kind == acts[i].kind and acts[j].chunk == acts[i].chunk
                and acts[j].micro_batch == acts[i].micro_batch + shift and j not in final_b
                and (j >= blocks_from) == (i >= blocks_from))
        out[i] = out[i + 1] + 1 if same else 0
    return out


@dataclass(frozen=True, slots=True)
class Cut:
    """The state of a recurrence at a cut (per-rank action indices)."""

    nxt: tuple[int, ...]
    clocks: tuple[float, ...]
    causes: tuple[dict[str, float], ...]
    relative: tuple      # everything later actions can see, relative to the clocks
    arrivals: dict       # key -> (send start, arrival), relative to the consumer's clock


def _rel(value: float, clock: float) -> float:
    return value - clock if value > clock else 0.0


def snapshot(rec: Recurrence) -> Cut:
    plan = rec.plan
    rel: list[object] = []
    for state in rec.ranks:
        c = state.clock
        for name in ("dp", "rs"):
            s = state.streams[name]
            rel.append(_rel(s.free_s, c))
            rel.append(tuple((_rel(a, c), _rel(b, c), cause) for a, b, cause in s.busy if b > c))
        rel.append(_rel(max(state.pending, default=0.0), c))
    for (k, _, _), t in sorted(rec.param_ready.items()):
        rel.append(_rel(t or 0.0, rec.ranks[k].clock))
    for (k, tier), t in sorted(rec.link_free.items()):
        rel.append((tier, _rel(t, rec.ranks[k].clock)))
    arrivals = {}
    for key, (sent, arrived) in rec.arrival.items():
        c = rec.ranks[plan.rank_of(key[1], key[2])].clock
        arrivals[key] = (_rel(sent, c), _rel(arrived, c))
    return Cut(tuple(rec.nxt), tuple(s.clock for s in rec.ranks), tuple(dict(s.causes) for s in rec.ranks),
               tuple(rel), arrivals)


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= REL_TOL * scale


def _same(x: object, y: object, scale: float) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return _close(x, y, scale)
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(_same(a, b, scale) for a, b in zip(x, y, strict=True))
    return x == y


def period_shift(before: Cut, after: Cut, shift: int) -> float | None:
    """T if ``after`` is ``before`` advanced by one period (micro-batches + ``shift``, times + T)."""
    scale = max(1.0, *(abs(c) for c in after.clocks))
    t = after.clocks[0] - before.clocks[0]
    if t <= 0 or any(not _close(b - a, t, scale) for a, b in zip(before.clocks, after.clocks, strict=True)):
        return None
    if not _same(before.relative, after.relative, scale):
        return None
    if len(before.arrivals) != len(after.arrivals):
        return None
    for (kind, klass, g, mb), value in before.arrivals.items():
        other = after.arrivals.get((kind, klass, g, mb + shift))
        if other is None or not _same(value, other, scale):
            return None
    return t


def jump(rec: Recurrence, before: Cut, after: Cut, periods: int, t: float, period: int, shift: int) -> None:
    """Advance ``rec`` (at ``after``) by ``periods`` more periods of length ``t``."""
    dt = periods * t
    for k, state in enumerate(rec.ranks):
        c = state.clock
        for name in ("dp", "rs"):
            s = state.streams[name]
            if s.free_s > c:
                s.free_s += dt
            s.busy = [(a + dt, b + dt, cause) for a, b, cause in s.busy if b > c]
        state.pending = [p + dt if p > c else p for p in state.pending]
        for cause, sec in after.causes[k].items():
            state.causes[cause] = sec + periods * (sec - before.causes[k][cause])
        state.clock = c + dt
        rec.nxt[k] += periods * period
    for (k, tier), v in list(rec.link_free.items()):
        if v > after.clocks[k]:
            rec.link_free[(k, tier)] = v + dt
    rec.arrival = {(kind, klass, g, mb + periods * shift): (sent + dt, arrived + dt)
                   for (kind, klass, g, mb), (sent, arrived) in rec.arrival.items()}
    rec.sends += [(k, (kind, klass, g, mb + periods * shift), start + dt, end + dt)
                  for k, (kind, klass, g, mb), start, end in rec.sends if end > after.clocks[k]]


def starts(room: list[int], period: int) -> list[int]:
    """For each index i: the first index j >= i from which at least two periods repeat (len: none)."""
    out = [len(room) - 1] * len(room)
    nxt = len(room) - 1
    for i in range(len(room) - 1, -1, -1):
        if room[i] >= 2 * period:
            nxt = i
        out[i] = nxt
    return out


def _tables(plan: StepPlan) -> tuple[list[list[int]], list[list[int]]]:
    """Per rank: ``rooms`` and ``starts`` of its actions, once per plan (kept in the plan's memo);
    a rank whose actions are a classic schedule's takes them from ``_classic_tables``."""
    tables = plan.memo.collapse_tables
    if tables is None:
        p, m = plan.period
        both = [_classic_tables(rk.schedule_key, p, m, rk.blocks_from) if rk.schedule_key is not None
                else _rank_tables(rk, p, m) for rk in plan.ranks]
        tables = plan.memo.collapse_tables = ([r for r, _ in both], [f for _, f in both])
    return tables


def _rank_tables(rk: SimRank, period: int, shift: int) -> tuple[list[int], list[int]]:
    room = rooms(rk, period, shift)
    return room, starts(room, period)


@functools.lru_cache(maxsize=1024)
def _classic_tables(key: tuple[str, int, int, int, int], period: int, shift: int,
                    blocks_from: int) -> tuple[list[int], list[int]]:
    """``rooms`` and ``starts`` of rank ``key[4]`` of the classic schedule ``key[:4]``
    (clustersim.plan.step_plan.classic_actions) whose sends hold it from action ``blocks_from``: a
    pure function of integers, memoised for every plan with that schedule (the lists are read,
    never written)."""
    schedule, pp, m, v, rank = key
    room = _rooms(classic_actions(schedule, pp, m, v, 0)[rank], classic_final(schedule, pp, m, v)[rank], period,
                  shift, blocks_from)
    return room, starts(room, period)


def run_collapsed(rec: Recurrence, ends: list[int] | None = None) -> int:
    """Run ``rec`` up to ``ends`` (per-rank action limits; None: the whole schedule), jumping over
    steady-state periods. Returns the number of periods skipped. Stops early (without error) when
    no rank can move; the caller finishes the step."""
    plan = rec.plan
    period, shift = plan.period
    if period <= 0:
        return 0
    n = len(plan.ranks)
    limit = [len(rk.actions) if ends is None else min(ends[k], len(rk.actions)) for k, rk in enumerate(plan.ranks)]
    room, first = _tables(plan)
    skipped = 0

    def usable(k: int, i: int) -> int:
        """Periods that may be jumped from a cut at action i of rank k (0: not in a steady stretch)."""
        return min(room[k][i] // period, (limit[k] - i) // period - 1) if i < limit[k] else 0

    while True:
        f = list(rec.nxt)
        if all(usable(k, f[k]) >= 2 for k in range(n)):
            before = snapshot(rec)
            rec.advance([f[k] + period for k in range(n)])
            if all(rec.nxt[k] == f[k] + period for k in range(n)):
                after = snapshot(rec)
                t = period_shift(before, after, shift)
                if t is not None:
                    periods = min(usable(k, f[k]) for k in range(n))
                    if periods > 0:
                        jump(rec, before, after, periods, t, period, shift)
                        skipped += periods
            continue
        # not every rank is inside a steady stretch: run those outside towards the next one,
        # hold those inside (a period at a time if the others need them to move)
        targets = []
        for k in range(n):
            if usable(k, f[k]) >= 2:
                targets.append(f[k])
                continue
            nxt = first[k][f[k] + 1] if f[k] + 1 < len(first[k]) else limit[k]
            if nxt >= limit[k] or usable(k, nxt) < 2:
                return skipped
            targets.append(nxt)
        if not rec.advance(targets) and not rec.advance([min(f[k] + period, limit[k]) for k in range(n)]):
            return skipped
