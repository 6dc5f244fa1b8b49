"""Peak memory per GPU of a layout's pipeline ranks, exactly as the plan computes it.

``MemoryModel.report`` is ``plan.memory_plan``'s ``memory_report`` of one pipeline rank (the layers
it holds, the activations in flight that its schedule implies), assembled from the memory
model's own parts (clustersim/memory/report.py: ``states``, ``layer_units`` and ``combine``,
``buffer_bytes``, ``offload``, ``assemble``). Each part is cached in the run's ``SweepMemo`` at
the coarsest key it depends on, so that a layout costs a few dictionary look-ups.
``memory_report`` does not read the schedule or virtual stages (only through the in-flight
counts), so schedules share them. tests/sweep/test_screen.py checks equality with the engine's
memory on random layouts.
"""

from __future__ import annotations

from typing import NamedTuple

from clustersim.memory.activations import LayerUnits, combine, layer_units
from clustersim.memory.buffers import buffer_bytes, nccl_buffer_bytes
from clustersim.memory.evidence import interval_factors
from clustersim.memory.policies import RankPolicies, rank_policies, uniform_policies
from clustersim.memory.report import (
    MemoryReport,
    assemble,
    moe_share,
    offload,
    offloaded_states,
    optimizer_shard,
    peak_numbers,
    reduce_copy_bytes,
    states,
    verdict_index,
)
from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.memory_plan import scenario_kernels
from clustersim.scenario import Scenario
from clustersim.sweep.memo import SweepMemo


class StaticParts(NamedTuple):
    """What a rank's memory reads beside the activations in flight (``MemoryModel.static_parts``)."""

    states: tuple[int, int, int]            # weights, gradients, optimizer states
    shard: int                              # parameters the rank's optimizer steps (memory.report.optimizer_shard)
    # held buffers, the backward's, NCCL's, the step-end reduction copy (memory.report.reduce_copy_bytes)
    buffers: tuple[float, float, int, int]
    policies: RankPolicies
    units: LayerUnits
    factors: tuple[float, float]            # the 80% interval's factors


class LayoutKeys:
    """The leading fields of ``MemoryModel.static_parts``' memo keys that one layout gives every
    rank (``MemoryModel.layout_keys``), and its interval factors once looked up."""

    __slots__ = ("buffers", "factors", "states", "uniform", "units")

    def __init__(self, states: tuple[object, ...], buffers: tuple[object, ...], units: tuple[object, ...],
                 uniform: bool) -> None:
        self.states, self.buffers, self.units, self.uniform = states, buffers, units, uniform
        self.factors: tuple[float, float] | None = None


