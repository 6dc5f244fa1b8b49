"""`goodput` on a mixed cluster (`cluster.groups`): each group's own hardware."""

from __future__ import annotations

import pytest

from clustersim.api import estimate
from clustersim.goodput.report import goodput_report
from clustersim.scenario import scenario_from_dict


def _mixed(groups: list[dict]) -> dict:
    # Llama 3 8B, TP 8, two pipeline stages: stage 0 on the first group's 2 nodes, stage 1 on the
    # second's; balancing gives the faster GPUs' stage more layers, so it saves the larger share
    return {"name": "mixed", "model": {"preset": "llama3-8b"}, "cluster": {"groups": groups, "nodes_per_leaf": 32},
            "parallel": {"tp": 8, "pp": 2, "dp": 2, "micro_batch": 1, "global_batch": 16, "zero_stage": 1}}


def test_each_gpu_snapshots_over_its_own_host_link() -> None:
    """Group 0's PCIe (DGX A100, gen4) stood for every GPU: the H100 stage's larger share was
    copied at the A100's rate. Each stage's share now goes over its own group's host link and the
    snapshot lasts as long as the slowest copy."""
    sc = scenario_from_dict(_mixed([{"preset": "dgx-a100", "nodes": 2}, {"preset": "dgx-h100", "nodes": 2}]))
    step = estimate(sc)
    r = goodput_report(step, 1.0)
    # a GPU saves its stage's bf16 weights over the 2 data-parallel replicas plus its ZeRO-1 shard
    shares = [m.weights / 2 + float(m.optimizer_states) for m in step.memory_by_stage]
    bws = [g.cluster.pcie.effective_bw_bytes_per_s for g in sc.node_groups]
    assert bws[0] < bws[1] and shares[1] > shares[0]
    assert r.checkpoint.per_gpu_bytes == pytest.approx(max(shares), rel=1e-12)
    assert r.checkpoint.snapshot_s == pytest.approx(max(s / b for s, b in zip(shares, bws, strict=True)), rel=1e-12)
    assert r.checkpoint.snapshot_s < r.checkpoint.per_gpu_bytes / bws[0]


def test_nics_are_counted_per_group() -> None:
    """16 x 8 + 16 x 2 NICs were counted as 256 (group 0's 8 per node on every node); here 2 x 8
    + 2 x 2 = 20, and a leaf group has as many rails as its nodes' most NICs."""
    sc = scenario_from_dict(_mixed([{"preset": "dgx-a100", "nodes": 2},
                                    {"preset": "dgx-h100", "nodes": 2, "nics_per_node": 2}]))
    r = goodput_report(estimate(sc), 1.0)
    counts = {c.name: c.count for c in r.classes}
    assert counts["nic"] == 2 * 8 + 2 * 2
