"""Mixed GPUs in one job (``cluster.groups``: clustersim.scenario.node_groups): where each stage runs, the balanced split.

Ranks are placed on the nodes in order (tp-cp-dp-pp, block placement), so with Megatron's order a
pipeline stage usually sits in one group: the first stages on the first group's nodes. All groups
need the same GPUs per node (a TP group must not straddle node types). The fabric between groups
is one fat tree (``nodes_per_leaf``, ``oversubscription`` at the cluster level); a collective or a
transfer between groups moves at the slower side's rate.

A stage's tensor- and context-parallel GPUs run in lockstep, so a stage whose GPUs span two
groups runs on the slower one's. ``balance: auto`` gives the stages layers in proportion to their
speed (clustersim.parallel.balance.balance_layers) and, where data-parallel replicas run on
different GPUs, the replicas micro-batches in proportion to theirs (``balance_micro_batches``; not
with ZeRO-3, whose every-layer gathers keep replicas in step). ``even`` keeps the even split. A V
or DualPipe stage graph keeps the even layers under ``auto`` too (``resolve``), and the scenario's
``balance`` then reads ``schedule``, the value ``heterogeneous.balance`` reports.

The split prices stages with the plan's cost functions, so it is settled after loading
(``balanced``, which api.simulate and api.estimate call), never by the scenario loader.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from clustersim.parallel.balance import balance_layers, balance_micro_batches
from clustersim.parallel.pipeline import layout_stage_layers, stage_layers
from clustersim.parallel.stage_graph import stage_graph
from clustersim.plan.compiled_unit import compile_unit
from clustersim.plan.stage_work import build_step_work
from clustersim.scenario import Scenario
from clustersim.scenario.node_groups import group_of_node


@functools.lru_cache(maxsize=256)
def variants(scenario: Scenario) -> tuple[Scenario, ...]:
    """The scenario as each group's GPUs see it (its cluster, no groups): one per group. A pure
    function of the frozen scenario, memoised so that every cost memo downstream (units compiled
    per host scenario, per-rank classes grouped by host) sees the same variant objects."""
    return tuple(replace(scenario, cluster=g.cluster, node_groups=(), faults=None) for g in scenario.node_groups)


def _layer_and_fixed(variant: Scenario, stage: int) -> tuple[float | None, float]:
    """Mean forward + backward seconds of one of ``stage``'s layers and the stage's fixed work
    (embedding, output layer), contention-free, as the engine prices them on the variant's GPUs.
    A stage without layers (``E|t*16|t*16|L``: the embedding or the loss alone) has no per-layer
    time (None); its fixed work is all it runs."""
    work = build_step_work(variant)
    st = work.stages[stage]
    first, last = stage == 0, stage == len(work.stages) - 1
    fwd = [compile_unit(variant, w).time_s for w in st.forward]
    bwd = [compile_unit(variant, w).time_s for w in st.backward]
    fixed = (fwd[0] + bwd[-1] if first else 0.0) + (fwd[-1] + bwd[0] if last else 0.0)
    if not st.num_layers:
        return None, sum(fwd) + sum(bwd)
    return (sum(fwd) + sum(bwd) - fixed) / st.num_layers, fixed


def stage_groups(scenario: Scenario, d: int, p: int) -> tuple[int, ...]:
    """Groups holding the GPUs of pipeline stage ``p`` of replica ``d``."""
    par, gpn = scenario.parallel, scenario.cluster.gpus_per_node
    ranks = (t + par.tp * (c + par.cp * (d + par.dp * p)) for t in range(par.tp) for c in range(par.cp))
    return tuple(sorted({group_of_node(scenario.node_groups, r // gpn) for r in ranks}))


def slowness(scenario: Scenario) -> tuple[float, ...]:
    """Per group: one layer's forward + backward seconds on its GPUs (higher = slower), priced on
    the first stage that holds layers (stage 0 may hold only the embedding)."""
    vs = variants(scenario)
    stages = build_step_work(vs[0]).stages
    stage = next(i for i, st in enumerate(stages) if st.num_layers)
    return tuple(_layer_and_fixed(v, stage)[0] for v in vs)


def host_group(scenario: Scenario, d: int, p: int, slow: tuple[float, ...] | None = None) -> int:
    """The group whose GPUs pace stage ``p`` of replica ``d`` (the slowest it spans)."""
    slow = slowness(scenario) if slow is None else slow
    return max(stage_groups(scenario, d, p), key=lambda i: (slow[i], -i))


def balanced(scenario: Scenario) -> Scenario:
    """``scenario`` with its split settled (module docstring); any scenario without node groups,
    or with ``balance: even``, as it is. Settling a settled scenario changes nothing (its layers per
    stage then count as given)."""
    return resolve(scenario, scenario.balance, scenario.parallel.layers_per_stage or None)


def resolve(scenario: Scenario, balance: str, explicit_layers: tuple[int, ...] | None) -> Scenario:
    """The scenario with its split settled: layers per stage and micro-batches per replica."""
    par = scenario.parallel
    pp, v, dp = par.pp, par.virtual_stages, par.dp
    if not scenario.node_groups or balance == "even":
        return scenario
    slow = slowness(scenario)
    hosts = [[host_group(scenario, d, p, slow) for p in range(pp)] for d in range(dp)]
    vs = variants(scenario)
    layers = explicit_layers
    graph = stage_graph(par.schedule, pp, v)
    if layers is None and not graph.in_rank_order:
        # a V or DualPipe graph holds other stages than chunk * pp + rank on a rank: the balance
        # below would split by the wrong stages (DualPipe: slower than even; V: a split reported and
        # never simulated), so the layers stay even and the report says so (balance "schedule",
        # docs/perrank.md)
        layers = stage_layers(scenario.model.layers, pp, v)
        scenario = replace(scenario, balance="schedule")
    if layers is None:
        per_layer, fixed = [], []
        for p in range(pp):
            group = max((hosts[d][p] for d in range(dp)), key=lambda i: (slow[i], -i))
            times = [_layer_and_fixed(vs[group], c * pp + p) for c in range(v)]
            defined = [t for t, _ in times if t is not None]
            per_layer.append(sum(defined) / len(defined) if defined else slow[group])
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
            stage_s.append(sum(f + (t or 0.0) * layers[c * pp + p] for c, (t, f) in enumerate(times)))
        per_mb.append(max(stage_s))
    step = pp if par.schedule == "interleaved-1f1b" and v > 1 else 1
    mbs = balance_micro_batches(par.num_micro_batches * dp, per_mb, pp, step)
    return replace(scenario, micro_batches_per_replica=mbs)


def report(scenario: Scenario) -> dict:
    """The ``heterogeneous`` object of run --json: groups and the split."""
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
