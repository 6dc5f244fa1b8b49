"""The search space agrees with the scenario loader: every enumerated layout is accepted, and
every accepted layout is enumerated up to the documented symmetry rules S1-S4."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from clustersim.errors import InputError
from clustersim.hardware.load import load_cluster
from clustersim.parallel.layout import ParallelLayout
from clustersim.scenario import check_layout, model_from_fields
from clustersim.sweep.space import (
    SWEEP_RECOMPUTE,
    SearchSpace,
    count_layouts,
    divisors,
    enumerate_layouts,
    layout_key,
)

CASES = [
    # (model fields, nodes, gpus_per_node, global_batch)
    (dict(layers=6, hidden=96, heads=6, vocab=100, seq_len=64), 2, 4, 12),
    (dict(layers=4, hidden=64, heads=4, vocab=100, seq_len=48), 1, 8, 16),
    (dict(layers=8, hidden=128, heads=8, kv_heads=2, vocab=100, seq_len=32), 2, 4, 8),
    # tp 8 divides the sequence (24) but not a CP rank's share of it (12): no SP there
    (dict(layers=4, hidden=64, heads=8, vocab=100, seq_len=24), 2, 8, 4),
]


def _canonical(p: ParallelLayout) -> ParallelLayout:
    """The representative that the symmetry rules keep."""
    if p.tp == 1:
        p = replace(p, sequence_parallel=False)  # S1
    if p.dp * p.cp == 1:
        p = replace(p, zero_stage=0)  # S2
    if p.schedule == "interleaved-1f1b" and p.virtual_stages == 1:
        p = replace(p, schedule="1f1b")  # S4
    if p.schedule == "gpipe" and (p.pp == 1 or p.num_micro_batches == 1):
        p = replace(p, schedule="1f1b")  # S3
    return p


def _brute_force(model, cluster, gb: int, allow_tp_across: bool) -> set[tuple[int, ...]]:
    gpus = cluster.num_gpus
    out = set()
    for tp, cp, pp in itertools.product(divisors(gpus), repeat=3):
        if gpus % (tp * cp * pp):
            continue
        dp = gpus // (tp * cp * pp)
        if not allow_tp_across and cluster.gpus_per_node % tp:
            continue
        # the zero-bubble and DualPipe schedules are searched for MoE models only (space.schedule_options)
        dense_schedules = ("gpipe", "1f1b", "interleaved-1f1b")
        for mb, zero, rec, sp, sched in itertools.product(range(1, gb + 1), range(4), SWEEP_RECOMPUTE, (False, True),
                                                          dense_schedules):
            for v in range(1, model.layers + 1):
                p = ParallelLayout(tp=tp, pp=pp, dp=dp, cp=cp, micro_batch=mb, global_batch=gb, zero_stage=zero,
                                   recompute=rec, sequence_parallel=sp, schedule=sched, virtual_stages=v)
                try:
                    check_layout(model, cluster, p)
                except InputError:
                    continue
                out.add(layout_key(_canonical(p)))
    return out


@pytest.mark.parametrize("fields,nodes,gpn,gb", CASES)
def test_enumeration_is_the_loader_up_to_symmetry(fields, nodes, gpn, gb):
    model = model_from_fields("m", fields)
    cluster = load_cluster("dgx-a100", nodes, gpus_per_node=gpn, nics_per_node=gpn)
    template = ParallelLayout(global_batch=gb)
    listed = list(enumerate_layouts(model, cluster, template))
    keys = [layout_key(p) for p in listed]
    for p in listed:
        check_layout(model, cluster, p)  # the loader accepts every one
        assert _canonical(p) == p  # and none is a symmetric twin of another
    assert len(set(keys)) == len(keys)
    assert set(keys) == _brute_force(model, cluster, gb, allow_tp_across=False)
    assert keys == sorted(keys)  # canonical order
    assert count_layouts(model, cluster, template) == len(listed)


def test_tp_across_nodes_only_when_allowed():
    model = model_from_fields("m", dict(layers=4, hidden=64, heads=8, vocab=100, seq_len=32))
    cluster = load_cluster("dgx-a100", 2, gpus_per_node=4, nics_per_node=4)
    template = ParallelLayout(global_batch=8)
    inside = {p.tp for p in enumerate_layouts(model, cluster, template)}
    across = {p.tp for p in enumerate_layouts(model, cluster, template, SearchSpace(allow_tp_across_nodes=True))}
    assert inside == {1, 2, 4}
    assert across == {1, 2, 4, 8}


def test_gpt3_space_respects_the_rules():
    """GPT-3 175B on 1,024 A100: heads 96 -> tp in {1,2,4,8} inside a node; pp*v <= 96; dp divides 1536."""
    from clustersim.scenario import load_scenario

    s = load_scenario(None, ["model.preset=gpt3-175b", "cluster.preset=dgx-a100", "cluster.nodes=128",
                             "parallel.tp=8", "parallel.pp=8", "parallel.dp=16", "parallel.global_batch=1536",
                             "parallel.sequence_parallel=false", "parallel.recompute=none", "parallel.zero_stage=0"])
    from clustersim.sweep.space import shapes

    shp = shapes(s.model, s.cluster, 1536)
    assert {x.tp for x in shp} == {1, 2, 4, 8}
    assert all(1536 % x.dp == 0 and x.tp * x.cp * x.pp * x.dp == 1024 and x.pp <= 96 for x in shp)
    assert count_layouts(s.model, s.cluster, s.parallel) > 100_000


@pytest.mark.parametrize("fix,most", [
    (("parallel.cp=1",), ()), (("parallel.zero_stage=1", "parallel.recompute=full"), ()),
    (("parallel.schedule=interleaved-1f1b",), ("parallel.virtual_stages=3",)),
    ((), ("parallel.tp=2", "parallel.micro_batch=2", "parallel.pp=2")),
    (("parallel.sequence_parallel=true", "parallel.dp=2"), ()),
])
@pytest.mark.parametrize("fields,nodes,gpn,gb", CASES)
def test_constraints_enumerate_the_space_they_filter(fields, nodes, gpn, gb, fix, most):
    """A constrained space is the unconstrained one filtered by the constraints, in the same
    order, and counted as it is enumerated (clustersim.sweep.constraints)."""
    from clustersim.sweep.constraints import parse_constraints
    from clustersim.sweep.runner import parallel_dict

    model = model_from_fields("m", fields)
    cluster = load_cluster("dgx-a100", nodes, gpus_per_node=gpn, nics_per_node=gpn)
    template = ParallelLayout(global_batch=gb)
    c = parse_constraints(model, fix, most)
    space = c.apply(SearchSpace(), model)
    want = [layout_key(p) for p in enumerate_layouts(model, cluster, template)
            if c.allows(parallel_dict(layout_key(p), gb))]
    got = [layout_key(p) for p in enumerate_layouts(model, cluster, template, space)]
    assert got == want and count_layouts(model, cluster, template, space) == len(got)


def test_ulysses_grids_split_the_key_value_heads_too():
    """An all-to-all CP group splits the key/value heads of a TP rank as well as its query heads
    (Transformer Engine asserts both): with 2 KV heads only tp 1 with cp 2 is a Ulysses grid
    (before, cp 4 and 8 over tp 1, cp 2 and 4 over tp 2 and cp 2 over tp 4 were enumerated)."""
    model = model_from_fields("m", dict(layers=4, hidden=64, heads=8, kv_heads=2, vocab=100, seq_len=64))
    cluster = load_cluster("dgx-a100", 1, gpus_per_node=8, nics_per_node=8)
    listed = list(enumerate_layouts(model, cluster, ParallelLayout(global_batch=8, cp_comm="a2a")))
    for p in listed:
        check_layout(model, cluster, p)
    assert {(p.tp, p.cp) for p in listed if p.cp > 1} == {(1, 2)}


def test_deepspeed_pipelines_run_zero_0_and_1_only():
    """DeepSpeed's PipelineEngine asserts ZeRO < 2 ('ZeRO-2 and ZeRO-3 are incompatible with
    pipeline parallelism'): `run` refuses it naming parallel.zero_stage, and a DeepSpeed sweep
    enumerates ZeRO-2/3 only without a pipeline (it searched and could rank them before)."""
    from clustersim.api import SWEEP_EVALUATORS
    from clustersim.scenario import scenario_from_dict
    from clustersim.sweep.runner import sweep_spec

    raw = {"framework": "deepspeed", "model": {"preset": "llama3-8b", "seq_len": 2048},
           "cluster": {"preset": "dgx-h100", "nodes": 1},
           "parallel": {"tp": 1, "pp": 2, "dp": 4, "zero_stage": 2, "global_batch": 16}}
    with pytest.raises(InputError) as exc:
        scenario_from_dict(raw)
    assert exc.value.field == "parallel.zero_stage"
    sc = scenario_from_dict({**raw, "parallel": {**raw["parallel"], "zero_stage": 1}})
    spec = sweep_spec(sc, evaluators=SWEEP_EVALUATORS)
    listed = list(enumerate_layouts(sc.model, sc.cluster, sc.parallel, spec.space))
    assert {p.zero_stage for p in listed if p.pp > 1} == {0, 1}
    assert {p.zero_stage for p in listed if p.pp == 1} == {0, 1, 2, 3}
    for p in listed[::50]:
        scenario_from_dict({**raw, "parallel": {"tp": p.tp, "pp": p.pp, "dp": p.dp, "cp": p.cp,
                                                "zero_stage": p.zero_stage, "global_batch": 16,
                                                "micro_batch": p.micro_batch}})


def test_a_sweep_with_the_ep_overlap_enumerates_only_layouts_megatron_runs():
    """With parallel.overlap_moe_expert_parallel_comm the sweep searched 1F1B on pp > 1 and full
    recompute, which Megatron-Core refuses (clustersim.parallel.rules.ep_overlap_conflict)."""
    from clustersim.parallel.rules import ep_overlap_conflict
    model = model_from_fields("moe", dict(layers=4, hidden=64, heads=4, vocab=100, seq_len=48,
                                          moe={"experts": 8, "top_k": 2}))
    cluster = load_cluster("dgx-h100", 2)
    template = ParallelLayout(tp=1, pp=1, dp=16, ep=8, micro_batch=1, global_batch=32,
                              overlap_moe_expert_parallel_comm=True)
    layouts = list(enumerate_layouts(model, cluster, template))
    plain = list(enumerate_layouts(model, cluster, replace(template, overlap_moe_expert_parallel_comm=False)))
    assert layouts and len(layouts) < len(plain)
    assert all(ep_overlap_conflict(model, p) is None for p in layouts)
    assert not any(p.recompute == "full" or (p.pp > 1 and p.schedule == "1f1b") for p in layouts)
    assert count_layouts(model, cluster, template) == len(layouts)
