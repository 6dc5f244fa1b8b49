"""Several jobs on one fabric: their steps simulated together, sharing the spine.

``clustersim run A.yaml B.yaml --shared-fabric`` places the jobs on one fat tree (the first
job's preset fabric: ``nodes_per_leaf``, ``oversubscription``): every leaf holds nodes of every job
in proportion to its size (a scheduler that spreads jobs over the leaves, as a busy shared
cluster ends up doing), so each job has ``L_J = nodes_per_leaf x n_J / N`` nodes per leaf. Each
job is priced on its own nodes (its collectives see leaves of ``L_J`` nodes and no static spine
penalty) and simulated in the event engine on one simpy clock with the others; its cross-leaf
transfers share the leaf uplinks with theirs (clustersim.engine.spine). Every job runs steps back
to back until each has finished ``steps`` of them (the faster ones keep running, so the slower
ones see traffic to the end); a job's step time is the mean of its first ``steps`` steps, compared
with the same job alone on the same placement.

Only traffic that crosses leaves interacts: all-to-all (MoE expert parallelism across nodes),
recursive halving/doubling. Rings and pipeline sends between neighbouring nodes barely leave a leaf
(NCCL orders ring ranks by node), so dense jobs on rings do not slow each other in this model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import simpy

from clustersim.collectives import CollectivePlan, Phase
from clustersim.engine.event import _StepSim
from clustersim.engine.spine import Spine, SpineLink
from clustersim.engine.timeline import SimResult
from clustersim.errors import InputError
from clustersim.limits import MAX_SHARED_FABRIC_STEPS
from clustersim.network import FairShareLink
from clustersim.plan.step_plan import SimRank, StepPlan, build_plan
from clustersim.scenario import Scenario


@dataclass(frozen=True, slots=True)
class Job:
    scenario: Scenario
    plan: StepPlan
    weights: dict[int, float]     # id(phase) -> spine demand while it moves bytes
    nodes_per_leaf: int


def cross_fraction(plan: CollectivePlan, nodes_per_leaf: int) -> float:
    """Fraction of a plan's scale-out bytes that leave the leaf (the collective model's own rule,
    clustersim.collectives.lowering: all-to-all by peer count, recursive halving/doubling all)."""
    n = plan.shape.num_nodes
    if n <= nodes_per_leaf:
        return 0.0
    if plan.algo.startswith(("direct", "pairwise")):
        same = min(n, nodes_per_leaf) - 1
        return (n - 1 - same) / (n - 1)
    if plan.algo.startswith("rhd"):
        return 1.0
    return 0.0


def _plans(rk: SimRank, plan: StepPlan) -> list[CollectivePlan]:
    out = [s.plan for units in rk.units.values() for u in units for s in u.steps if s.plan is not None]
    out += [p for p in rk.send.values() if p is not None]
    out += [p for p in rk.send_at.values() if all(p is not q for q in rk.send.values())]  # V / DualPipe sends
    dp = plan.dp
    tables = [dp.grad_buckets, dp.after_backward, dp.param_gathers, dp.after_optimizer]
    if dp.zero3 is not None:
        tables += [dp.zero3.gather, dp.zero3.reduce]
    out += [p for table in tables for items in table.values() for _, p in items]
    return out


def make_job(scenario: Scenario, total_nodes: int, nodes_per_leaf: int) -> Job:
    if scenario.faults is not None or scenario.node_groups:
        raise InputError("SCENARIO", scenario.name, "jobs on one kind of GPU without faults on a shared fabric (no faults: section, no cluster.groups)")
    cluster = scenario.cluster
    # the job's nodes under each leaf: its share of the leaf, never more than the job has, and
    # rounded down so that the jobs' shares fit in the leaf (a 2-node job was given 16 per leaf, and
    # 4 + 1 nodes were put under a 4-node leaf); a fabric no larger than one leaf holds every job whole
    if total_nodes <= nodes_per_leaf:
        per_leaf = cluster.num_nodes
    else:
        per_leaf = min(cluster.num_nodes, max(1, nodes_per_leaf * cluster.num_nodes // total_nodes))
    own = replace(scenario, cluster=replace(cluster, nodes_per_leaf=per_leaf, oversubscription=1.0))
    plan = build_plan(own)
    pp = scenario.parallel.pp
    weights: dict[int, float] = {}
    for rk in plan.ranks:
        for p in _plans(rk, plan):
            f = cross_fraction(p, per_leaf)
            for ph in p.phases:
                if ph.tier == "scale_out" and f > 0:
                    weights[id(ph)] = f * per_leaf / pp
    return Job(own, plan, weights, per_leaf)


class _SharedSim(_StepSim):
    """One job's step on the shared clock: its scale-out links share the spine."""

    def __init__(self, job: Job, env: simpy.Environment, spine: Spine, name: str) -> None:
        self._spine, self._weights = spine, job.weights
        super().__init__(job.plan, record=False, env=env, name=name)

    def _link(self, name: str) -> FairShareLink:
        return SpineLink(self.env, name, self._spine) if name.endswith("scale_out") else FairShareLink(self.env, name)

    def _transfer(self, rank: int, phase: Phase) -> simpy.Event:
        link = self.links[rank][phase.tier]
        work = phase.wire_bytes / phase.bw_bytes_per_s
        if isinstance(link, SpineLink):
            return link.transfer(work, self._weights.get(id(phase), 0.0))
        return link.transfer(work)

    def _quiet(self, rk: SimRank, g: int, kind: str) -> tuple | None:
        if any("scale_out" in u.tiers for u in rk.units[(g, kind)]):
            return None  # collectives that may cross leaves run on the links, not in one timeout
        return super()._quiet(rk, g, kind)


