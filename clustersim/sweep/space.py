"""The search space of `clustersim sweep`: every parallel layout the scenario loader accepts.

A layout is enumerated in two levels. The *shape* fixes the GPU grid (tp, cp, pp, dp, ep): it
decides which weights, optimizer states and collectives a GPU has. The *options* (micro-batch,
ZeRO stage, recompute, sequence parallelism, schedule, virtual stages) vary inside a shape.

Rules, each one the loader's own (``clustersim.scenario.check_layout``) unless marked:
- ``tp * cp * pp * dp`` is the GPU count;
- ``tp`` divides heads and ffn_hidden, and divides or is a multiple of kv_heads;
- [sweep] TP stays inside a scale-up domain (``tp`` divides the GPUs of one NVLink/xGMI domain:
  the node of an 8-GPU server, 72 GPUs of an NVL72 rack), as Megatron-LM recommends (Narayanan
  et al. 2021, arXiv 2104.04473, §3.3 "Takeaway #1": tensor parallelism up to the GPUs that share
  NVLink) unless ``allow_tp_across_nodes``, which admits multiples of the domain;
- ``pp * virtual_stages <= layers`` (stages may differ by one layer; docs/parallel.md);
- ``global_batch`` is a multiple of ``dp * micro_batch``, with at most MAX_MICRO_BATCHES
  micro-batches per pipeline;
- the interleaved schedule needs ``pp > 1`` and a micro-batch count that is a multiple of pp;
- ``cp > 1`` needs ``seq_len`` divisible by ``2 * cp`` (load-balanced causal split);
- sequence parallelism needs ``tp`` dividing each CP rank's share of ``seq_len``;
- for MoE models ``ep`` divides the expert count and ``dp * cp``; dense models have ``ep = 1``;
- ZeRO-3 with HSDP (``parallel.fsdp.hsdp_replicas`` in the template) needs the replica count to
  divide ``dp * cp``;
- the template's partial-recompute options travel with the mode they belong to (``with_recompute``:
  ``recompute_modules`` on ``selective`` rows, ``recompute_method`` / ``recompute_num_layers`` on
  ``full`` rows, as Megatron's ``--recompute-modules`` / ``--recompute-method`` apply to their
  granularity only), and a ``full`` row is in the space only where ``recompute_num_layers`` fits
  its pipeline stages (``recompute_fits``: ``clustersim.scenario.check_recompute``).

Constraints (``SearchSpace.limits``, the option tuples; clustersim.sweep.constraints): the loops
below skip every value outside them, so a constrained space is enumerated, counted and screened
without the layouts it excludes. Where a rule keeps one twin (S2: ZeRO 0 without data-parallel
replicas) and the constraints exclude it, the shape gives no layout.

Symmetry pruning: options that name the *same* computation as another enumerated layout are
left out, so every distinct job is evaluated once. In each rule the two layouts run the same
kernels and collectives, so they take the same time, and the pruned one needs no less memory:
it can neither rank ahead of the kept one (equal times rank by layout key, and the kept one has
the smaller key) nor be on the Pareto front without it. tests/sweep/test_space.py checks the
space against the loader, tests/sweep/test_screen.py each rule against the closed form:
- S1 ``sequence_parallel=True`` with ``tp = 1``: SP splits the TP group's sequence, a group of
  one splits nothing (Korthikanti et al. 2022, arXiv 2205.05198, §4.2.2).
- S2 ``zero_stage > 0`` with ``dp = cp = 1``: ZeRO partitions states over the data-parallel
  replicas (Rajbhandari et al. 2020, arXiv 1910.02054, §5); with a single replica there is
  nothing to partition or gather (the memory model still counts ZeRO-2/3 staging buffers, so
  the pruned layout needs more memory, never less).
- S3 ``gpipe`` with ``pp = 1`` or with a single micro-batch: without a pipeline, or with one
  micro-batch, GPipe and 1F1B run the same passes back to back (Narayanan et al. 2021, §2.2.1:
  1F1B differs from GPipe only in when later micro-batches' backward passes run). At pp = 1 the
  layout itself runs GPipe as 1F1B (``clustersim.parallel.layout.pipeline_schedule``: no framework
  runs a GPipe order without a pipeline), so such a layout is never listed, not even under
  ``--fix parallel.schedule=gpipe`` (which then needs a pipeline, as interleaved 1F1B does); with
  pp > 1 and one micro-batch it is kept only where 1F1B is not in the space.
- S4 ``interleaved-1f1b`` with ``virtual_stages = 1``: one chunk per rank is plain 1F1B
  (Narayanan et al. 2021, §2.2.2); the loader already rejects virtual_stages > 1 without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from clustersim.errors import InputError
from clustersim.frameworks import FrameworkSpec, framework_runs
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_MICRO_BATCHES
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES, ZERO_STAGES, ParallelLayout, pipeline_schedule
from clustersim.parallel.placement import DENSE_AXES, MOE_AXES, groups_uniform
from clustersim.parallel.rules import (
    check_cp_layout,
    ep_overlap_allows_recompute,
    ep_overlap_allows_schedule,
    sp_divides,
)
from clustersim.scenario.checks import check_recompute
from clustersim.workload.model_spec import ModelSpec

# Recompute policies a sweep tries by default: Megatron's (none, selective, full); a torchtitan
# scenario tries torchtitan's per-op policy in place of Megatron's selective (runner.sweep_spec).
SWEEP_RECOMPUTE = ("none", "selective", "full")
TORCHTITAN_RECOMPUTE = ("none", "selective-op", "full")


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """Which option values a sweep may pick; degrees (tp, cp, pp, dp, ep) are always searched."""

    zero_stages: tuple[int, ...] = ZERO_STAGES
    recompute: tuple[str, ...] = SWEEP_RECOMPUTE
    schedules: tuple[str, ...] = SCHEDULES
    sequence_parallel: tuple[bool, ...] = (False, True)
    allow_tp_across_nodes: bool = False
    max_cp: int = 0  # 0: no limit; cp only pays off for long sequences, a user may cap it
    # MoE models also search expert tensor parallelism, the zero-bubble and DualPipe schedules and
    # optimizer offload (a dense model keeps gpipe / 1f1b / interleaved without offload, unless the
    # space holds offload at (True,): the scenario's own setting or --fix, a fixed dimension)
    offload: tuple[bool, ...] = (False, True)
    # ``--fix`` / ``--max`` on the degrees and integer options (clustersim.sweep.constraints):
    # (field, lowest, highest) with the field one of LIMITED; the enumeration below skips what
    # falls outside, so a constrained sweep screens only the layouts it may pick
    limits: tuple[tuple[str, int, int], ...] = ()
    # the framework whose rule (clustersim.frameworks.framework_refusal, the loader's too) says which
    # ZeRO stages, pipeline schedules and optimizer offload it runs; None: no framework limit
    framework: FrameworkSpec | None = None

    def allows(self, name: str, value: int) -> bool:
        """Whether ``value`` of ``name`` (one of LIMITED) lies within every limit on it."""
        return all(lo <= value <= hi for field, lo, hi in self.limits if field == name)


# the integer dimensions a SearchSpace limits (``expert_tp``: the expert TP degree that runs, tp where
# the layout key stores 0)
LIMITED = ("tp", "cp", "pp", "dp", "ep", "expert_tp", "micro_batch", "virtual_stages")


@dataclass(frozen=True, slots=True)
class Shape:
    """The GPU grid of a layout: ``tp * cp * pp * dp`` GPUs, ``ep`` dividing ``dp * cp``."""

    tp: int
    cp: int
    pp: int
    dp: int
    ep: int = 1
    etp: int = 0   # expert tensor parallelism (0: = tp, Megatron's default)


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in ascending order."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def with_recompute(template: ParallelLayout, recompute: str) -> ParallelLayout:
    """``template`` under recompute mode ``recompute``, with only the partial-recompute options of
    that mode: ``recompute_modules`` with ``selective`` (the loader's rule,
    clustersim.parallel.rules), ``recompute_method`` and ``recompute_num_layers`` with ``full`` (the
    loader refuses them with another mode). A row of another mode runs without them, as `clustersim
    run` of it must (docs/sweep.md)."""
    full, selective = recompute == "full", recompute == "selective"
    return replace(template, recompute=recompute,
                   recompute_modules=template.recompute_modules if selective else (),
                   recompute_method=template.recompute_method if full else "uniform",
                   recompute_num_layers=template.recompute_num_layers if full else 1)


def recompute_fits(model: ModelSpec, layout: ParallelLayout, pp: int, virtual_stages: int) -> bool:
    """Whether ``layout`` (carrying its recompute options: ``with_recompute``) with ``pp`` stages of
    ``virtual_stages`` chunks passes the loader's ``check_recompute``: ``recompute_num_layers`` from 1
    to the layers of a pipeline stage (8 of Llama-3-8B's 32 layers fit pp 4, not pp 8)."""
    if layout.recompute_num_layers == 1 and layout.recompute_method == "uniform":
        return True   # nothing of check_recompute depends on the stages
    try:
        check_recompute(model, replace(layout, pp=pp, virtual_stages=virtual_stages, layers_per_stage=()))
    except InputError:
        return False
    return True


def _tp_allowed(model: ModelSpec, cluster: ClusterSpec, tp: int, space: SearchSpace) -> bool:
    if model.heads % tp or model.ffn_hidden % tp:
        return False
    if model.kv_heads % tp and tp % model.kv_heads:
        return False
    gpd = cluster.gpus_per_domain
    if tp <= gpd:
        return gpd % tp == 0
    return space.allow_tp_across_nodes and tp % gpd == 0


def shapes(model: ModelSpec, cluster: ClusterSpec, global_batch: int,
           space: SearchSpace = SearchSpace(), cp_comm: str = "p2p") -> list[Shape]:
    """Every GPU grid that admits at least one valid micro-batch, in canonical order; ``cp_comm``:
    the template's context-parallel exchange, whose rules (clustersim.parallel.rules.check_cp_layout)
    a cp > 1 grid must satisfy."""
    gpus = cluster.num_gpus
    out: list[Shape] = []
    for tp in divisors(gpus):
        if not _tp_allowed(model, cluster, tp, space) or not space.allows("tp", tp):
            continue
        for cp in divisors(gpus // tp):
            if cp > 1 and model.seq_len % (2 * cp):
                continue
            if (space.max_cp and cp > space.max_cp) or not space.allows("cp", cp):
                continue
            if cp > 1 and not _cp_allowed(model, tp, cp, cp_comm):
                continue
            for pp in divisors(gpus // (tp * cp)):
                if pp > model.layers or not space.allows("pp", pp):
                    continue
                dp = gpus // (tp * cp * pp)
                if global_batch % dp or not space.allows("dp", dp):
                    continue
                if not model.is_moe:
                    if (space.allows("ep", 1) and space.allows("expert_tp", tp)
                            and _placeable(Shape(tp, cp, pp, dp, 1), cluster, DENSE_AXES)):
                        out.append(Shape(tp, cp, pp, dp, 1))
                    continue
                # MoE parallel folding: ep * etp divides the stage's tp * cp * dp ranks
                for ep in divisors(model.moe_experts):
                    if not space.allows("ep", ep):
                        continue
                    for etp in divisors(tp):
                        if (tp * cp * dp) % (ep * etp) or model.moe_expert_ffn_hidden % etp:
                            continue
                        shape = Shape(tp, cp, pp, dp, ep, 0 if etp == tp else etp)
                        if space.allows("expert_tp", etp) and _placeable(shape, cluster, MOE_AXES):
                            out.append(shape)
    return out


def _cp_allowed(model: ModelSpec, tp: int, cp: int, cp_comm: str) -> bool:
    try:
        check_cp_layout(model, ParallelLayout(tp=tp, cp=cp, cp_comm=cp_comm, global_batch=1))
    except InputError:
        return False
    return True


def _placeable(shape: Shape, cluster: ClusterSpec, axes: tuple[str, ...]) -> bool:
    """Whether the shape's groups sit alike on the nodes (clustersim.parallel.placement.groups_uniform):
    the loader refuses a layout whose groups of one axis differ in shape (tp 1 x dp 12 on nodes of 8)."""
    layout = ParallelLayout(tp=shape.tp, cp=shape.cp, pp=shape.pp, dp=shape.dp, ep=shape.ep, expert_tp=shape.etp,
                            global_batch=shape.dp)
    return groups_uniform(layout, cluster, axes)


NEW_SCHEDULES = ("zb-h1", "zb-v", "dualpipe", "dualpipe-v")


def schedule_options(shape: Shape, num_micro_batches: int, layers: int,
                     space: SearchSpace, moe: bool = False, ep_overlap: bool = False) -> list[tuple[str, int]]:
    """(schedule, virtual_stages) pairs valid for this shape and micro-batch count (S3, S4, S5).
    The zero-bubble and DualPipe schedules (searched for MoE models) follow the loader's rules
    (clustersim.parallel.rules): a pipeline (S5: with pp = 1 they run 1F1B's passes), two chunks
    per rank for the V schedules, an even pp and an even micro-batch count >= 2 pp for DualPipe."""
    out: list[tuple[str, int]] = []
    pp, m = shape.pp, num_micro_batches
    pipelined = pp > 1 and m > 1
    one = space.allows("virtual_stages", 1)
    for schedule in SCHEDULES:
        if schedule not in space.schedules or (ep_overlap and not ep_overlap_allows_schedule(schedule, pp)):
            continue
        if not framework_runs(space.framework, pp, schedule=schedule):
            continue
        if schedule == "gpipe":
            if one and pipeline_schedule(schedule, pp) == schedule and (pipelined or "1f1b" not in space.schedules):
                out.append((schedule, 1))   # S3: at pp = 1 it runs as 1F1B (the layout's rule), never listed
        elif schedule == "1f1b":
            if one:
                out.append((schedule, 1))
        elif schedule == "interleaved-1f1b":
            if pp > 1 and m % pp == 0:
                out.extend((schedule, v) for v in _virtual_stages(pp, layers, space))  # S4: v >= 2
        elif one and (moe or asked_for(space, schedule)) and pp > 1 and _new_schedule_ok(schedule, pp, m, layers):
            out.append((schedule, 1))
    return out


def _virtual_stages(pp: int, layers: int, space: SearchSpace) -> range:
    """The interleaved schedule's chunk counts: 2 (S4) to layers / pp, within the space's limits."""
    lo, hi = 2, layers // pp
    for field, a, b in space.limits:
        if field == "virtual_stages":
            lo, hi = max(lo, a), min(hi, b)
    return range(lo, hi + 1)


def asked_for(space: SearchSpace, schedule: str) -> bool:
    """Whether the user fixed the schedule to ``schedule`` (``--fix parallel.schedule=zb-v``): a
    dense model's sweep then searches a zero-bubble or DualPipe schedule too. Left to itself it
    does not: their bound is loose for dense layouts, and searching them made the GPT-3 175B
    sweep 4.7x slower (17 -> 80 s) for a #1 0.3% faster (zb-v 19.449 s against interleaved 19.513 s,
    within the 80% interval; 2026-11-28)."""
    return space.schedules == (schedule,)


def _new_schedule_ok(schedule: str, pp: int, m: int, layers: int) -> bool:
    if schedule == "dualpipe":
        return pp % 2 == 0 and m % 2 == 0 and m >= 2 * pp
    if schedule == "dualpipe-v":
        return layers >= 2 * pp and m >= 2 * pp
    return schedule == "zb-h1" or layers >= 2 * pp


def schedule_zero_ok(schedule: str, zero: int) -> bool:
    """Zero-bubble and DualPipe schedules run with ZeRO 0-2 (clustersim.parallel.rules)."""
    return zero != 3 or schedule not in NEW_SCHEDULES


def offload_options(model: ModelSpec, space: SearchSpace, has_host_link: bool, zero: int | None = None) -> list[bool]:
    """Optimizer offload (ZeRO-Offload) for MoE models on clusters with a host link, and for a dense
    model where the space holds it fixed at True (the scenario's own setting, or --fix); with
    ``zero``, only where the framework offloads at that ZeRO stage (clustersim.frameworks.framework_refusal:
    DeepSpeed with ZeRO > 0 only, BF16_Optimizer never). None where the space allows only offload
    and the model, cluster or stage cannot have it."""
    return [o for o in space.offload
            if not o or (has_host_link and (model.is_moe or space.offload == (True,))
                         and framework_runs(space.framework, zero_stage=zero, offload_optimizer=True))]


def sequence_parallel_options(model: ModelSpec, shape: Shape, space: SearchSpace) -> list[bool]:
    """Sequence-parallel settings of a shape (S1: none with tp = 1; MoE with tp > 1 needs it)."""
    if shape.tp == 1 and False in space.sequence_parallel:
        return [False]
    if model.is_moe and shape.tp > 1:
        return [True] if True in space.sequence_parallel and sp_divides(model, shape.tp, shape.cp) else []
    return [sp for sp in space.sequence_parallel if not sp or (shape.tp > 1 and sp_divides(model, shape.tp, shape.cp))]


def zero_options(shape: Shape, space: SearchSpace, hsdp_replicas: int = 1) -> list[int]:
    """ZeRO stages of a shape (S2: stage 0 only without data-parallel replicas; none that the
    framework does not run, clustersim.frameworks.framework_refusal: DeepSpeed's pipeline runs
    ZeRO 0-1 with pp > 1, its BF16_Optimizer ZeRO 0-1 at all); ZeRO-3 only
    where the template's HSDP replica count divides dp * cp (the loader's rule)."""
    if shape.dp * shape.cp == 1:
        return [0] if 0 in space.zero_stages else []
    return [z for z in space.zero_stages if (z != 3 or (shape.dp * shape.cp) % hsdp_replicas == 0)
            and framework_runs(space.framework, shape.pp, z)]


def micro_batch_sizes(shape: Shape, global_batch: int, space: SearchSpace = SearchSpace()) -> list[int]:
    """Micro-batch sizes of a shape: the divisors of the per-replica batch that leave at most
    MAX_MICRO_BATCHES micro-batches per pipeline (the loader's cap), within the space's limits."""
    per_replica = global_batch // shape.dp
    return [mb for mb in divisors(per_replica)
            if per_replica // mb <= MAX_MICRO_BATCHES and space.allows("micro_batch", mb)]


def shape_layouts(model: ModelSpec, shape: Shape, template: ParallelLayout,
                  space: SearchSpace = SearchSpace(),
                  micro_batches: tuple[int, ...] | None = None, has_host_link: bool = True) -> list[ParallelLayout]:
    """Every layout of one shape, in canonical order (see ``layout_key``).

    ``template`` supplies what the sweep does not search: global_batch and the overlap flags.
    ``micro_batches`` restricts the micro-batch sizes (a task's share of the shape).
    """
    per_replica = template.global_batch // shape.dp
    ep_overlap = template.overlap_moe_expert_parallel_comm
    sps = sequence_parallel_options(model, shape, space)
    zeros = zero_options(shape, space, template.hsdp_replicas)
    offloads = {z: offload_options(model, space, has_host_link, z) for z in zeros}
    out: list[ParallelLayout] = []
    for mb in micro_batches if micro_batches is not None else micro_batch_sizes(shape, template.global_batch,
                                                                                   space):
        nmb = per_replica // mb
        scheds = schedule_options(shape, nmb, model.layers, space, model.is_moe, ep_overlap)
        for zero in zeros:
            for recompute in recompute_options(space, ep_overlap):
                rt = with_recompute(template, recompute)
                for sp in sps:
                    for schedule, v in scheds:
                        if not schedule_zero_ok(schedule, zero) or not recompute_fits(model, rt, shape.pp, v):
                            continue
                        for off in offloads[zero]:
                            out.append(replace(  # the template's unsearched options: overlaps, FSDP settings
                                rt, tp=shape.tp, pp=shape.pp, dp=shape.dp, cp=shape.cp, ep=shape.ep,
                                expert_tp=shape.etp, sequence_parallel=sp, zero_stage=zero, micro_batch=mb,
                                global_batch=template.global_batch, schedule=schedule, virtual_stages=v,
                                offload_optimizer=off))
    return out


def enumerate_layouts(model: ModelSpec, cluster: ClusterSpec, template: ParallelLayout,
                      space: SearchSpace = SearchSpace()) -> Iterator[ParallelLayout]:
    """Every valid layout (after symmetry pruning), shape by shape, in canonical order."""
    for shape in shapes(model, cluster, template.global_batch, space, template.cp_comm):
        yield from shape_layouts(model, shape, template, space, has_host_link=cluster.host_memory_link is not None)


def schedule_counts(shape: Shape, num_micro_batches: int, layers: int, space: SearchSpace,
                    moe: bool = False, ep_overlap: bool = False) -> dict[str, int]:
    """How many (schedule, virtual_stages) pairs ``schedule_options`` gives per schedule, in O(1):
    the interleaved schedule's virtual stages are counted, not listed (up to layers / pp of them)."""
    pp, m = shape.pp, num_micro_batches
    pipelined = pp > 1 and m > 1
    out: dict[str, int] = {}
    for schedule in SCHEDULES:
        if schedule not in space.schedules or (ep_overlap and not ep_overlap_allows_schedule(schedule, pp)):
            continue
        if not framework_runs(space.framework, pp, schedule=schedule):
            continue
        one = space.allows("virtual_stages", 1)
        if schedule == "gpipe":   # S3, as schedule_options
            n = int(one and pipeline_schedule(schedule, pp) == schedule and (pipelined or "1f1b" not in space.schedules))
        elif schedule == "1f1b":
            n = int(one)
        elif schedule == "interleaved-1f1b":
            n = len(_virtual_stages(pp, layers, space)) if pp > 1 and m % pp == 0 else 0
        else:
            n = int(one and (moe or asked_for(space, schedule)) and pp > 1 and _new_schedule_ok(schedule, pp, m, layers))
        if n:
            out[schedule] = n
    return out


def count_schedule_options(shape: Shape, num_micro_batches: int, layers: int, space: SearchSpace,
                           moe: bool = False, ep_overlap: bool = False) -> int:
    """len(schedule_options(...)) in O(1)."""
    return sum(schedule_counts(shape, num_micro_batches, layers, space, moe, ep_overlap).values())


def recompute_options(space: SearchSpace, ep_overlap: bool = False) -> tuple[str, ...]:
    """The searched recompute modes; with the EP overlap, none that recomputes whole layers
    (clustersim.parallel.rules.ep_overlap_allows_recompute)."""
    return tuple(r for r in space.recompute if not ep_overlap or ep_overlap_allows_recompute(r))


def count_shape_layouts(model: ModelSpec, shape: Shape, global_batch: int, micro_batch: int,
                        space: SearchSpace = SearchSpace(), hsdp_replicas: int = 1,
                        has_host_link: bool = True, ep_overlap: bool = False,
                        template: ParallelLayout | None = None) -> int:
    """len(shape_layouts(...)) for one micro-batch size, without building the layouts; ``template``:
    the sweep's, whose recompute_num_layers leaves out the full-recompute rows whose stages it does
    not fit (``recompute_fits``; None: no such option)."""
    sps = len(sequence_parallel_options(model, shape, space))
    zeros = zero_options(shape, space, hsdp_replicas)
    nmb = global_batch // (shape.dp * micro_batch)
    counts = schedule_counts(shape, nmb, model.layers, space, model.is_moe, ep_overlap)
    total = 0
    for rec in recompute_options(space, ep_overlap):
        rt = with_recompute(template, rec) if template is not None else None
        if rt is None or (rt.recompute_num_layers == 1 and rt.recompute_method == "uniform"):
            by_schedule = counts   # every (schedule, virtual stages) pair fits (the common case, O(1))
        else:
            by_schedule = {}
            for s, v in schedule_options(shape, nmb, model.layers, space, model.is_moe, ep_overlap):
                by_schedule[s] = by_schedule.get(s, 0) + int(recompute_fits(model, rt, shape.pp, v))
        total += sum(n * len(offload_options(model, space, has_host_link, z))
                     for s, n in by_schedule.items() for z in zeros if schedule_zero_ok(s, z))
    return total * sps


def count_layouts(model: ModelSpec, cluster: ClusterSpec, template: ParallelLayout,
                  space: SearchSpace = SearchSpace()) -> int:
    """len(list(enumerate_layouts(...))) without building the layouts."""
    gb = template.global_batch
    host = cluster.host_memory_link is not None
    return sum(count_shape_layouts(model, shape, gb, mb, space, template.hsdp_replicas, host,
                                   template.overlap_moe_expert_parallel_comm, template)
               for shape in shapes(model, cluster, gb, space, template.cp_comm)
               for mb in micro_batch_sizes(shape, gb, space))


_SCHEDULE_INDEX = {name: i for i, name in enumerate(SCHEDULES)}
_RECOMPUTE_INDEX = {name: i for i, name in enumerate(RECOMPUTE)}


def layout_key(p: ParallelLayout) -> tuple[int, ...]:
    """The canonical sort key of a layout: degrees first, then options, all as integers."""
    return (p.tp, p.cp, p.pp, p.dp, p.ep, p.expert_tp, p.micro_batch, p.zero_stage, _RECOMPUTE_INDEX[p.recompute],
            int(p.sequence_parallel), _SCHEDULE_INDEX[p.schedule], p.virtual_stages, int(p.offload_optimizer))


def layout_from_key(key: tuple[int, ...], template: ParallelLayout) -> ParallelLayout:
    """Inverse of ``layout_key`` (options the sweep does not search come from ``template``)."""
    tp, cp, pp, dp, ep, etp, mb, zero, rec, sp, sched, v, off = key
    return replace(with_recompute(template, RECOMPUTE[rec]), tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, expert_tp=etp, micro_batch=mb, zero_stage=zero,
                   sequence_parallel=bool(sp), schedule=SCHEDULES[sched],
                   virtual_stages=v, offload_optimizer=bool(off))
