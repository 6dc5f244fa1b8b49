"""The host Adam of optimizer offload streams through the node's own host memory bandwidth, the
cluster profile's host_memory_bw_GBps (it used one DGX H100 figure for every cluster), with the
DGX H100's as the stated fallback where a profile gives none."""

from __future__ import annotations

import math

import pytest

from clustersim import api
from clustersim.compute.optimizer import ADAM_MIXED_BYTES_PER_PARAM
from clustersim.hardware.load import load_cluster
from clustersim.plan.host_offload import (
    HOST_DRAM_BW_BYTES_PER_S_PER_NODE,
    host_dram_bw,
    host_optimizer_time_s,
)
from clustersim.scenario import scenario_from_dict


@pytest.mark.parametrize(("preset", "gbps"), [("dgx-a100", 409.6), ("dgx-a100-40gb", 409.6), ("dgx-h100", 614.4),
                                              ("dgx-b200", 716.8), ("gb200-nvl72", 1024.0)])
def test_presets_give_their_host_memory_bandwidth(preset, gbps):
    assert host_dram_bw(load_cluster(preset, 1)) == (pytest.approx(gbps * 1e9), True)


def test_a_profile_without_it_falls_back_to_the_dgx_h100_and_says_so():
    bw, given = host_dram_bw(load_cluster("mi300x", 1))
    assert (bw, given) == (HOST_DRAM_BW_BYTES_PER_S_PER_NODE, False)
    sc = _scenario("mi300x")
    host = api.estimate(sc).host_memory
    assert host["adam_bw_from_profile"] is False and host["adam_bw_bytes_per_s_per_node"] == bw


def _scenario(preset: str):
    return scenario_from_dict({"framework": "deepspeed", "model": {"preset": "llama2-7b"},
                               "cluster": {"preset": preset, "nodes": 1},
                               "parallel": {"dp": 8, "global_batch": 64, "zero_stage": 2, "recompute": "full",
                                            "offload": {"optimizer": True}}})


def test_the_host_adam_time_follows_the_bandwidth():
    shard = 10**9
    a100, h100 = _scenario("dgx-a100"), _scenario("dgx-h100")

    def adam_s(sc):   # host_optimizer_time_s less its two copies over the host link
        from clustersim.plan.host_offload import host_copy_s
        return host_optimizer_time_s(sc, shard) - host_copy_s(sc, shard * 4) - host_copy_s(sc, shard * 2)
    assert math.isclose(adam_s(a100), shard * ADAM_MIXED_BYTES_PER_PARAM / (409.6e9 / 8), rel_tol=1e-12)
    assert math.isclose(adam_s(a100) / adam_s(h100), 614.4 / 409.6, rel_tol=1e-12)


def test_the_host_adam_streams_bf16_moments_at_their_bytes():
    # the host holds bf16 m and v (the memory report's states): its Adam moves 38 - 8 = 30 B per parameter
    shard = 10**9
    raw = {"framework": "megatron-core", "model": {"preset": "llama2-7b"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
           "parallel": {"dp": 8, "global_batch": 64, "zero_stage": 1, "recompute": "full", "offload": {"optimizer": True}},
           "training": {"dtype": "bf16", "adam_moments": "bf16"}}
    sc = scenario_from_dict(raw)
    from clustersim.plan.host_offload import host_copy_s
    adam_s = host_optimizer_time_s(sc, shard) - host_copy_s(sc, shard * 4) - host_copy_s(sc, shard * 2)
    assert math.isclose(adam_s, shard * (ADAM_MIXED_BYTES_PER_PARAM - 8) / (409.6e9 / 8), rel_tol=1e-12)
