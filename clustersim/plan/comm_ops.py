"""Cost plans of the collectives that a layer's ops name, beyond plain NCCL collectives.

* ``deepep``: DeepEP's normal dispatch/combine kernels (deepseek-ai/DeepEP, V1 docs/legacy.md):
  every token crosses the scale-out fabric once per destination node and is forwarded over
  NVLink inside it; both run at once ("asymmetric-domain bandwidth forwarding"), so the exchange
  takes as long as the busier of the rank's NIC share (``out_bytes``) and its NVLink port
  (``up_bytes``), plus the latency of an all-to-all over the EP group. DeepEP's measured
  bottleneck bandwidths (H800, CX7 400 Gb/s, DeepSeek-V3 settings: 43-58 GB/s RDMA for EP16-64,
  153-158 GB/s NVLink intranode) are what the fabric profiles' achievable rates give.
* ``host_copy``: a copy to or from host memory (clustersim.plan.host_offload).
* everything else: ``clustersim.plan.comm_plans.comm_plan`` (NCCL's algorithms on the group's shape).
"""

from __future__ import annotations

import functools

from clustersim.collectives import CollectivePlan, Phase, ports
from clustersim.compute.ops import CommOp
from clustersim.plan.comm_plans import comm_plan, group_shape
from clustersim.plan.host_offload import host_copy_plan
from clustersim.scenario import Scenario


def op_plan(scenario: Scenario, op: CommOp) -> CollectivePlan:
    if op.collective == "host_copy":
        return host_copy_plan(scenario, op.size_bytes)
    if op.collective == "deepep":
        return deepep_plan(scenario, op.up_bytes, op.out_bytes, op.size_bytes)
    return comm_plan(scenario, op.collective, op.size_bytes, op.group)


@functools.lru_cache(maxsize=4096)
def deepep_plan(scenario: Scenario, up_bytes: float, out_bytes: float, size_bytes: float) -> CollectivePlan:
    shape = group_shape(scenario, "ep")
    lat = sum(ph.latency_s for ph in comm_plan(scenario, "all_to_all", size_bytes, "ep").phases)
    cluster = scenario.cluster
    cands = [("scale_up", up_bytes, ports.scale_up_bw(cluster))]
    if shape.num_nodes > 1:
        cross = ports.all_to_all_cross_fraction(cluster, shape)
        cands.append(("scale_out", out_bytes,
                      ports.nic_bw_per_rank(cluster, shape) * ports.spine_factor(cluster, shape, cross)))
    tier, wire, bw = max(cands, key=lambda c: (c[1] / c[2], c[0] == "scale_out"))
    return CollectivePlan("all_to_all", "deepep", size_bytes, shape, (Phase(tier, lat, wire, bw),))
