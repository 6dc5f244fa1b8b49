"""The data a collective's cost is expressed in: group shape, phases, plan.

A plan is a per-rank view: every phase names the tier it runs on, its latency, the bytes
through the rank's bottleneck port and that port's achievable bandwidth. The step engine runs
each phase as ``timeout(latency_s)`` then ``link(tier).transfer(wire_bytes / bw_bytes_per_s)``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from clustersim.errors import InputError

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv")
TIERS = ("scale_up", "scale_out")


def _positive_int(field: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(field, value, "a positive integer")


@dataclass(frozen=True, slots=True)
class GroupShape:
    """A communicator described by its shape on the cluster (identical nodes, identical groups)."""

    ranks_per_node: int  # members of the group inside one node
    num_nodes: int  # nodes the group spans
    # same-shaped groups running the same op at the same time on the node's other GPUs
    # (they share the node's NICs)
    concurrent_groups_per_node: int = 1

    def __post_init__(self) -> None:
        _positive_int("group.ranks_per_node", self.ranks_per_node)
        _positive_int("group.num_nodes", self.num_nodes)
        _positive_int("group.concurrent_groups_per_node", self.concurrent_groups_per_node)

    @property
    def num_ranks(self) -> int:
        return self.ranks_per_node * self.num_nodes

    @property
    def active_gpus_per_node(self) -> int:
        """GPUs of one node that take part in this op (this group and its concurrent twins)."""
        return self.ranks_per_node * self.concurrent_groups_per_node

    @classmethod
    def from_ranks(cls, ranks: Iterable[int], gpus_per_node: int,
                   concurrent_groups_per_node: int = 1) -> GroupShape:
        """Shape of an explicit rank list (global ranks, node = rank // gpus_per_node).

        Every node the group touches must hold the same number of its ranks.
        """
        _positive_int("gpus_per_node", gpus_per_node)
        ranks = list(ranks)
        if not ranks or len(set(ranks)) != len(ranks) or min(ranks) < 0:
            raise InputError("ranks", ranks, "a non-empty list of distinct non-negative ranks")
        per_node = Counter(r // gpus_per_node for r in ranks)
        counts = sorted(set(per_node.values()))
        if len(counts) != 1:
            raise InputError("ranks", ranks, "the same number of ranks on every node the group spans")
        return cls(counts[0], len(per_node), concurrent_groups_per_node)


@dataclass(frozen=True, slots=True)
class Phase:
    """One step of a collective on one tier, as one rank sees it."""

    tier: str  # "scale_up" | "scale_out"
    latency_s: float  # all latency terms of this phase
    wire_bytes: float  # bytes through the rank's bottleneck port in this phase
    bw_bytes_per_s: float  # achievable bandwidth of that port (efficiency and sharing applied)

    @property
    def time_s(self) -> float:
        return self.latency_s + (self.wire_bytes / self.bw_bytes_per_s if self.wire_bytes else 0.0)


@dataclass(frozen=True, slots=True)
class CollectivePlan:
    op: str
    algo: str
    size_bytes: float  # nccl-tests convention: full buffer (all_reduce...), gathered size (all_gather...)
    shape: GroupShape
    phases: tuple[Phase, ...]
    protocol: str = ""  # NCCL protocol the plan assumes: LL | LL128 | Simple ("" = none)

    @property
    def time_s(self) -> float:
        return sum(p.time_s for p in self.phases)

    @property
    def algbw_bytes_per_s(self) -> float:
        """nccl-tests algbw = size / time (doc/PERFORMANCE.md)."""
        t = self.time_s
        return self.size_bytes / t if t > 0 else 0.0

    @property
    def busbw_bytes_per_s(self) -> float:
        return self.algbw_bytes_per_s * busbw_factor(self.op, self.shape.num_ranks)


def busbw_factor(op: str, num_ranks: int) -> float:
    """nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor.

    all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce and
    sendrecv 1.
    """
    n = num_ranks
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0
