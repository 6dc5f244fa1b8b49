"""Several jobs on one fabric: their steps simulated together, sharing the spine.

``clustersim run A.yaml B.yaml --shared-fabric`` places the jobs on one fat tree (the first
job's preset fabric: ``nodes_per_leaf``, ``oversubscription``; every job must have the same NICs):
every leaf holds nodes of every job in proportion to its size (a scheduler that spreads jobs over
the leaves, as a busy shared cluster ends up doing), so each job has ``L_J = nodes_per_leaf x n_J /
N`` nodes per leaf, its own nodes in order (leaf ``i`` holds the job's nodes ``i L_J ..``, so a
leaf holds the pipeline stages those nodes run). Each job is priced on its own nodes (its
collectives see leaves of ``L_J`` nodes and no static spine penalty) and simulated in the event
engine on one simpy clock with the others; its cross-leaf transfers load the uplinks of the leaves
its stage occupies, with the other jobs' (clustersim.engine.spine). What a transfer loads is the
single-job model's rule (``cross_fraction``: the all-to-all's peers on other leaves, recursive
halving/doubling all of it, a ring's one crossing hop per leaf), so a job alone on leaves it fills
pays the oversubscription ``run`` charges it, and sharing adds only the other jobs' contention.
Every job runs steps back to back until each has finished ``steps`` of them (the faster ones keep
running, so the slower ones see traffic to the end); a job's step time is the mean of its first
``steps`` steps, compared with the same job alone on the same placement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import simpy

from clustersim.collectives import CollectivePlan, Phase, lowering, ports
from clustersim.engine.event import _StepSim
from clustersim.engine.spine import Spine, SpineLink
from clustersim.engine.timeline import SimResult
from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_SHARED_FABRIC_STEPS
from clustersim.network import FairShareLink
from clustersim.parallel.groups import coords
from clustersim.plan.step_plan import SimRank, StepPlan, build_plan
from clustersim.scenario import Scenario

_NODE_EPS = 1e-9   # a stage's nodes in a leaf are sums of 1 / gpus_per_node: 2.0000000001 is 2 nodes


@dataclass(frozen=True, slots=True)
class Job:
    scenario: Scenario
    plan: StepPlan
    # (id(phase), nodes of its rank's stage in a leaf) -> share of a NIC's stream that leaf's uplinks carry
    shares: dict[tuple[int, float], float]
    nodes_per_leaf: int
    # per leaf the job occupies (in node order): (pipeline rank, its nodes there) for each rank
    leaves: tuple[tuple[tuple[int, float], ...], ...]

    def uplink_weights(self, phase: Phase, kinds: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
        """(leaf kind, node-NICs of demand) of one transfer of ``phase`` by a rank whose stage has
        ``n`` nodes in each kind of leaf (``kinds``: (kind, n)): ``f x n``, ``f`` the share for a leaf
        holding ``n`` of the stage's nodes (``cross_fraction``); kinds it does not cross are left out."""
        out = tuple((kind, self.shares.get((id(phase), n), 0.0) * n) for kind, n in kinds)
        return tuple((kind, w) for kind, w in out if w > 0)


def cross_fraction(plan: CollectivePlan, cluster: ClusterSpec, nodes_here: float | None = None) -> float:
    """Share of one NIC's stream of ``plan`` that a leaf's uplinks carry, per node of the group in
    that leaf: the collective model's rules, ``lowering.cross_fraction`` (all-to-all by peer count,
    recursive halving/doubling all) floored by ``ports.leaf_uplink_share`` (a ring's one crossing hop
    per leaf), as ``ports.spine_factor`` charges a job alone. ``nodes_here``: the nodes of the
    rank's stage in that leaf (None: a whole leaf of ``cluster.nodes_per_leaf``); the rules then see
    a leaf of the group's nodes there, ``min(group nodes, nodes_here)`` rounded up, so a leaf that
    holds the tail of one stage and the head of the next carries each stage's crossing hop (a ring
    split over two leaves crosses once in each), not a share of one."""
    if nodes_here is not None:
        here = min(plan.shape.num_nodes, max(1, math.ceil(nodes_here - _NODE_EPS)))
        cluster = replace(cluster, nodes_per_leaf=here)
    return ports.leaf_uplink_share(cluster, plan.shape, lowering.cross_fraction(plan, cluster))


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


