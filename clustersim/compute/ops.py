"""The cost records that the compute model hands to the step engine (docs/ARCHITECTURE.md, "Compute").

An ``Op`` runs on the compute stream; a ``CommOp`` is a collective the engine times through the
network model. A ``PassCost`` lists both in execution order for one pass (forward, backward or
recompute) of one micro-batch on one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

COMM_GROUPS = ("tp", "cp", "ep")


@dataclass(frozen=True, slots=True)
class Op:
    """One kernel (or a fused group of kernels) on the compute stream."""

    name: str
    flops: float
    bytes_moved: float
    time_s: float


@dataclass(frozen=True, slots=True)
class CommOp:
    """One collective. ``size_bytes`` follows nccl-tests: the full buffer for all_reduce, the
    gathered total for all_gather / reduce_scatter / all_to_all. ``overlappable``: the framework
    issues it asynchronously so that it may hide behind the compute that follows it."""

    name: str
    collective: str
    size_bytes: float
    group: str
    overlappable: bool = False


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
