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

``PairCore`` holds the decisions; the closed form (``pair_timing``) and the event engine drive
it with their own clocks, so that with no other traffic they agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.collectives import CollectivePlan
from clustersim.plan.compiled_unit import CompiledUnit
from clustersim.plan.overlap import Interval, compute_rate


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str          # "compute" | "comm"
    time_s: float      # contention-free duration (compute: at full rate)
    cause: str
    plan: CollectivePlan | None = None


def chain_of(units: list[CompiledUnit]) -> tuple[Segment, ...]:
    """An action's units as one chain: kernels and collectives in order (a collective that the
    unit would overlap with later kernels is waited for here: the other chain fills the gap)."""
    out: list[Segment] = []
    for unit in units:
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
    return tuple(out)


class PairCore:
    """Which segment each resource starts next."""

    def __init__(self, chains: tuple[tuple[Segment, ...], tuple[Segment, ...]], now: float) -> None:
        self.chains = chains
        self.pos = [0, 0]
        self.ready = [now, now]
        self.busy = {"compute": False, "comm": False}

    @property
    def done(self) -> bool:
        return all(self.pos[c] >= len(self.chains[c]) for c in (0, 1))

    def startable(self) -> list[tuple[str, int, Segment]]:
        """(resource, chain, segment) to start now; marks them running."""
        out = []
        for res in ("compute", "comm"):
            if self.busy[res]:
                continue
            cands = [(self.ready[c], c) for c in (0, 1) if self.pos[c] < len(self.chains[c])
                     and self.pos[c] >= 0 and self.chains[c][self.pos[c]].kind == res]
            if cands:
                _, c = min(cands)
                self.busy[res] = True
                seg = self.chains[c][self.pos[c]]
                self.pos[c] = -self.pos[c] - 1     # running: negative until finished
                out.append((res, c, seg))
        return out

    def finish(self, res: str, chain: int, now: float) -> None:
        self.busy[res] = False
        self.pos[chain] = -self.pos[chain] - 1 + 1
        self.ready[chain] = now

    def waiting_cause(self) -> str:
        """What the compute stream waits for when it is idle inside the pair."""
        for c in (0, 1):
            p = self.pos[c]
            if p < 0:
                seg = self.chains[c][-p - 1]
                if seg.kind == "comm":
                    return seg.cause
        return "compute"


def pair_timing(chains: tuple[tuple[Segment, ...], tuple[Segment, ...]], start_s: float,
                external: tuple[Interval, ...], slowdown: float) -> tuple[float, dict[str, float]]:
    """End time and seconds by cause (of the compute stream) of a pair started at ``start_s``,
    beside the rank's other collectives in ``external``."""
    core = PairCore(chains, start_s)
    t = start_s
    causes: dict[str, float] = {}
    comp: list = []      # [chain, work left, lost by cause]
    comm: list = []      # [chain, end, cause]

    def add(cause: str, sec: float) -> None:
        if sec > 0:
            causes[cause] = causes.get(cause, 0.0) + sec

    while True:
        for res, c, seg in core.startable():
            if res == "compute":
                comp = [c, seg.time_s, {}]
                add("compute", seg.time_s)
            else:
                comm = [c, t + seg.time_s, seg.cause]
        if not comp and not comm:
            break
        ext = [iv for iv in external if iv[0] <= t < iv[1]]
        active = len(ext) + (1 if comm else 0)
        rate = compute_rate(slowdown, active)
        bounds = [iv[1] for iv in ext] + [iv[0] for iv in external if iv[0] > t]
        nxt = min([comm[1]] if comm else [float("inf")])
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
        if comp and comp[1] <= 1e-12 * max(1.0, t):
            core.finish("compute", comp[0], t)
            comp = []
    return t, causes
