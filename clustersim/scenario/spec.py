"""The frozen Scenario: one training job on one cluster, as the loader builds it (clustersim.scenario.loader)."""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.frameworks import FrameworkSpec
from clustersim.goodput.config import GoodputSpec
from clustersim.hardware.spec import ClusterSpec
from clustersim.hashcache import HashMemo, cache_hash
from clustersim.parallel.layout import ParallelLayout
from clustersim.scenario.faults import FaultSpec
from clustersim.scenario.node_groups import NodeGroup
from clustersim.workload.model_spec import ModelSpec


@dataclass(frozen=True, slots=True)
class TrainingSpec:
    """``attention``: "flash" (fused, FlashAttention-style) or "standard" (unfused QK^T, softmax,
    PV); a scenario's "auto" is resolved to its framework's kernel when the scenario is built."""

    dtype: str = "bf16"
    optimizer: str = "adam"
    attention: str = "auto"
    compile: bool = False
    recipe: str = ""  # low-precision scaling recipe when dtype is fp8/fp4 (clustersim.compute.precision)


@cache_hash
@dataclass(frozen=True, slots=True)
class Scenario(HashMemo):
    """One training job on one cluster: application x execution x system."""

    name: str
    model: ModelSpec
    cluster: ClusterSpec
    parallel: ParallelLayout
    training: TrainingSpec
    framework: FrameworkSpec
    goodput: GoodputSpec | None = None   # the `goodput:` section, resolved; None when absent
    faults: FaultSpec | None = None      # the `faults:` section, checked against the cluster; None when absent
    node_groups: tuple[NodeGroup, ...] = ()   # mixed GPUs: `cluster.groups` (cluster = group 0's hardware)
    micro_batches_per_replica: tuple[int, ...] = ()  # mixed GPUs, once balanced (perrank.hetero); () = num_micro_batches each
    balance: str = "auto"                # parallel.balance; once settled (perrank.hetero) what ran: heterogeneous.balance
    notes: tuple[str, ...] = ()          # what the loader says about the scenario (a field without effect)
