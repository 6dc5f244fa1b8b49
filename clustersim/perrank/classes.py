"""Which data-parallel replicas run alike: the rank classes of a per-rank simulation (pure).

A replica ``d`` is the pipeline of ``pp`` stages whose GPUs have data-parallel coordinate ``d``
(ranks ordered tp-cp-dp-pp, clustersim.parallel.groups). Within a stage, the replica's tensor-
and context-parallel GPUs synchronise every layer (blocking TP collectives, ring-attention
exchanges), so a stage runs at the pace of its slowest GPU; with expert parallelism the EP group's
all-to-all ties ``ep`` consecutive data-parallel positions together every MoE layer, so those
replicas share their slowest GPU too. A stage's scale-out traffic (pipeline sends, TP/EP
collectives across nodes) moves at its slowest NIC's rate. The data-parallel collectives of stage
``p`` span every replica; each (tp, cp) position has its own DP group and the stage proceeds when
all of them are done, so they run at the rate of the slowest NIC among all of the stage's GPUs.

Replicas whose stages are degraded alike form one class: a healthy cluster is one class (the
representative-rank path), one slow GPU makes two (its replica, or its EP block, and the rest),
1% stragglers on 16,384 GPUs make about a hundred: the engine simulates classes, not GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.compute.variation import speed_beyond_spread
from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.step_plan import Host, RankClass
from clustersim.scenario import Scenario
from clustersim.scenario.faults import FaultSpec, nic_of_gpu


@dataclass(frozen=True, slots=True)
class Culprit:
    """The GPU (or its NIC) that sets a degraded speed."""

    rank: int
    kind: str      # "slow_gpu" | "straggler" | "slow_link"
    speed: float
    node: int
    local_gpu: int
    nic: int = -1


@dataclass(frozen=True, slots=True)
class ClassLayout:
    classes: tuple[RankClass, ...]
    dp_link_speed: tuple[float, ...]                     # per pipeline rank
    culprits: tuple[tuple[Culprit | None, ...], ...]     # per class, per pipeline rank
    dp_culprits: tuple[Culprit | None, ...]              # per pipeline rank: the slowest NIC of the stage
    counts: dict[str, int]                               # degraded GPUs and links by kind

    def dp_link_by_stage(self, pp: int, virtual_stages: int, graph=None) -> dict[int, float]:
        """Per global stage: the DP link speed of the pipeline rank that holds it (``graph``: the
        schedule's stage graph, V and DualPipe placements; None: stage ``chunk * pp + rank``)."""
        if graph is not None:
            return {graph.stage(p, c): s for p, s in enumerate(self.dp_link_speed) for c in range(graph.chunks)
                    if s != 1.0}
        return {c * pp + p: s for p, s in enumerate(self.dp_link_speed) for c in range(virtual_stages) if s != 1.0}


def coords_of(rank: int, par: ParallelLayout) -> tuple[int, int, int, int]:
    """(tp, cp, dp, pp) coordinates of a global rank (rank = tp_i + tp (cp_i + cp (dp_i + dp pp_i)))."""
    t, rest = rank % par.tp, rank // par.tp
    c, rest = rest % par.cp, rest // par.cp
    d, p = rest % par.dp, rest // par.dp
    return t, c, d, p


def rank_of(t: int, c: int, d: int, p: int, par: ParallelLayout) -> int:
    return t + par.tp * (c + par.cp * (d + par.dp * p))


def lockstep_replicas(d: int, c: int, par: ParallelLayout, moe: bool) -> range | tuple[int, ...]:
    """Replicas that run in lockstep with replica ``d`` (its EP block for MoE with ep > 1)."""
    if not moe or par.ep == 1:
        return (d,)
    j = c + par.cp * d                      # position among the cp x dp ranks (groups.py: expert grid)
    block = j // par.ep
    return tuple(sorted({jj // par.cp for jj in range(block * par.ep, (block + 1) * par.ep)}))


def class_layout(scenario: Scenario, faults: FaultSpec, hosts_of=None, nics_on=None,
                 micro_batches: tuple[int, ...] | None = None) -> ClassLayout:
    """The rank classes of ``scenario`` under ``faults``. Mixed clusters: ``hosts_of(d, p)`` gives
    the scenario as stage ``p`` of replica ``d`` sees it (its node group's cluster), ``nics_on(node)``
    the node's NIC count, ``micro_batches[d]`` replica ``d``'s micro-batches."""
    if nics_on is None:
        def nics_on(node: int) -> int:
            return scenario.cluster.nics_per_node
    par, cluster = scenario.parallel, scenario.cluster
    gpn = cluster.gpus_per_node
    moe = scenario.model.is_moe
    # (replica, stage) -> [speed, culprit] and [link speed, culprit]
    slow: dict[tuple[int, int], tuple[float, Culprit]] = {}
    link: dict[tuple[int, int], tuple[float, Culprit]] = {}
    dp_link: dict[int, tuple[float, Culprit]] = {}
    counts = {"slow_gpus": 0, "stragglers": 0, "slow_links": 0}
    for rank, (speed, kind) in sorted(faults.gpu_speeds(cluster.num_gpus).items()):
        counts["slow_gpus" if kind == "slow_gpu" else "stragglers"] += 1
        t, c, d, p = coords_of(rank, par)
        who = Culprit(rank, kind, speed, rank // gpn, rank % gpn)
        # simulated only beyond the healthy spread's slowest GPU, whose wait every rank keeps
        simulated = speed_beyond_spread(speed, cluster.num_gpus)
        for dd in lockstep_replicas(d, c, par, moe):
            if simulated < slow.get((dd, p), (1.0, None))[0]:
                slow[(dd, p)] = (simulated, who)
    nic_speed = faults.nic_speeds()
    for node, nic in sorted(nic_speed):
        counts["slow_links"] += 1
        nics = nics_on(node)
        for local in range(gpn):
            used = nic_of_gpu(local, gpn, nics)
            if nic not in used:
                continue
            eff = sum(nic_speed.get((node, k), 1.0) for k in used) / len(used)
            rank = node * gpn + local
            if rank >= cluster.num_gpus:
                continue
            t, c, d, p = coords_of(rank, par)
            who = Culprit(rank, "slow_link", eff, node, local, nic)
            for dd in lockstep_replicas(d, c, par, moe):
                if eff < link.get((dd, p), (1.0, None))[0]:
                    link[(dd, p)] = (eff, who)
            if eff < dp_link.get(p, (1.0, None))[0]:
                dp_link[p] = (eff, who)
    # classes: replicas with the same degraded stages
    keys: dict[tuple, list[int]] = {}
    for d in range(par.dp):
        key = tuple((p, slow[(d, p)][0] if (d, p) in slow else 1.0, link[(d, p)][0] if (d, p) in link else 1.0)
                    for p in range(par.pp) if (d, p) in slow or (d, p) in link)
        if hosts_of is not None or micro_batches is not None:
            hosts = tuple(id(hosts_of(d, p)) for p in range(par.pp)) if hosts_of is not None else ()
            key = (hosts, micro_batches[d] if micro_batches else 0, key)
        keys.setdefault(key, []).append(d)
    # the healthy replicas first (class 0), then by their first replica
    ordered = sorted(keys.items(), key=lambda kv: (kv[0] != () and kv[0][-1:] != ((),), kv[1][0]))
    classes, culprits = [], []
    for _, replicas in ordered:
        d = replicas[0]
        hosts, who = [], []
        for p in range(par.pp):
            speed, c1 = slow.get((d, p), (1.0, None))
            lk, c2 = link.get((d, p), (1.0, None))
            sc = scenario if hosts_of is None else hosts_of(d, p)
            hosts.append(Host(sc, speed, lk))
            worst = min((x for x in ((speed, c1), (lk, c2)) if x[1] is not None), key=lambda x: x[0], default=None)
            who.append(worst[1] if worst else None)
        m = micro_batches[d] if micro_batches else par.num_micro_batches
        classes.append(RankClass(tuple(hosts), m, tuple(replicas)))
        culprits.append(tuple(who))
    return ClassLayout(tuple(classes), tuple(dp_link.get(p, (1.0, None))[0] for p in range(par.pp)),
                       tuple(culprits), tuple(dp_link.get(p, (1.0, None))[1] for p in range(par.pp)), counts)

