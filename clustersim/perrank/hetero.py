"""Mixed GPUs in one job: ``cluster.groups``, where each stage runs, and the balanced split.

```yaml
cluster:
  groups:                                   # node groups, in node order (group 0 holds nodes 0..)
    - {preset: dgx-a100, nodes: 16}
    - {preset: dgx-h100, nodes: 16}        # each group: preset, nodes, and the cluster overrides
  nodes_per_leaf: 32                        # (gpu, scale_up, scale_out, nics_per_node, pcie)
parallel: {tp: 8, pp: 4, dp: 8, balance: auto}   # auto (default) | even; or layers_per_stage: [...]
```

Ranks are placed on the nodes in order (tp-cp-dp-pp, block placement), so with Megatron's order a
pipeline stage usually sits in one group: the first stages on the first group's nodes. All groups
need the same GPUs per node (a TP group must not straddle node types). The fabric between groups
is one fat tree (``nodes_per_leaf``, ``oversubscription`` at the cluster level); a collective or a
transfer between groups moves at the slower side's rate.

A stage's tensor- and context-parallel GPUs run in lockstep, so a stage whose GPUs span two
groups runs on the slower one's. ``balance: auto`` gives the stages layers in proportion to their
speed (clustersim.perrank.balance.balance_layers) and, where data-parallel replicas run on
different GPUs, the replicas micro-batches in proportion to theirs (``balance_micro_batches``; not
with ZeRO-3, whose every-layer gathers keep replicas in step). ``even`` keeps the even split.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_GPUS, MAX_PER_NODE

if TYPE_CHECKING:
    from clustersim.scenario import Scenario


class ClusterGroupSection(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)

    preset: str
    nodes: int = Field(ge=1, le=MAX_GPUS)  # bounds: clustersim.limits
    gpu: str | None = None
    gpus_per_node: int | None = Field(None, ge=1, le=MAX_PER_NODE)
    scale_up: str | None = None
    scale_out: str | None = None
    nics_per_node: int | None = Field(None, ge=1, le=MAX_PER_NODE)
    pcie: str | None = None


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes ``first_node .. first_node + nodes - 1``, all of the cluster ``cluster`` (whose
    ``num_nodes`` is the whole job's, so that the fabric's leaves and spines are the whole fabric's)."""

    preset: str
    nodes: int
    first_node: int
    cluster: ClusterSpec


def load_groups(groups: list[ClusterGroupSection], fabric: dict) -> tuple[ClusterSpec, tuple[NodeGroup, ...]]:
    """The node groups of ``cluster.groups`` and the cluster spec that stands for the whole job
    (group 0's hardware, every group's nodes). ``fabric``: nodes_per_leaf / oversubscription."""
    from clustersim.hardware.load import load_cluster

    total = sum(g.nodes for g in groups)
    out: list[NodeGroup] = []
    first = 0
    for i, g in enumerate(groups):
        overrides = {**g.model_dump(exclude={"preset", "nodes"}, exclude_none=True), **fabric}
        try:
            cluster = load_cluster(g.preset, total, **overrides)
        except InputError as exc:
            raise InputError(f"cluster.groups.{i}.{exc.field.removeprefix('cluster.')}", exc.value,
                             exc.allowed) from None
        out.append(NodeGroup(g.preset, g.nodes, first, cluster))
        first += g.nodes
    gpn = {g.cluster.gpus_per_node for g in out}
    if len(gpn) > 1:
        raise InputError("cluster.groups", [f"{g.preset}: {g.cluster.gpus_per_node}" for g in out],
                         "groups with the same GPUs per node (a tensor-parallel group must not straddle node types)")
    return out[0].cluster, tuple(out)


def group_of_node(groups: tuple[NodeGroup, ...], node: int) -> int:
    for i, g in enumerate(groups):
        if g.first_node <= node < g.first_node + g.nodes:
            return i
    raise ValueError(f"node {node} is in no group")


def variants(scenario: Scenario) -> tuple[Scenario, ...]:
    """The scenario as each group's GPUs see it (its cluster, no groups): one per group, memoised
    on the scenario object so that every cost cache sees the same variant objects."""
    cached = _VARIANTS.get(id(scenario))
    if cached is not None and cached[0] is scenario:
        return cached[1]
    out = tuple(replace(scenario, cluster=g.cluster, node_groups=(), faults=None) for g in scenario.node_groups)
    if len(_VARIANTS) > 256:
        _VARIANTS.clear()
    _VARIANTS[id(scenario)] = (scenario, out)
    return out


_VARIANTS: dict[int, tuple[object, tuple]] = {}


