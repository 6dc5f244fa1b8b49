"""Scenarios on the 2026 hardware: scale-up domains and low-precision dtypes, good and bad input."""

from __future__ import annotations

import pytest

from clustersim.errors import InputError
from clustersim.plan.comm_plans import group_shape
from clustersim.scenario import load_scenario

NVL72 = ["cluster.preset=gb200-nvl72", "cluster.nodes=18", "model.preset=llama3-70b", "parallel.pp=1",
         "parallel.global_batch=72", "parallel.sequence_parallel=true"]


def test_tp_16_stays_inside_an_nvl72_domain():
    s = load_scenario(None, [*NVL72, "parallel.tp=8", "parallel.dp=9"])
    assert s.cluster.gpus_per_domain == 72
    shape = group_shape(s, "tp")
    assert (shape.ranks_per_node, shape.num_nodes) == (8, 1)     # 8 GPUs span 2 trays, 1 domain
    s16 = load_scenario(None, ["cluster.preset=gb200-nvl72", "cluster.nodes=16", "model.preset=llama3-405b",
                               "parallel.tp=16", "parallel.pp=1", "parallel.dp=4", "parallel.global_batch=8",
                               "parallel.zero_stage=3"])
    shape = group_shape(s16, "tp")
    assert (shape.ranks_per_node, shape.num_nodes) == (16, 1)
    # on 8-GPU nodes the same TP crosses the network
    on_dgx = load_scenario(None, ["cluster.preset=dgx-b200", "cluster.nodes=8", "model.preset=llama3-405b",
                                  "parallel.tp=16", "parallel.pp=1", "parallel.dp=4", "parallel.global_batch=8",
                                  "parallel.zero_stage=3"])
    assert group_shape(on_dgx, "tp").num_nodes == 2


@pytest.mark.parametrize("overrides,field", [
    (["cluster.preset=gb200-nvl72", "cluster.nodes=20", "parallel.tp=1", "parallel.pp=1"], "cluster.scale_up_domain"),
    (["cluster.preset=gb200-nvl72", "cluster.nodes=18", "cluster.scale_up_domain=70", "parallel.tp=1",
      "parallel.pp=1"], "cluster.scale_up_domain"),
    (["cluster.preset=dgx-h100", "cluster.scale_up_domain=0"], "cluster.scale_up_domain"),
    (["cluster.preset=gb200-nvl72", "cluster.nodes=36", "parallel.tp=48", "parallel.pp=1", "parallel.dp=3", "parallel.global_batch=12",
      "model.heads=96", "model.hidden=12288", "model.kv_heads=48", "model.ffn_hidden=49152"], "parallel.tp"),
    (["cluster.preset=dgx-h100", "training.dtype=fp4"], "training.dtype"),
    (["cluster.preset=mi300x", "training.dtype=fp4"], "training.dtype"),
    (["cluster.preset=dgx-h100", "training.dtype=fp8", "training.fp8_recipe=mxfp8"], "training.fp8_recipe"),
    (["cluster.preset=mi355x", "cluster.nodes=2", "training.dtype=fp4", "training.fp4_recipe=nvfp4"],
     "training.fp4_recipe"),
    (["cluster.preset=dgx-b200", "training.fp8_recipe=mxfp8"], "training.fp8_recipe"),
    (["cluster.preset=dgx-b200", "training.dtype=fp8", "training.fp8_recipe=e4m3"], "training.fp8_recipe"),
    (["cluster.preset=dgx-b200", "cluster.topology=torus"], "cluster.topology"),
    (["cluster.preset=dgx-b200", "cluster.pue=0.9"], "cluster.pue"),
])
def test_bad_hardware_input_names_the_field(overrides, field):
    with pytest.raises(InputError) as exc:
        load_scenario(None, overrides)
    assert exc.value.field.startswith(field), exc.value


def test_recipes_resolve_per_gpu():
    assert load_scenario(None, ["cluster.preset=dgx-b200", "training.dtype=fp8"]).training.recipe == "mxfp8"
    assert load_scenario(None, ["cluster.preset=dgx-h100", "training.dtype=fp8"]).training.recipe == "delayed"
    assert load_scenario(None, ["cluster.preset=dgx-b200", "training.dtype=fp4"]).training.recipe == "nvfp4"
    mi355 = load_scenario(None, ["cluster.preset=mi355x", "cluster.nodes=2", "training.dtype=fp4"])
    assert mi355.training.recipe == "mxfp4"
    assert load_scenario(None, ["cluster.preset=dgx-h100", "training.dtype=fp8",
                                "training.fp8_recipe=blockwise"]).training.recipe == "blockwise"
    assert load_scenario(None, []).training.recipe == ""


def test_a_job_smaller_than_one_domain_runs_on_a_partition():
    s = load_scenario(None, ["cluster.preset=gb200-nvl72", "cluster.nodes=4", "parallel.tp=2", "parallel.pp=2"])
    assert s.cluster.num_gpus == 16 and s.cluster.gpus_per_domain == 16
