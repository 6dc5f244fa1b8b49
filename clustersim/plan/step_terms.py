"""Per-rank additive terms of a step that both engines read from the plan: the wait for the
slowest GPU (``jitter``, clustersim.compute.variation) and the host's share (``host``,
clustersim.compute.host).

Both are deterministic: the expected value of what they model, computed once per simulated rank
from its contention-free kernel seconds and kernel counts. The engines add them, in this order,
after the rank's last data-parallel collective and before its optimizer step, so that the event
engine and the closed form still agree exactly wherever nothing contends. The sweep's lower
bounds add only a floor of each (clustersim.sweep.screen ``Screen.wait_floor_s``, from
``fixed_host_s`` and ``compute.host.own_deficit_s``), so they stay bounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clustersim.compute import host
from clustersim.compute.variation import sync_wait_fraction
from clustersim.frameworks import megatron_family
from clustersim.plan.comm_plans import comm_plan
from clustersim.plan.stage_work import StepWork
from clustersim.scenario import Scenario

Total = tuple[float, tuple[tuple[str, float], ...]]


def compute_seconds(total: Total) -> float:
    return sum(sec for cause, sec in total[1] if cause == "compute")


def jitter_s(scenario: Scenario, actions: Mapping[tuple[int, str], int], totals: Mapping[tuple[int, str], Total],
             optimizer_s: float) -> float:
    """The rank's kernel seconds in the step (its actions', ``actions``: how many of each
    (global stage, part), and its optimizer's) times the expected wait for the slowest of the
    job's GPUs (clustersim.compute.variation; the same on a rank with a faulty GPU, which the
    engines run at ``variation.speed_beyond_spread``)."""
    frac = sync_wait_fraction(scenario.parallel.num_gpus)
    if frac <= 0.0:
        return 0.0
    return frac * (sum(n * compute_seconds(totals[key]) for key, n in actions.items()) + optimizer_s)


def issue_deficits(scenario: Scenario, work: StepWork, unit_s: Mapping[tuple[int, str], Sequence[float]]
                   ) -> dict[tuple[int, str], float]:
    """The issue deficit of each action (global stage, part) of a rank, from its units' host time
    (``StageWork.issues``) and GPU seconds (``unit_s``: each unit's contention-free time)."""
    megatron, syncs = issue_rules(scenario)
    return {key: host.issue_deficit_s(work.stages[key[0]].issues(key[1], megatron, syncs), gpu)
            for key, gpu in unit_s.items()}


def issue_rules(scenario: Scenario) -> tuple[bool, bool]:
    """How the host issues the job's units (``StageWork.issues``): whether layers cost
    Megatron-Core's measured host time, and whether a MoE layer's dispatch syncs (dropless
    Megatron MoE; not with the input padded to capacity: clustersim.compute.host)."""
    megatron = megatron_family(scenario.framework.name)
    return megatron, megatron and not scenario.model.moe_pad_to_capacity


def fixed_host_s(scenario: Scenario, barrier_s: float) -> float:
    """The step's synchronising calls (``host.sync_points``, each one kernel issue of idle GPU),
    Megatron's level-1 timer barrier and, with fp16, the found-inf all-reduce (``barrier_s``
    each: a 4-byte all-reduce over all GPUs)."""
    framework, dtype = scenario.framework.name, scenario.training.dtype
    fixed = host.sync_points(framework, dtype) * host.KERNEL_ISSUE_S
    if megatron_family(framework):
        fixed += barrier_s                     # the level-1 timer's barrier
    if dtype == "fp16":
        fixed += barrier_s                     # the found-inf all-reduce
    return fixed


def host_s(scenario: Scenario, actions: Mapping[tuple[int, str], int], deficits: Mapping[tuple[int, str], float],
           micro_batches: int, holds_data: bool, barrier_s: float) -> float:
    """Issue deficits of the rank's actions (``actions``: how many of each (global stage, part);
    ``deficits``: ``issue_deficits``), the step's synchronising calls and, for Megatron on the
    stages that read the data, the per-micro-batch broadcast of the batch over TP
    (clustersim.compute.host)."""
    deficit = sum(n * deficits[key] for key, n in actions.items())
    data = 0.0
    par = scenario.parallel
    if holds_data and par.tp > 1 and megatron_family(scenario.framework.name):
        size = par.micro_batch * scenario.model.seq_len * 8   # int64 token ids (and alike) of one micro-batch
        data = micro_batches * host.MEGATRON_BATCH_BROADCASTS * comm_plan(scenario, "broadcast", size, "tp").time_s
    return deficit + fixed_host_s(scenario, barrier_s) + data
