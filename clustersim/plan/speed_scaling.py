"""A slower GPU or link as a transformation of the cost plans (pure functions).

* A GPU at ``speed`` s (0 < s <= 1) runs every kernel in ``time_s / s``: a straggler or a
  throttled GPU (clock or power capped) slows its whole stream of kernels; the collectives it takes
  part in are priced by the network model, not by its clock.
* A scale-out link at ``link_speed`` s moves bytes at s times its bandwidth. NCCL splits a
  collective evenly over its channels and rails (a ring per channel through every node), so the
  collective finishes when its slowest ring does: every scale-out phase of a collective or a
  pipeline transfer that touches the slow link runs at s times its bandwidth. Latencies stay.
"""

from __future__ import annotations

from dataclasses import replace

from clustersim.collectives import CollectivePlan, Phase
from clustersim.compute import Op
from clustersim.plan.data_parallel import DpPlan
from clustersim.plan.stage_work import Work


def scale_plan(plan: CollectivePlan, link_speed: float) -> CollectivePlan:
    """The plan with its scale-out phases at ``link_speed`` times their bandwidth."""
    if link_speed == 1.0 or not any(ph.tier == "scale_out" for ph in plan.phases):
        return plan
    phases = tuple(Phase(ph.tier, ph.latency_s, ph.wire_bytes, ph.bw_bytes_per_s * link_speed)
                   if ph.tier == "scale_out" else ph for ph in plan.phases)
    return replace(plan, phases=phases)


def scale_work(work: Work, speed: float) -> Work:
    """Kernels of ``work`` on a GPU running at ``speed`` of nominal (collectives unchanged)."""
    if speed == 1.0:
        return work
    return tuple(replace(op, time_s=op.time_s / speed) if isinstance(op, Op) else op for op in work)


def scale_dp_plan(plan: DpPlan, link_speed: dict[int, float]) -> DpPlan:
    """Data-parallel collectives of global stage ``g`` at ``link_speed[g]`` (missing: 1)."""
    if all(s == 1.0 for s in link_speed.values()):
        return plan

    def items(table: dict, stage_of) -> dict:
        return {key: tuple((name, scale_plan(p, link_speed.get(stage_of(key), 1.0))) for name, p in value)
                for key, value in table.items()}

    z3 = plan.zero3
    if z3 is not None:
        z3 = replace(z3, gather=items(z3.gather, lambda k: k[0]), reduce=items(z3.reduce, lambda k: k[0]))
    return DpPlan(items(plan.grad_buckets, lambda k: k[0]), items(plan.after_backward, lambda k: k),
                  items(plan.param_gathers, lambda k: k[0]), items(plan.after_optimizer, lambda k: k), z3,
                  plan.every_backward, plan.blocking_reduce)