def _leaves(scenario: Scenario, per_leaf: int) -> tuple[tuple[tuple[int, float], ...], ...]:
    """The job's nodes ``per_leaf`` to a leaf in node order; per leaf, the nodes of each pipeline
    rank (its GPUs there / GPUs per node; a GPU's pipeline rank from clustersim.parallel.groups)."""
    c, layout = scenario.cluster, scenario.parallel
    counts: dict[int, dict[int, float]] = {}
    for rank in range(c.num_gpus):
        leaf = rank // c.gpus_per_node // per_leaf
        stage = coords(rank, layout).pp
        row = counts.setdefault(leaf, {})
        row[stage] = row.get(stage, 0.0) + 1.0 / c.gpus_per_node
    return tuple(tuple(sorted(counts[leaf].items())) for leaf in sorted(counts))


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
    leaves = _leaves(scenario, per_leaf)
    # each stage's node counts in the leaves it occupies: a leaf holding the tail of stage s and the
    # head of stage s + 1 prices each stage's collectives on that stage's nodes there
    here: dict[int, set[float]] = {}
    for leaf in leaves:
        for stage, n in leaf:
            here.setdefault(stage, set()).add(n)
    shares: dict[tuple[int, float], float] = {}
    seen: set[tuple[int, float]] = set()
    for rk in plan.ranks:
        for p in _plans(rk, plan):
            for n in here.get(rk.pp_rank, ()):
                if (id(p), n) in seen:   # plans are shared by micro-batches and layers
                    continue
                seen.add((id(p), n))
                f = cross_fraction(p, own.cluster, n)
                for ph in p.phases:
                    if ph.tier == "scale_out" and f > 0:
                        shares[(id(ph), n)] = f
    return Job(own, plan, shares, per_leaf, leaves)


def _leaf_kinds(jobs: list[Job], nodes_per_leaf: int, oversubscription: float
                ) -> tuple[list[float], list[dict[int, tuple[tuple[int, float], ...]]]]:
    """The kinds of leaf the jobs make (leaf ``i`` holds leaf ``i`` of every job's placement; leaves
    that hold the same stages in the same numbers are one kind) with their uplinks (node-NICs: 1 /
    oversubscription per node, ``nodes_per_leaf`` nodes or more where the rounded shares overfill
    a leaf), and per job and pipeline rank the (kind, nodes of that rank there) it loads."""
    kinds: dict[tuple, int] = {}
    capacities: list[float] = []
    stage_kinds: list[dict[int, dict[int, float]]] = [{} for _ in jobs]
    for i in range(max(len(job.leaves) for job in jobs)):
        key = tuple((j, stage, n) for j, job in enumerate(jobs) if i < len(job.leaves) for stage, n in job.leaves[i])
        if key not in kinds:
            kinds[key] = len(capacities)
            capacities.append(max(nodes_per_leaf, sum(n for _, _, n in key)) / oversubscription)
        for j, stage, n in key:
            stage_kinds[j].setdefault(stage, {})[kinds[key]] = n
    return capacities, [{stage: tuple(sorted(row.items())) for stage, row in per.items()} for per in stage_kinds]


