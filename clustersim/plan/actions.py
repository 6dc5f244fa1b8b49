"""What each scheduled action does, resolved once per step for both engines.

For every action of every rank: its global stage, the input it waits for (an activation for F,
a gradient for B: keys ``(kind, stage, micro-batch)``), the outputs it sends and to which rank
(none when the next stage sits on the same rank, the turn of a V schedule), the work units it
runs (F: the forward units; B: the whole backward, or only its input-gradient part when the
schedule runs a W for the same chunk and micro-batch; W: the weight-gradient part), and whether
it completes the chunk's gradients (the last B or W of the chunk, which launches the
data-parallel reduction of each unit as it finishes).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from clustersim.parallel.pipeline import Schedule, combined_1f1b, pair_steady_state, split_weight_keys
from clustersim.parallel.pipeline import build_schedule as _build
from clustersim.parallel.stage_graph import StageGraph
from clustersim.parallel.zb_auto import StageCosts
from clustersim.plan.schedule_costs import schedule_costs
from clustersim.plan.stage_work import StageWork, StepWork, Work
from clustersim.scenario import Scenario

Key = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class PlannedAction:
    label: str
    kind: str
    stage: int
    micro_batch: int
    needs: Key | None                        # arrival to wait for
    sends: tuple[tuple[Key, int, int], ...]  # (key, destination rank, pp boundary of the link)
    works: tuple[Work, ...]
    final: bool                              # the chunk's gradients are complete after it
    paired: bool                             # runs overlapped with the next action
    part: str = ""                           # which units it runs: "F", "B" (whole backward), "Bi" (input part), "W"
    chunk: int = 0


def step_schedule(scenario: Scenario, num_micro_batches: int | None = None) -> Schedule:
    """The scenario's schedule, with Megatron's EP-overlap pairs when that option is on
    (``num_micro_batches``: a rank class's own count, per-rank mode; None: the scenario's)."""
    par = scenario.parallel
    m = par.num_micro_batches if num_micro_batches is None else num_micro_batches
    return _schedule(par.schedule, par.pp, m, par.virtual_stages, par.overlap_moe_expert_parallel_comm,
                     schedule_costs(scenario))


def _schedule(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int, ep_overlap: bool,
              costs: StageCosts | None = None) -> Schedule:
    sched = _build(schedule, pp, num_micro_batches, virtual_stages, costs)
    if combined_1f1b(schedule, ep_overlap):
        sched = pair_steady_state(sched)
    return sched


def _boundary(src: int, dst: int, pp: int, kind: str = "F") -> int:
    """The pipeline link between neighbouring ranks ``src`` and ``dst``: rank i to rank i + 1 mod pp.
    With two ranks both links join them: a forward send takes ``src``'s, a backward one the link
    below ``src`` (as the classic schedules always did)."""
    if pp == 2:
        return src if kind == "F" else (src - 1) % pp
    return src if dst == (src + 1) % pp else dst


@functools.lru_cache(maxsize=64)
def plan_actions(scenario: Scenario, work: StepWork,
                 num_micro_batches: int | None = None) -> tuple[tuple[PlannedAction, ...], ...]:
    """Every rank's actions with their work units (memoised: a pure function of the frozen
    scenario and its work, asked for by each rank class of a plan)."""
    par = scenario.parallel
    m = par.num_micro_batches if num_micro_batches is None else num_micro_batches
    skeleton = action_skeleton(par.schedule, par.pp, m, par.virtual_stages, par.overlap_moe_expert_parallel_comm,
                               work.graph, schedule_costs(scenario))
    return tuple(tuple(PlannedAction(a.label, a.kind, a.stage, a.micro_batch, a.needs, a.sends,
                                     _works(work.stages[a.stage], a.part), a.final, a.paired, a.part, a.chunk)
                       for a in acts) for acts in skeleton)


# the StageWork field that holds each part's units
_PART_WORKS = {"F": "forward", "B": "backward", "Bi": "backward_input", "W": "backward_weight"}


def _works(st: StageWork, part: str) -> tuple[Work, ...]:
    return getattr(st, _PART_WORKS[part])


@functools.lru_cache(maxsize=256)
def action_skeleton(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int, ep_overlap: bool,
                    graph: StageGraph, costs: StageCosts | None = None) -> tuple[tuple[PlannedAction, ...], ...]:
    """Every rank's actions resolved on the stage graph, without their work units (``works``
    empty): what ``plan_actions`` gives, for any scenario with this schedule (the sweep's bound
    replays it, clustersim.sweep.replay). Memoised: a pure function of its integer arguments and
    the frozen stage graph (``costs``: zb-2p's stage times, clustersim.plan.schedule_costs)."""
    out = []
    for rank, acts in enumerate(_schedule(schedule, pp, num_micro_batches, virtual_stages, ep_overlap, costs)):
        split = split_weight_keys(acts)
        last: dict[int, int] = {}
        for i, a in enumerate(acts):
            if a.kind in ("B", "W"):
                last[a.chunk] = i
        planned = []
        for i, a in enumerate(acts):
            g = graph.stage(rank, a.chunk)
            mb = a.micro_batch
            sends: list[tuple[Key, int, int]] = []
            needs = None
            if a.kind == "F":
                part = "F"
                if graph.prev[g] >= 0 and graph.placement[graph.prev[g]][0] != rank:
                    needs = ("F", g, mb)
                nxt = graph.next[g]
                if nxt >= 0:
                    dst = graph.placement[nxt][0]
                    if dst != rank:
                        sends.append((("F", nxt, mb), dst, _boundary(rank, dst, pp, "F")))
            elif a.kind == "B":
                part = "Bi" if (a.chunk, mb) in split else "B"
                nxt = graph.next[g]
                if nxt >= 0 and graph.placement[nxt][0] != rank:
                    needs = ("B", g, mb)
                prev = graph.prev[g]
                if prev >= 0:
                    dst = graph.placement[prev][0]
                    if dst != rank:
                        sends.append((("B", prev, mb), dst, _boundary(rank, dst, pp, "B")))
            else:
                part = "W"
            planned.append(PlannedAction(str(a), a.kind, g, mb, needs, tuple(sends), (),
                                         last.get(a.chunk) == i, a.paired, part, a.chunk))
        out.append(tuple(planned))
    return tuple(out)
