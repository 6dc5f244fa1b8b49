"""Collectives: closed-form plans per algorithm (NCCL's choice) and the event-driven check."""

from clustersim.collectives.lowering import simulate_collective
from clustersim.collectives.plan import OPS, CollectivePlan, GroupShape, Phase, busbw_factor
from clustersim.collectives.planner import applicable_algos, plan_collective

__all__ = ["OPS", "CollectivePlan", "GroupShape", "Phase", "applicable_algos", "busbw_factor", "plan_collective",
           "simulate_collective"]
