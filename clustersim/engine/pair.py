"""An overlapped pair of actions: the forward of one micro-batch beside the backward of another.

DualPipe (DeepSeek-V3, arXiv 2412.19437 §3.2.1, Figure 4) and Megatron's EP all-to-all overlap
(``--overlap-moe-expert-parallel-comm``) run a forward chunk and a backward chunk together so
that each one's communication (the EP dispatch and combine above all) hides behind the other's
computation. Each action is a *chain* of segments, computation and communication alternating in
its own order (a chain waits for its collective before its next computation). Two resources run
the segments: the compute stream and one communication stream (DeepEP's / NCCL's kernels on the
SMs set aside for them). Whenever a resource is free it takes the ready segment of the chain
that became ready first (ties: the forward chain); computation runs slower while a collective
is in flight beside it (clustersim.plan.overlap, the SMs the communication kernels hold:
DeepSeek-V3 gives 20 of the H800's 132 SMs to communication, §3.2.2).

The pair runs the same units as the two actions alone, so their data-parallel collectives stay
where they are without the pair (docs/moe.md, "EP overlap and data parallelism"): a chain holds a
``dp`` segment before a unit whose parameters it waits for (ZeRO-3 gathers, overlapped parameter
gathers) and after a unit whose gradients it launches (gradient buckets of a stage's last
backward, ZeRO-3 reduce-scatters); ``pair_side`` says where. A ``dp`` segment holds neither
resource: the engine launches the unit's collectives on the data-parallel streams, or makes the
chain wait for its parameters, and the other chain goes on meanwhile.

``PairCore`` holds the decisions; the closed form (``pair_timing``) and the event engine drive
it with their own clocks, so that with no other traffic they agree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clustersim.collectives import CollectivePlan
from clustersim.plan.compiled_unit import CompiledUnit
from clustersim.plan.data_parallel import DpPlan
from clustersim.plan.overlap import Interval, compute_rate
from clustersim.plan.step_plan import RankAction, SimRank

Resolve = Callable[[int, "Segment"], bool]   # (chain, dp segment) -> whether the chain must wait (for what: the engine's)


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str          # "compute" | "comm" | "dp"
    time_s: float      # contention-free duration (compute: at full rate)
    cause: str
    plan: CollectivePlan | None = None
    unit: int = -1     # "dp": the position of the unit in the chain's units
    before: bool = False   # "dp": before the unit (its parameters) or after it (its gradients)


@dataclass(frozen=True, slots=True)
class PairSide:
    """One action of a pair with the positions of its data-parallel work (module docstring):
    ``units`` in the order they run (a ZeRO-3 backward that gathers twice per unit: each unit's
    recomputed forward and its backward proper), ``waits`` the positions whose parameters are
    gathered before them, ``launches`` position -> the unit whose gradients are reduced after it."""

    units: tuple[CompiledUnit, ...]
    waits: frozenset[int]
    launches: dict[int, int]


def pair_side(rk: SimRank, x: RankAction, dp: DpPlan, gathered: bool) -> PairSide:
    """The side of a pair that action ``x`` of rank ``rk`` runs, with the data-parallel work its
    units do alone (``gathered``: the forward units' parameters were all-gathered at the step's
    start, overlap_param_gather). One rule for both engines."""
    g, part = x.stage, x.part
    units = tuple(rk.units[(g, part)])
    n = len(units)
    z3 = dp.zero3
    if z3 is not None:
        if part == "F":
            return PairSide(units, frozenset(range(n)), {})
        split = part == "B" and z3.backward_gathers == 2
        if split:
            units = tuple(half for b in range(n) for half in rk.split[(g, b)])
            return PairSide(units, frozenset(range(2 * n)), {2 * b + 1: b for b in range(n)})
        waits = frozenset(range(n)) if part == "B" and z3.backward_gathers else frozenset()
        return PairSide(units, waits, {b: b for b in range(n)})
    if part == "F":
        return PairSide(units, frozenset(range(n)) if gathered else frozenset(), {})
    launches = {b: b for b in range(n) if dp.grad_buckets.get((g, b))} if dp.reduces(part, x.final) else {}
    return PairSide(units, frozenset(), launches)


def chain_of(units: list[CompiledUnit] | PairSide) -> tuple[Segment, ...]:
    """An action's units as one chain: kernels and collectives in order (a collective that the
    unit would overlap with later kernels is waited for here: the other chain fills the gap), with
    a ``dp`` segment at each position of a ``PairSide`` that waits for or launches collectives."""
    side = units if isinstance(units, PairSide) else PairSide(tuple(units), frozenset(), {})
    out: list[Segment] = []
    for k, unit in enumerate(side.units):
        if k in side.waits:
            out.append(Segment("dp", 0.0, "dp_comm", unit=k, before=True))
        for s in unit.steps:
            if s.join >= 0:
                continue
            if s.plan is None:
                if out and out[-1].kind == "compute":
                    out[-1] = Segment("compute", out[-1].time_s + s.time_s, "compute")
                else:
                    out.append(Segment("compute", s.time_s, "compute"))
            elif s.time_s > 0:
                out.append(Segment("comm", s.time_s, s.cause, s.plan))
        if k in side.launches:
            out.append(Segment("dp", 0.0, "dp_comm", unit=k))
    return tuple(out)


class PairCore:
    """Which segment each resource starts next."""

    def __init__(self, chains: tuple[tuple[Segment, ...], tuple[Segment, ...]], now: float) -> None:
        self.chains = chains
        self.pos = [0, 0]
        self.ready = [now, now]
        self.busy = {"compute": False, "comm": False}
        self.going_on = -1   # the chain whose computation has just ended (until the next startable)

    @property
    def done(self) -> bool:
        return all(self.pos[c] >= len(self.chains[c]) for c in (0, 1))

    def startable(self, resolve: Resolve | None = None) -> list[tuple[str, int, Segment]]:
        """(resource, chain, segment) to start now; marks them running. A chain at a ``dp``
        segment hands it to ``resolve`` (which launches its collectives): unless that says to
        wait, it goes straight on; else ("dp", chain, segment) runs until the engine finishes it."""
        out = []
        moved = True
        while moved:
            moved = False
            for c in (0, 1):
                p = self.pos[c]
                if 0 <= p < len(self.chains[c]) and self.chains[c][p].kind == "dp":
                    seg = self.chains[c][p]
                    if resolve is None or not resolve(c, seg):
                        self.pos[c] = p + 1
                        moved = True
                    else:
                        self.pos[c] = -p - 1
                        out.append(("dp", c, seg))
        for res in ("compute", "comm"):
            if self.busy[res]:
                continue
            cands = [(self.ready[c], c) for c in (0, 1) if self.pos[c] < len(self.chains[c])
                     and self.pos[c] >= 0 and self.chains[c][self.pos[c]].kind == res]
            if res == "compute" and any(c == self.going_on for _, c in cands):
                cands = [(0.0, self.going_on)]   # a dp segment that did not wait does not break a computation
            if cands:
                _, c = min(cands)
                self.busy[res] = True
                seg = self.chains[c][self.pos[c]]
                self.pos[c] = -self.pos[c] - 1     # running: negative until finished
                out.append((res, c, seg))
        self.going_on = -1
        return out

    def finish(self, res: str, chain: int, now: float) -> None:
        if res in self.busy:
            self.busy[res] = False
        if res == "compute":
            self.going_on = chain
        self.pos[chain] = -self.pos[chain] - 1 + 1
        self.ready[chain] = now

    def waiting_cause(self) -> str:
        """What the compute stream waits for when it is idle inside the pair."""
        for c in (0, 1):
            p = self.pos[c]
            if p < 0:
                seg = self.chains[c][-p - 1]
                if seg.kind in ("comm", "dp"):
                    return seg.cause
        return "compute"


def pair_timing(chains: tuple[tuple[Segment, ...], tuple[Segment, ...]], start_s: float,
                external: list[Interval], slowdown: float,
                resolve: Callable[[int, Segment, float], float | None] | None = None) -> tuple[float, dict[str, float]]:
    """End time and seconds by cause (of the compute stream) of a pair started at ``start_s``,
    beside the rank's other collectives in ``external``. ``resolve(chain, segment, now)`` runs a
    ``dp`` segment: it launches the unit's collectives (adding them to ``external``) and gives the
    time until which the chain waits for them, or None."""
    core = PairCore(chains, start_s)
    t = start_s
    causes: dict[str, float] = {}
    comp: list = []      # [chain, work left, lost by cause]
    comm: list = []      # [chain, end, cause]
    waits: dict[int, float] = {}   # chain -> end of the data-parallel collective it waits for

    def add(cause: str, sec: float) -> None:
        if sec > 0:
            causes[cause] = causes.get(cause, 0.0) + sec

    def must_wait(c: int, seg: Segment) -> bool:
        until = resolve(c, seg, t) if resolve is not None else None
        if until is None or until <= t:
            return False
        waits[c] = until
        return True

    while True:
        for res, c, seg in core.startable(must_wait):
            if res == "compute":
                comp = [c, seg.time_s, {}]
                add("compute", seg.time_s)
            elif res == "comm":
                comm = [c, t + seg.time_s, seg.cause]
        if not comp and not comm and not waits:
            break
        ext = [iv for iv in external if iv[0] <= t < iv[1]]
        active = len(ext) + (1 if comm else 0)
        rate = compute_rate(slowdown, active)
        bounds = [iv[1] for iv in ext] + [iv[0] for iv in external if iv[0] > t]
        nxt = min([comm[1]] if comm else [float("inf")])
        nxt = min([nxt, *waits.values()])
        if comp:
            nxt = min(nxt, t + comp[1] / rate)
        if comp and bounds:
            nxt = min(nxt, min(bounds))
        dt = nxt - t
        if comp:
            comp[1] -= dt * rate
            lost = dt * (1.0 - rate)
            names = [iv[2] for iv in ext] + ([comm[2]] if comm else [])
            for name in names:
                add(name, lost / len(names))
        else:
            add(core.waiting_cause(), dt)
        t = nxt
        if comm and comm[1] <= t + 1e-15:
            core.finish("comm", comm[0], t)
            comm = []
        for c in [c for c, end in waits.items() if end <= t + 1e-15]:
            del waits[c]
            core.finish("dp", c, t)
        if comp and comp[1] <= 1e-12 * max(1.0, t):
            core.finish("compute", comp[0], t)
            comp = []
    return t, causes
