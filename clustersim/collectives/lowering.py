"""Event-driven twin of the closed forms: a collective lowered to flows on the real topology.

Symmetry: every node of a group runs the same pattern, so only one representative node is
simulated: the flows of its active GPUs (this group and its concurrent twins) in every phase, each
routed on the networkx topology (NVSwitch, PCIe, rail NIC, leaf, ECMP spine). A flow occupies
all links of its route at once (flow-level model) and each directed link is a FairShareLink, so
flows that share a NIC or an uplink slow each other down. Links that the other, symmetric nodes
also load (a leaf's uplinks) are charged with that multiplicity instead of simulating those nodes.
Without contention a phase takes exactly ``latency_s + wire_bytes / bw_bytes_per_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from clustersim.collectives import ports
from clustersim.collectives.plan import CollectivePlan, GroupShape, Phase
from clustersim.collectives.planner import plan_collective
from clustersim.hardware.spec import ClusterSpec
from clustersim.network import topology as topo
from clustersim.network.domain import domain_view
from clustersim.network.links import FairShareLink
from clustersim.network.routing import check_route, route, scale_up_paths


@dataclass(frozen=True, slots=True)
class Flow:
    """Bytes one GPU sends along one route; ``loads`` = (link key, link-seconds at full link)."""

    name: str
    loads: tuple[tuple[str, float], ...]


def cross_fraction(plan: CollectivePlan, cluster: ClusterSpec) -> float:
    """Fraction of a plan's scale-out bytes whose peer node sits on another leaf: all-to-all by
    peer count, recursive halving/doubling all, the rest (rings, trees, pipeline pairs) none."""
    if plan.algo in ("direct", "pairwise"):
        return ports.all_to_all_cross_fraction(cluster, plan.shape)
    if plan.algo == "rhd":
        return 1.0
    return 0.0


def _peers(plan: CollectivePlan, cluster: ClusterSpec) -> list[tuple[int, float]]:
    """(peer node, fraction of the scale-out bytes) for the representative node 0."""
    n_nodes = plan.shape.num_nodes
    if plan.algo in ("direct", "pairwise"):  # uniform over the other nodes, grouped by leaf
        per_leaf: dict[int, int] = {}
        for node in range(1, n_nodes):
            first = topo.leaf_group(cluster, node) * cluster.nodes_per_leaf
            rep = node if topo.leaf_group(cluster, node) == 0 else first
            per_leaf[rep] = per_leaf.get(rep, 0) + 1
        return [(rep, count / (n_nodes - 1)) for rep, count in sorted(per_leaf.items())]
    if plan.algo == "rhd":  # the inter-node exchanges reach across leaves once N > nodes_per_leaf
        far = n_nodes // 2 if n_nodes <= cluster.nodes_per_leaf else max(n_nodes // 2, cluster.nodes_per_leaf)
        return [(far, 1.0)]
    return [(1, 1.0)]


def _scale_up_flows(phase: Phase, cluster: ClusterSpec, shape: GroupShape) -> list[Flow]:
    """Each rank's bytes to its ring neighbour through the switch (spread over every switch chip
    of an NVL72), or, on an xGMI mesh, spread evenly over the direct links to all other members
    (RCCL runs one ring per link, so a rank drives all its links to the group at once)."""
    p = shape.ranks_per_node
    eta = phase.bw_bytes_per_s / ports.scale_up_bw(cluster, p)
    g = topo.build_topology(cluster)
    flows = []
    for grp in range(shape.concurrent_groups_per_node):
        for j in range(p):
            src = topo.gpu(0, grp * p + j)
            peers = [(j + d) % p for d in range(1, p)] if topo.is_mesh(cluster) else [(j + 1) % p]
            for k in peers:
                dst = topo.gpu(0, grp * p + k)
                if src == dst:
                    continue
                share = 1.0 / len(peers)
                loads = []
                for edges, frac in scale_up_paths(cluster, src, dst):
                    check_route(g, edges)
                    loads += [(f"{a}>{b}", phase.wire_bytes * share * frac / (g.edges[a, b]["bw"] * eta))
                              for a, b in edges]
                flows.append(Flow(f"{src}->{dst}", tuple(loads)))
    return flows


def _scale_out_flows(phase: Phase, plan: CollectivePlan, cluster: ClusterSpec) -> list[Flow]:
    shape = plan.shape
    cross = cross_fraction(plan, cluster)
    nominal = ports.nic_bw_per_rank(cluster, shape) * ports.spine_factor(cluster, shape, cross)
    # eta: protocol/algorithm efficiency the closed form applied on top of the port's share
    share = min(1.0, cluster.nics_per_node / min(shape.active_gpus_per_node, cluster.gpus_per_node))
    eta = phase.bw_bytes_per_s / nominal
    g = topo.build_topology(cluster)
    nodes_in_leaf = min(shape.num_nodes, cluster.nodes_per_leaf)
    flows = []
    for i in range(min(shape.active_gpus_per_node, cluster.gpus_per_node)):
        for peer, frac in _peers(plan, cluster):
            src, dst = topo.gpu(0, i), topo.gpu(peer, i)
            edges = route(cluster, src, dst, flow=str(i))
            check_route(g, edges)
            loads = []
            for a, b in edges:
                bw = g.edges[a, b]["bw"] * eta
                if a.startswith("leaf") and b.startswith("spine"):
                    # every node of this leaf sends the same flow; ECMP spreads them over the
                    # spines: charge the leaf's aggregate uplink with all of them
                    loads.append((f"{a}>up", phase.wire_bytes * frac * nodes_in_leaf / (topo.uplink_bw(cluster) * eta)))
                elif a.startswith("spine"):
                    continue  # symmetric to the uplink
                elif g.edges[a, b]["tier"] == "pcie":
                    loads.append((f"{a}>{b}", phase.wire_bytes * frac / (min(bw, nominal * eta / share))))
                else:
                    loads.append((f"{a}>{b}", phase.wire_bytes * frac / bw))
            flows.append(Flow(f"{src}->{dst}", tuple(loads)))
    return flows


def lower(plan: CollectivePlan, cluster: ClusterSpec) -> list[tuple[Phase, list[Flow]]]:
    """Flows of the representative node (scale-up domain) for every phase of ``plan``."""
    cluster = domain_view(cluster)
    out = []
    for phase in plan.phases:
        if phase.tier == "scale_up":
            flows = _scale_up_flows(phase, cluster, plan.shape)
        else:
            flows = _scale_out_flows(phase, plan, cluster)
        out.append((phase, flows))
    return out


Lowered = list[tuple[Phase, list[Flow]]]


def run_concurrently(programs: list[Lowered]) -> list[float]:
    """Run several lowered collectives at once on shared fair-share links (same topology).

    Returns each one's completion time (s): links that two collectives both use are shared,
    so, for example, two equal collectives on the same NICs each take about twice as long.
    """
    env = simpy.Environment()
    links: dict[str, FairShareLink] = {}
    done: dict[int, float] = {}

    def link(key: str) -> FairShareLink:
        if key not in links:
            links[key] = FairShareLink(env, key)
        return links[key]

    def flow_proc(flow: Flow):
        yield env.all_of([link(key).transfer(work) for key, work in flow.loads])

    def program(i: int, lowered: Lowered):
        for phase, flows in lowered:
            yield env.timeout(phase.latency_s)
            if flows:
                yield env.all_of([env.process(flow_proc(f)) for f in flows])
        done[i] = env.now

    for i, lowered in enumerate(programs):
        env.process(program(i, lowered))
    env.run()
    return [done[i] for i in range(len(programs))]


def run_lowered(lowered: Lowered) -> float:
    """Run the phases in order on fair-share links; returns the simulated time (s)."""
    return run_concurrently([lowered])[0]


def simulate_collective(op: str, size_bytes: float, cluster: ClusterSpec, shape: GroupShape,
                        algo: str | None = None) -> float:
    """Event-driven time (s) of the collective that plan_collective chooses (or ``algo``)."""
    plan = plan_collective(op, size_bytes, cluster, shape, algo)
    return run_lowered(lower(plan, cluster))