def _layer_and_fixed(variant: Scenario, stage: int) -> tuple[float, float]:
    """Mean forward + backward seconds of one of ``stage``'s layers and the stage's fixed work
    (embedding, output layer), contention-free, as the engine prices them on the variant's GPUs."""
    from clustersim.plan.compiled_unit import compile_unit
    from clustersim.plan.stage_work import build_step_work

    work = build_step_work(variant)
    st = work.stages[stage]
    first, last = stage == 0, stage == len(work.stages) - 1
    fwd = [compile_unit(variant, w).time_s for w in st.forward]
    bwd = [compile_unit(variant, w).time_s for w in st.backward]
    fixed = (fwd[0] + bwd[-1] if first else 0.0) + (fwd[-1] + bwd[0] if last else 0.0)
    return (sum(fwd) + sum(bwd) - fixed) / st.num_layers, fixed


def stage_groups(scenario: Scenario, d: int, p: int) -> tuple[int, ...]:
    """Groups holding the GPUs of pipeline stage ``p`` of replica ``d``."""
    par, gpn = scenario.parallel, scenario.cluster.gpus_per_node
    ranks = (t + par.tp * (c + par.cp * (d + par.dp * p)) for t in range(par.tp) for c in range(par.cp))
    return tuple(sorted({group_of_node(scenario.node_groups, r // gpn) for r in ranks}))


def slowness(scenario: Scenario) -> tuple[float, ...]:
    """Per group: one layer's forward + backward seconds on its GPUs (higher = slower)."""
    return tuple(_layer_and_fixed(v, 0)[0] for v in variants(scenario))


def host_group(scenario: Scenario, d: int, p: int, slow: tuple[float, ...] | None = None) -> int:
    """The group whose GPUs pace stage ``p`` of replica ``d`` (the slowest it spans)."""
    slow = slowness(scenario) if slow is None else slow
    return max(stage_groups(scenario, d, p), key=lambda i: (slow[i], -i))


def resolve(scenario: Scenario, balance: str, explicit_layers: tuple[int, ...] | None) -> Scenario:
    """The scenario with its split settled: layers per stage and micro-batches per replica."""
    from clustersim.perrank.balance import balance_layers, balance_micro_batches

    par = scenario.parallel
    pp, v, dp = par.pp, par.virtual_stages, par.dp
    if not scenario.node_groups or balance == "even":
        return scenario
    slow = slowness(scenario)
    hosts = [[host_group(scenario, d, p, slow) for p in range(pp)] for d in range(dp)]
    vs = variants(scenario)
    layers = explicit_layers
    if layers is None:
        per_layer, fixed = [], []
        for p in range(pp):
            group = max((hosts[d][p] for d in range(dp)), key=lambda i: (slow[i], -i))
            times = [_layer_and_fixed(vs[group], c * pp + p) for c in range(v)]
            per_layer.append(sum(t for t, _ in times) / v)
            fixed.append(sum(f for _, f in times))
        layers = balance_layers(scenario.model.layers, per_layer, fixed, v)
        scenario = replace(scenario, parallel=replace(par, layers_per_stage=layers))
        par = scenario.parallel
        vs = variants(scenario)
    if par.zero_stage == 3 or len({tuple(h) for h in hosts}) == 1:
        return scenario
    per_mb = []
    for d in range(dp):
        stage_s = []
        for p in range(pp):
            times = [_layer_and_fixed(vs[hosts[d][p]], c * pp + p) for c in range(v)]
            stage_s.append(sum(f + t * layers[c * pp + p] for c, (t, f) in enumerate(times)))
        per_mb.append(max(stage_s))
    step = pp if par.schedule == "interleaved-1f1b" and v > 1 else 1
    mbs = balance_micro_batches(par.num_micro_batches * dp, per_mb, pp, step)
    return replace(scenario, micro_batches_per_replica=mbs)


def report(scenario: Scenario) -> dict:
    """The ``heterogeneous`` object of run --json: groups and the split."""
    from clustersim.parallel.pipeline import layout_stage_layers

    par = scenario.parallel
    slow = slowness(scenario)
    stage_gpus = [scenario.node_groups[max((host_group(scenario, d, p, slow) for d in range(par.dp)),
                                           key=lambda i: (slow[i], -i))].cluster.gpu.name for p in range(par.pp)]
    return {
        "groups": [{"preset": g.preset, "gpu": g.cluster.gpu.name, "nodes": g.nodes, "first_node": g.first_node}
                   for g in scenario.node_groups],
        "balance": scenario.balance,
        "stage_gpus": stage_gpus,
        "layers_per_stage": list(layout_stage_layers(par, scenario.model.layers)),
        "micro_batches_per_replica": list(scenario.micro_batches_per_replica
                                          or (par.num_micro_batches,) * par.dp),
    }
