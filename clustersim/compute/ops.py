"""The cost records that the compute model hands to the step engine (docs/ARCHITECTURE.md, "Compute").

An ``Op`` runs on the compute stream; a ``CommOp`` is a collective the engine times through the
network model. A ``PassCost`` lists both in execution order for one pass (forward, backward or
recompute) of one micro-batch on one GPU.
Ops are dict keys of the per-run unit memos (a unit's op tuple is part of its key): each keeps its
hash once computed (clustersim.hashcache).
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.hashcache import HashMemo, cache_hash

COMM_GROUPS = ("tp", "cp", "cp_a2a", "cp_p2p", "ep", "etp", "host")
# breakdown cause of each group's collectives (the `breakdown` keys of docs/output.md)
GROUP_CAUSE = {"tp": "tp_comm", "cp": "cp_comm", "cp_a2a": "cp_comm", "cp_p2p": "cp_comm", "ep": "ep_comm",
               "etp": "ep_comm", "host": "offload"}


@cache_hash
@dataclass(frozen=True, slots=True)
class Op(HashMemo):
    """One kernel (or a fused group of kernels) on the compute stream. ``wgrad``: a weight-gradient
    GEMM, which zero-bubble schedules move out of the backward pass into a W action; ``kernels``:
    how many launches the host issues for it (clustersim.compute.host)."""

    name: str
    flops: float
    bytes_moved: float
    time_s: float
    wgrad: bool = False
    kernels: int = 1   # kernel launches it stands for (a grouped GEMM: one per local expert); host issue time


@cache_hash
@dataclass(frozen=True, slots=True)
class CommOp(HashMemo):
    """One collective. ``size_bytes`` follows nccl-tests: the full buffer for all_reduce, the
    gathered total for all_gather / reduce_scatter / all_to_all. ``overlappable``: the framework
    issues it asynchronously so that it may hide behind the compute that follows it."""

    name: str
    collective: str
    size_bytes: float
    group: str
    overlappable: bool = False
    # overlappable only: how many of the following compute ops it runs beside before the stream
    # waits for it (ring attention: one attention block per ring step); 0 = until the unit's end
    overlap_ops: int = 0
    # collective "deepep": bytes through the rank's NVLink and NIC ports (DeepEP normal kernels
    # forward one copy per destination node over the NIC, then over NVLink), both at once
    up_bytes: float = 0.0
    out_bytes: float = 0.0

    @property
    def cause(self) -> str:
        return GROUP_CAUSE.get(self.group, f"{self.group}_comm")


@dataclass(frozen=True, slots=True)
class PassCost:
    """One pass of one micro-batch through one layer (or the embedding / output head)."""

    ops: tuple[Op | CommOp, ...] = ()

    @property
    def compute_time_s(self) -> float:
        return sum(op.time_s for op in self.ops if isinstance(op, Op))

    @property
    def flops(self) -> float:
        return sum(op.flops for op in self.ops if isinstance(op, Op))

    @property
    def bytes_moved(self) -> float:
        return sum(op.bytes_moved for op in self.ops if isinstance(op, Op))

    @property
    def comm_ops(self) -> tuple[CommOp, ...]:
        return tuple(op for op in self.ops if isinstance(op, CommOp))

    @property
    def compute_ops(self) -> tuple[Op, ...]:
        return tuple(op for op in self.ops if isinstance(op, Op))


EMPTY_PASS = PassCost(())


@dataclass(frozen=True, slots=True)
class LayerCost:
    """Forward, backward and recompute passes of one micro-batch; ``params`` held by one GPU."""

    forward: PassCost
    backward: PassCost
    recompute: PassCost
    params: int