class _SharedSim(_StepSim):
    """One job's step on the shared clock: its scale-out links share the leaves' uplinks."""

    def __init__(self, job: Job, stage_kinds: dict[int, tuple[tuple[int, float], ...]], env: simpy.Environment,
                 spine: Spine, name: str) -> None:
        self._spine, self._job = spine, job
        self._kinds = [stage_kinds.get(rk.pp_rank, ()) for rk in job.plan.ranks]
        self.cross_leaf_phases = 0
        super().__init__(job.plan, record=False, env=env, name=name)

    def _link(self, name: str) -> FairShareLink:
        return SpineLink(self.env, name, self._spine) if name.endswith("scale_out") else FairShareLink(self.env, name)

    def _transfer(self, rank: int, phase: Phase) -> simpy.Event:
        link = self.links[rank][phase.tier]
        work = phase.wire_bytes / phase.bw_bytes_per_s
        if isinstance(link, SpineLink):
            weights = self._job.uplink_weights(phase, self._kinds[rank])
            if weights:
                self.cross_leaf_phases += 1
            return link.transfer(work, weights)
        return link.transfer(work)

    def _quiet(self, rk: SimRank, g: int, kind: str) -> tuple | None:
        if any("scale_out" in u.tiers for u in rk.units[(g, kind)]):
            return None  # collectives that may cross leaves run on the links, not in one timeout
        return super()._quiet(rk, g, kind)


def _run(jobs: list[Job], steps: int, nodes_per_leaf: int, oversubscription: float
         ) -> tuple[list[list[SimResult]], list[int]]:
    """Each job's first ``steps`` steps on one clock, and its cross-leaf phases in its first step."""
    env = simpy.Environment()
    capacities, stage_kinds = _leaf_kinds(jobs, nodes_per_leaf, oversubscription)
    spine = Spine(capacities)
    results: list[list[SimResult]] = [[] for _ in jobs]
    crossing = [0] * len(jobs)

    def drive(j: int):
        while len(results[j]) < steps or any(len(r) < steps for r in results):
            sim = _SharedSim(jobs[j], stage_kinds[j], env, spine, f"job{j}.step{len(results[j])}.")
            start = env.now
            yield sim.start_processes()
            if not results[j]:
                crossing[j] = sim.cross_leaf_phases
            results[j].append(sim.result(offset_s=start))

    env.run(until=simpy.AllOf(env, [env.process(drive(j)) for j in range(len(jobs))]))
    return [r[:steps] for r in results], crossing


def _nic(c: ClusterSpec) -> tuple:
    return (c.scale_out.bw_bytes_per_s, c.scale_out.efficiency, c.nics_per_node)


def _nic_text(c: ClusterSpec) -> str:
    return (f"{c.scale_out.name} ({c.scale_out.bw_bytes_per_s * 8 / 1e9:g} Gb/s, efficiency "
            f"{c.scale_out.efficiency:g}, {c.nics_per_node} per node)")


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
        # the leaves' uplinks and every job's demand on them are counted in NICs of one kind: jobs
        # with other NICs (rate, efficiency or count per node) would mix units (a 100G NIC's
        # transfer charged as a 400G one's), so they are refused rather than priced in error
        if _nic(c) != _nic(first):
            raise InputError(f"SCENARIO {i + 1} cluster.scale_out", _nic_text(c),
                             f"the first job's NICs on a shared fabric: {_nic_text(first)}")
    total = sum(sc.cluster.num_nodes for sc in scenarios)
    capacity = first.nodes_per_leaf / first.oversubscription
    jobs = [make_job(sc, total, first.nodes_per_leaf) for sc in scenarios]
    shared, _ = _run(jobs, steps, first.nodes_per_leaf, first.oversubscription)
    rows = []
    for job, sc, got in zip(jobs, scenarios, shared, strict=True):
        (alone,), (crossing,) = _run([job], steps, first.nodes_per_leaf, first.oversubscription)
        mean = sum(r.step_time_s for r in got) / steps
        alone_mean = sum(r.step_time_s for r in alone) / steps
        rows.append({"name": sc.name, "nodes": sc.cluster.num_nodes, "nodes_per_leaf": job.nodes_per_leaf,
                     "step_time_s": mean, "alone_step_time_s": alone_mean, "slowdown": mean / alone_mean,
                     "step_times_s": [r.step_time_s for r in got],
                     "cross_leaf_phases": crossing})
    return {"shared_fabric": {"nodes": total, "nodes_per_leaf": first.nodes_per_leaf,
                              "oversubscription": first.oversubscription,
                              "leaf_uplink_node_nics": capacity, "steps": steps, "jobs": rows}}


__all__ = ["cosimulate", "cross_fraction"]