def _run(jobs: list[Job], steps: int, capacity: float) -> list[list[SimResult]]:
    env = simpy.Environment()
    spine = Spine(capacity)
    results: list[list[SimResult]] = [[] for _ in jobs]

    def drive(j: int):
        while len(results[j]) < steps or any(len(r) < steps for r in results):
            sim = _SharedSim(jobs[j], env, spine, f"job{j}.step{len(results[j])}.")
            start = env.now
            yield sim.start_processes()
            results[j].append(sim.result(offset_s=start))

    env.run(until=simpy.AllOf(env, [env.process(drive(j)) for j in range(len(jobs))]))
    return [r[:steps] for r in results]


def cosimulate(scenarios: list[Scenario], steps: int = 3) -> dict[str, Any]:
    """The jobs' step times on the shared fabric and alone on it (module docstring)."""
    if len(scenarios) < 2:
        raise InputError("SCENARIO", len(scenarios), "two or more scenarios with --shared-fabric")
    if not 1 <= steps <= MAX_SHARED_FABRIC_STEPS:
        raise InputError("--steps", steps, f"a whole number from 1 to {MAX_SHARED_FABRIC_STEPS} (clustersim.limits)")
    first = scenarios[0].cluster
    for i, sc in enumerate(scenarios):
        c = sc.cluster
        if (c.nodes_per_leaf, c.oversubscription, c.gpus_per_node) != (first.nodes_per_leaf, first.oversubscription,
                                                                       first.gpus_per_node):
            raise InputError(f"SCENARIO {i + 1} cluster", f"nodes_per_leaf {c.nodes_per_leaf}, oversubscription "
                             f"{c.oversubscription}, gpus_per_node {c.gpus_per_node}",
                             f"the first job's fabric: nodes_per_leaf {first.nodes_per_leaf}, oversubscription "
                             f"{first.oversubscription}, gpus_per_node {first.gpus_per_node}")
    total = sum(sc.cluster.num_nodes for sc in scenarios)
    capacity = first.nodes_per_leaf / first.oversubscription
    jobs = [make_job(sc, total, first.nodes_per_leaf) for sc in scenarios]
    shared = _run(jobs, steps, capacity)
    rows = []
    for job, sc, got in zip(jobs, scenarios, shared, strict=True):
        alone = _run([job], steps, capacity)[0]
        mean = sum(r.step_time_s for r in got) / steps
        alone_mean = sum(r.step_time_s for r in alone) / steps
        rows.append({"name": sc.name, "nodes": sc.cluster.num_nodes, "nodes_per_leaf": job.nodes_per_leaf,
                     "step_time_s": mean, "alone_step_time_s": alone_mean, "slowdown": mean / alone_mean,
                     "step_times_s": [r.step_time_s for r in got],
                     "cross_leaf_phases": len(job.weights)})
    return {"shared_fabric": {"nodes": total, "nodes_per_leaf": first.nodes_per_leaf,
                              "oversubscription": first.oversubscription,
                              "leaf_uplink_node_nics": capacity, "steps": steps, "jobs": rows}}


__all__ = ["cosimulate", "cross_fraction"]
