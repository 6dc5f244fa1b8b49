"""The engines in per-rank mode: the rank classes simulated together, what paced the step, what it cost.

``time_per_rank`` builds one plan of every class of ranks (clustersim.perrank.classes) and times
it through the timing model that clustersim.engine.selector picks: in the event engine pipelines
run on their own and data-parallel collectives wait for the slowest class; the closed form runs
each class on its own (the step is the slowest class's; it leaves out that a faster class's
overlapped reductions wait for the slow one).

Both compare with the same scenario on a healthy cluster (the representative-rank path) to report
what the faults cost, and split the critical rank's waiting time: the part beyond what the same
pipeline stage waits on a healthy cluster (its bubble, pipeline receives and data-parallel waits)
is time lost waiting for slower peers, the breakdown's ``straggler`` line. The causes still add up
to the step time. The rank that paced the step is the most degraded GPU (or NIC) of the class whose
pipeline finished last (or, when no class is slower than another, of the stage whose
data-parallel collectives ran slowest).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from clustersim.engine.selector import time_plan
from clustersim.engine.timeline import SimResult, StepResult
from clustersim.perrank import hetero
from clustersim.perrank.classes import ClassLayout, Culprit, class_layout, coords_of
from clustersim.plan.plan_cache import PlanCache
from clustersim.plan.stage_work import step_graph
from clustersim.plan.step_plan import StepPlan, build_plan, runs_rank_classes
from clustersim.scenario import Scenario
from clustersim.scenario.faults import FaultSpec

WAITS = ("bubble", "pp_comm", "dp_comm")


def per_rank_mode(scenario: Scenario) -> bool:
    """Whether ``run`` simulates rank classes instead of one representative per stage
    (``plan.step_plan.runs_rank_classes``)."""
    return runs_rank_classes(scenario)


@dataclass(frozen=True, slots=True)
class PerRankPlan:
    plan: StepPlan
    layout: ClassLayout
    healthy: Scenario


def per_rank_plan(scenario: Scenario, cache: PlanCache | None = None) -> PerRankPlan:
    """The plan of ``scenario``'s rank classes, once per ``cache`` (the run's memo)."""
    cache = cache or PlanCache()
    return cache.remember("per_rank_plan", scenario, lambda: _per_rank_plan(scenario, cache))


def _per_rank_plan(scenario: Scenario, cache: PlanCache) -> PerRankPlan:
    faults = scenario.faults or FaultSpec()
    par = scenario.parallel
    hosts_of = nics_on = None
    dp_scenario = scenario
    if scenario.node_groups:
        groups, vs = scenario.node_groups, hetero.variants(scenario)
        slow = hetero.slowness(scenario)

        def hosts_of(d: int, p: int) -> Scenario:
            return vs[hetero.host_group(scenario, d, p, slow)]

        def nics_on(node: int) -> int:
            return groups[hetero.group_of_node(groups, node)].cluster.nics_per_node

        # data-parallel collectives span every group: priced on the slowest NICs
        dp_scenario = vs[min(range(len(groups)), key=lambda i: (_nic_bw(groups[i].cluster), i))]
    layout = class_layout(scenario, faults, hosts_of, nics_on, scenario.micro_batches_per_replica or None)
    graph = step_graph(scenario)
    plan = build_plan(scenario, layout.classes, layout.dp_link_by_stage(par.pp, par.virtual_stages, graph), dp_scenario,
                      cache.compiler)
    return PerRankPlan(plan, layout, replace(scenario, faults=None))


def _nic_bw(cluster) -> float:
    return cluster.scale_out.effective_bw_bytes_per_s * min(1.0, cluster.nics_per_node / cluster.gpus_per_node)


def _healthy_causes(result: SimResult | StepResult, busy: dict[str, float], rank: int) -> dict[str, float]:
    out = dict(busy)
    out["bubble"] = out.get("bubble", 0.0) + max(0.0, result.step_time_s - result.rank_end_s[rank])
    return out


def straggler_split(breakdown: dict[str, float], healthy: dict[str, float]) -> dict[str, float]:
    """Move the critical rank's waits beyond the healthy stage's, net, into ``straggler`` (sum
    unchanged): a wait that moved from one cause to another (a bubble become a pipeline transfer's
    wait behind a slow link) is no lost time, so the waits that shrank offset those that grew, and
    the net growth leaves the grown causes in proportion (the grown ones alone were moved: the line
    read 0.10 s for a fault that cost 0.013 s)."""
    out = dict(breakdown)
    delta = {c: out.get(c, 0.0) - healthy.get(c, 0.0) for c in WAITS}
    grew = sum(d for d in delta.values() if d > 0)
    net = grew + sum(d for d in delta.values() if d < 0)
    if grew <= 0 or net <= 0:
        return out
    for cause, d in delta.items():
        if d > 0:
            out[cause] = out.get(cause, 0.0) - d * net / grew
    out["straggler"] = out.get("straggler", 0.0) + net
    return out


def _culprit_json(who: Culprit | None, scenario: Scenario) -> dict[str, Any] | None:
    if who is None:
        return None
    t, c, d, p = coords_of(who.rank, scenario.parallel)
    out: dict[str, Any] = {"rank": who.rank, "kind": who.kind, "speed": who.speed, "node": who.node,
                           "gpu": who.local_gpu, "pp": p, "dp": d, "tp": t, "cp": c}
    if who.nic >= 0:
        out["nic"] = who.nic
    return out


COMM_CAUSES = ("dp_comm", "pp_comm", "ep_comm", "cp_comm")   # what a slower NIC stretches


def paced_by(prp: PerRankPlan, last_action_s: tuple[float, ...], healthy: StepResult) -> Culprit | None:
    """The fault that costs the step the most, estimated from the healthy step's busy time of the
    culprit's pipeline stage: a GPU at speed s stretches the stage's compute by 1/s - 1, a NIC its
    communication. The culprits are those of every class whose pipeline finished last (classes in
    lockstep, as ZeRO-3's gathers make them, tie: the first of them was taken, often the healthy
    one, and nothing was named) and the stages' slowest NICs. A GPU and a NIC are weighed by what
    they slow, not by their speeds (a NIC at 0.3 was named over a GPU at 0.5 that cost 1,000 times
    more). One node has no NIC traffic: its slow links pace nothing."""
    pp = prp.plan.pp
    layout = prp.layout
    ends = [max(last_action_s[c * pp:(c + 1) * pp]) for c in range(len(layout.classes))]
    top = max(ends)
    tied = [c for c in range(len(ends)) if ends[c] >= top - 1e-12 * max(1.0, top)]
    found = [w for c in tied for w in layout.culprits[c] if w is not None]
    found += [w for w in layout.dp_culprits if w is not None and w not in found]
    if prp.plan.scenario.cluster.num_nodes == 1:
        found = [w for w in found if w.kind != "slow_link"]
    par = prp.plan.scenario.parallel

    def loss_s(w: Culprit) -> float:
        stage = coords_of(w.rank, par)[3]
        busy = healthy.busy(min(stage, len(healthy.rank_end_s) - 1))
        exposed = sum(busy.get(c, 0.0) for c in COMM_CAUSES) if w.kind == "slow_link" else busy.get("compute", 0.0)
        return exposed * (1 / w.speed - 1)

    return max(found, key=lambda w: (loss_s(w), -w.speed, -w.rank)) if found else None


def _info(prp: PerRankPlan, step_s: float, healthy_s: float, who: Culprit | None) -> dict[str, Any]:
    layout, sc = prp.layout, prp.plan.scenario
    faults = sc.faults or FaultSpec()
    return {
        "mode": "per-rank",
        "classes": len(layout.classes),
        "simulated_ranks": len(prp.plan.ranks),
        "replicas_per_class": [len(c.replicas) for c in layout.classes],
        **layout.counts,
        "seed": faults.seed,
        "healthy_step_time_s": healthy_s,
        "cost_s": step_s - healthy_s,
        "cost_fraction": (step_s - healthy_s) / healthy_s,
        "paced_by": _culprit_json(who, sc),
    }


def time_per_rank(scenario: Scenario, engine: str, record: bool = False,
                  cache: PlanCache | None = None) -> tuple[StepResult, dict[str, Any]]:
    """One step in per-rank mode through ``engine``'s model (clustersim.engine.selector): the result
    (breakdown with its straggler line) and what the report says about it (``faults`` in run --json).
    ``cache``: the run's memo, which keeps the plans for the next engine's call."""
    cache = cache or PlanCache()
    prp = per_rank_plan(scenario, cache)
    result = time_plan(prp.plan, engine, record)
    if scenario.faults is None:
        return result, {}
    healthy = time_plan(_healthy_plan(prp, cache), engine)
    rank = _same_rank(prp, result.critical_rank, cache)
    breakdown = straggler_split(result.breakdown, _healthy_causes(healthy, healthy.busy(rank), rank))
    who = paced_by(prp, result.last_action_s, healthy)
    return replace(result, breakdown=breakdown), _info(prp, result.step_time_s, healthy.step_time_s, who)


def _healthy_plan(prp: PerRankPlan, cache: PlanCache) -> StepPlan:
    """The same job without its faults (mixed GPUs stay)."""
    return per_rank_plan(prp.healthy, cache).plan if per_rank_mode(prp.healthy) else cache.step_plan(prp.healthy)


def _same_rank(prp: PerRankPlan, rank: int, cache: PlanCache) -> int:
    """The healthy run's simulated rank that runs what ``rank`` runs (same stage; with mixed GPUs,
    the healthy class holding the same first replica)."""
    pp = prp.plan.pp
    if not prp.healthy.node_groups:
        return rank % pp
    replica = prp.layout.classes[rank // pp].replicas[0]
    healthy = per_rank_plan(prp.healthy, cache).layout.classes
    klass = next(c for c, cls in enumerate(healthy) if replica in cls.replicas)
    return klass * pp + rank % pp