class MemoryModel:
    """``clustersim.memory.memory_report(...)`` of a pipeline rank assembled from the memory
    model's own parts (clustersim/memory/report.py: ``states``, ``activation_parts``,
    ``buffer_bytes``, ``assemble``), each cached at the coarsest key it depends on, so that a
    layout costs a few dictionary look-ups. tests/sweep/test_screen.py checks equality with the
    engine's memory on random layouts."""

    def __init__(self, base: Scenario, memo: SweepMemo) -> None:
        self.model, self.dtype = base.model, base.training.dtype
        self.framework = base.framework
        self.kernels = scenario_kernels(base)
        self.capacity = base.cluster.gpu.hbm_capacity_bytes
        self.memo = memo

    def report(self, p: ParallelLayout, rank: int, held: int, in_flight: float, first: bool, last: bool,
               ends: tuple[float, float], moe_held: int | None = None) -> MemoryReport:
        """The rank's MemoryReport (as the engine's ``memory_report``)."""
        *parts, host, moved, step_end = self._parts(p, rank, held, in_flight, first, last, ends, moe_held)
        return assemble(*parts, rank, host, moved, step_end)

    def rank_key(self, p: ParallelLayout, rank: int, held: int, in_flight: float, first: bool, last: bool,
                 ends: tuple[float, float], moe_held: int | None = None,
                 block: dict[tuple[object, ...], tuple] | None = None) -> tuple[int, int, int]:
        """(verdict index, reserved peak, -rank) of a rank, without building its MemoryReport."""
        st, act, trans, buf, nccl, _, factors, _, _, step_end = self._parts(p, rank, held, in_flight, first, last,
                                                                         ends, moe_held, block)
        *_, peak, interval = peak_numbers(st, act, trans, buf, nccl, factors, step_end)
        return verdict_index(interval, self.capacity), peak, -rank

    def _parts(self, p: ParallelLayout, rank: int, held: int, in_flight: float, first: bool, last: bool,
               ends: tuple[float, float], moe_held: int | None = None,
               block: dict[tuple[object, ...], tuple] | None = None) -> tuple:
        """``block``: the parts that depend on the layout and the rank's layers only, shared by the
        calls for one layout (uniform recompute policies: its schedules differ only in the
        in-flight counts)."""
        k = float(in_flight)
        static = block.get((held, moe_held, first, last)) if block is not None else None
        if static is None:
            static = self.static_parts(p, rank, held, first, last, moe_held)
            if block is not None:
                block[(held, moe_held, first, last)] = static
        st, shard, buf, pol, units, factors = static
        act, trans = combine(units, pol, held, k, first, last, ends, buf[1])
        moved = offloaded_states(p, st)
        st, act, host = offload(p, st, act, k, held, last, shard)
        return st, act, trans, buf[0], buf[2], self.capacity, factors, host, moved, buf[3]

    def static_parts(self, p: ParallelLayout, rank: int, held: int, first: bool, last: bool,
                     moe_held: int | None, keys: LayoutKeys | None = None) -> StaticParts:
        """The parts of a rank's memory that do not depend on the activations in flight: model
        states, buffers, the rank's recompute policies, its layers' saved units and the interval
        factors, each cached in the run's memo at the coarsest key it depends on. ``keys``:
        ``layout_keys(p)``, for a caller that asks for many ranks of one layout."""
        memo = self.memo
        if keys is None:
            keys = self.layout_keys(p)
        moe_layers = (held if moe_held is None else moe_held) if self.model.is_moe else None
        skey = (*keys.states, held, moe_layers, first, last)
        cached = memo.states.get(skey)
        if cached is None:
            cached = memo.states[skey] = (states(self.model, p, self.dtype, held, first, last, self.framework,
                                                 moe_layers),
                                          optimizer_shard(self.model, p, held, first, last, moe_layers))
        st, shard = cached
        bkey = (*keys.buffers, held, first, last, moe_layers)
        buf = memo.buffers.get(bkey)
        if buf is None:
            held_b, backward_b = buffer_bytes(self.model, p, self.dtype, held, first, last, self.framework)
            buf = memo.buffers[bkey] = (held_b, backward_b, nccl_buffer_bytes(p),
                                        reduce_copy_bytes(self.model, p, self.dtype, held, first, last, self.framework,
                                                          moe_layers))
        if keys.uniform:
            pol = RankPolicies(((p.recompute, held),) if held else (), 1)
        else:
            pol = rank_policies(p, self.model.layers, rank)
        share = moe_share(self.model, held, moe_layers)
        ukey = (*keys.units, tuple(n for n, _ in pol.counts), pol.group_layers, share)
        units = memo.layer_units.get(ukey)
        if units is None:
            units = memo.layer_units[ukey] = layer_units(self.model, p, self.dtype, self.framework, self.kernels, pol,
                                                    share)
        factors = keys.factors
        if factors is None:
            fkey = (p.cp, p.offload_optimizer, p.offload_activations, p.offload_params, p.hsdp_replicas)
            factors = memo.factors.get(fkey)
            if factors is None:
                factors = memo.factors[fkey] = interval_factors(self.model, p, self.framework, self.dtype)
            keys.factors = factors
        return StaticParts(st, shard, buf, pol, units, factors)

    @staticmethod
    def layout_keys(p: ParallelLayout) -> LayoutKeys:
        """What ``static_parts`` reads of the layout (the leading fields of its memo keys), once
        per layout rather than once per rank."""
        return LayoutKeys(
            (p.tp, p.ep, p.etp, p.dp, p.cp, p.zero_stage, p.hsdp_replicas, p.adam_moment_bytes, p.fsdp_version,
             p.grad_reduce_dtype, p.grad_accum_dtype),
            (p.tp, p.cp, p.pp, p.dp, p.ep, p.etp, p.micro_batch, p.sequence_parallel, p.zero_stage,
             p.dp_bucket_params, p.overlap_grad_reduce, p.hsdp_replicas, p.fsdp_version, p.fsdp_prefetch,
             p.reshard_after_forward, p.grad_reduce_dtype, p.num_micro_batches > 1, p.grad_accum_dtype),
            (p.tp, p.cp, p.ep, p.etp, p.cp_comm, p.micro_batch, p.sequence_parallel, p.recompute_modules),
            uniform_policies(p))

    def peak_bytes(self, p: ParallelLayout, held: int, in_flight: float, first: bool, last: bool,
                   rank: int = 0, ends: tuple[float, float] | None = None, moe_held: int | None = None) -> int:
        k = float(in_flight)
        return self.rank_key(p, rank, held, k, first, last, (k, k) if ends is None else ends, moe_held)[1]
