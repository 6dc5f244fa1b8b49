"""Pipeline schedules as data: per pipeline rank, the ordered list of forward/backward actions.

A schedule is a tuple (one entry per pipeline rank) of tuples of :class:`Action`. Chunk ``c`` on
rank ``r`` is global stage ``c * pp + r`` (Megatron's interleaved assignment: rank ``r`` holds
model chunks ``r, r + pp, r + 2 pp, ...``; Narayanan et al. 2021, arXiv 2104.04473, §2.2.2).

Dependencies (what :func:`validate_schedule` and :func:`dry_run` follow):
  * F of global stage ``k`` for micro-batch ``m`` needs F of stage ``k - 1`` for ``m``;
  * B of stage ``k`` needs B of stage ``k + 1`` for ``m`` and F of stage ``k`` for ``m``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from clustersim.errors import InputError

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
KINDS = ("F", "B", "W")  # "W" (weight-gradient half of B) is reserved for zero-bubble schedules

_SHORT = re.compile(r"^(\d+)([FBW])(\d+)$")


class ScheduleError(ValueError):
    """A schedule that is incomplete, repeats an action, or deadlocks."""


@dataclass(frozen=True, slots=True)
class Action:
    """One pass of one model chunk over one micro-batch on one pipeline rank."""

    kind: str  # "F" | "B" ("W" reserved)
    chunk: int
    micro_batch: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Action kind must be one of {KINDS}, got {self.kind!r}")
        if self.chunk < 0 or self.micro_batch < 0:
            raise ValueError(f"Action chunk and micro_batch must be >= 0, got {self.chunk}, {self.micro_batch}")

    def __str__(self) -> str:
        return f"{self.chunk}{self.kind}{self.micro_batch}"

    @classmethod
    def parse(cls, text: str) -> Action:
        """Inverse of ``str``: ``"1F3"`` -> Action("F", chunk=1, micro_batch=3)."""
        m = _SHORT.match(text.strip())
        if not m:
            raise ValueError(f"not an action: {text!r} (expected CHUNK KIND MICROBATCH, e.g. 1F3)")
        return cls(kind=m.group(2), chunk=int(m.group(1)), micro_batch=int(m.group(3)))


Schedule = tuple[tuple[Action, ...], ...]


# ---------------------------------------------------------------------------------------------
# generation

@lru_cache(maxsize=64)  # pure and immutable; simulate() and estimate() ask for the same one
def build_schedule(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int = 1) -> Schedule:
    """Per-rank action lists for ``schedule`` ("gpipe", "1f1b" or "interleaved-1f1b")."""
    if schedule not in SCHEDULES:
        raise InputError("parallel.schedule", schedule, SCHEDULES)
    for field, value in (("parallel.pp", pp), ("num_micro_batches", num_micro_batches),
                         ("parallel.virtual_stages", virtual_stages)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(field, value, "a positive integer")
    if schedule != "interleaved-1f1b" and virtual_stages != 1:
        raise InputError("parallel.virtual_stages", virtual_stages, "1 unless parallel.schedule is interleaved-1f1b")
    if schedule == "gpipe":
        return tuple(_gpipe(num_micro_batches) for _ in range(pp))
    if schedule == "1f1b" or virtual_stages == 1:
        # interleaving with one chunk per rank is plain 1F1B (Megatron then uses
        # forward_backward_pipelining_without_interleaving)
        return tuple(_one_f_one_b(pp, r, num_micro_batches) for r in range(pp))
    if num_micro_batches % pp:
        raise InputError("num_micro_batches", num_micro_batches,
                         f"a multiple of pp ({pp}) for the interleaved schedule")
    return tuple(_interleaved(pp, r, num_micro_batches, virtual_stages) for r in range(pp))


def _gpipe(m: int) -> tuple[Action, ...]:
    """GPipe (Huang et al. 2019): all forwards, then all backwards (in micro-batch order)."""
    return tuple(Action("F", 0, i) for i in range(m)) + tuple(Action("B", 0, i) for i in range(m))


def _one_f_one_b(pp: int, rank: int, m: int) -> tuple[Action, ...]:
    """PipeDream-flush 1F1B (Narayanan et al. 2021 §2.2.1; Megatron-core
    ``forward_backward_pipelining_without_interleaving``): ``pp - rank - 1`` warm-up forwards,
    then alternate one forward and one backward, then the remaining backwards."""
    warmup = min(pp - rank - 1, m)
    out = [Action("F", 0, i) for i in range(warmup)]
    for i in range(m - warmup):
        out.append(Action("F", 0, warmup + i))
        out.append(Action("B", 0, i))
    out.extend(Action("B", 0, i) for i in range(m - warmup, m))
    return tuple(out)


def _interleaved(pp: int, rank: int, m: int, v: int) -> tuple[Action, ...]:
    """Megatron's interleaved 1F1B (megatron/core/pipeline_parallel/schedules.py,
    ``forward_backward_pipelining_with_interleaving`` and ``get_pp_rank_microbatches``).

    The ``m * v`` virtual micro-batches ``k`` are taken in groups of ``pp * v``; within a group,
    ``pp`` consecutive ones go to each chunk in turn (chunk ``(k mod pp v) // pp``, micro-batch
    ``(k // (pp v)) * pp + k mod pp``); backwards visit the chunks in reverse
    (``v - 1 - chunk``). Warm-up forwards: ``(pp - rank - 1) * 2 + (v - 1) * pp`` (with
    ``microbatch_group_size_per_vp_stage = pp``, the default), capped at ``m * v``; then each
    steady step runs forward ``k + warmup`` and backward ``k``; the cool-down runs the rest of the
    backwards. With ``m`` a multiple of ``pp`` this order equals the table that current
    Megatron-core builds in ``get_schedule_table`` (groups of ``microbatch_group_size_per_vp_stage``
    micro-batches, each group run over all chunks). Older Megatron (before the group-size option)
    ran every forward in the warm-up when ``m == pp``; the current code does not, and neither do we.
    """
    total = m * v
    group = pp * v

    def fwd(k: int) -> Action:
        return Action("F", (k % group) // pp, (k // group) * pp + k % pp)

    def bwd(k: int) -> Action:
        return Action("B", v - 1 - (k % group) // pp, (k // group) * pp + k % pp)

    warmup = min((pp - rank - 1) * 2 + (v - 1) * pp, total)
    out = [fwd(k) for k in range(warmup)]
    remaining = total - warmup
    for k in range(remaining):
        out.append(fwd(k + warmup))
        out.append(bwd(k))
    out.extend(bwd(k) for k in range(remaining, total))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# layers per stage

def stage_layers(layers: int, pp: int, virtual_stages: int = 1) -> tuple[int, ...]:
    """Transformer layers of each global stage (``pp * virtual_stages`` entries, stage order).

    Stages differ by at most one layer. When ``layers`` does not divide, each stage gets
    ``layers // S`` and the ``layers % S`` extra layers go to the stages nearest the middle
    (ties: the lower index first, so between the two ends the first stage, whose extra work is an
    embedding lookup, gets a layer before the last, which also runs the logits GEMM and the loss),
    so the first and last stages are the ones left lighter. This is the split Llama 3 used
    (126 layers on 16 stages: one layer fewer on the first and the last stage; Llama 3 Herd of
    Models, arXiv 2407.21783, §3.3.2), and the same intent as Megatron's
    ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers`` (uneven first
    and last stages, the rest split evenly; megatron/core/transformer/transformer_block.py
    ``get_num_layers_to_build``). Megatron without those flags requires divisibility.
    """
    stages = pp * virtual_stages
    if stages < 1:
        raise InputError("parallel.pp", pp, "pp * virtual_stages >= 1")
    if layers < stages:
        raise InputError("parallel.pp", pp, f"pp * virtual_stages ({stages}) <= model.layers ({layers})")
    base, extra = divmod(layers, stages)
    # middle first: larger distance from the nearer end, then lower index
    order = sorted(range(stages), key=lambda i: (-min(i, stages - 1 - i), i))
    favoured = set(order[:extra])
    return tuple(base + (1 if i in favoured else 0) for i in range(stages))


def layout_stage_layers(layout, layers: int) -> tuple[int, ...]:
    """Layers of each global stage of ``layout`` (a ParallelLayout): its explicit or balanced
    ``layers_per_stage`` (parallel.layers_per_stage, mixed GPUs), else the even ``stage_layers``."""
    return layout.layers_per_stage or stage_layers(layers, layout.pp, layout.virtual_stages)


# ---------------------------------------------------------------------------------------------
# validation and dry run

@dataclass(frozen=True, slots=True)
class DryRun:
    """Unit-time execution of a schedule: start step of every action, per rank."""

    start: tuple[tuple[float, ...], ...]  # start time of each action, same shape as the schedule
    makespan: float
    busy: tuple[float, ...]  # compute time per rank

    @property
    def bubble_fraction(self) -> float:
        """Idle time over busy time of the busiest rank (Narayanan 2021 §2.2: bubble / ideal)."""
        ideal = max(self.busy)
        return (self.makespan - ideal) / ideal if ideal else 0.0


def _deps(kind: str, stage: int, mb: int, last_stage: int) -> tuple[tuple[str, int, int], ...]:
    """(kind, global stage, micro-batch) of the actions that must finish before this one starts."""
    if kind == "F":
        return (("F", stage - 1, mb),) if stage > 0 else ()
    if stage < last_stage:
        return (("F", stage, mb), ("B", stage + 1, mb))
    return (("F", stage, mb),)


def _describe(key: tuple[str, int, int], pp: int) -> str:
    kind, stage, mb = key
    return f"{Action(kind, stage // pp, mb)} on rank {stage % pp}"


def _check_complete(actions: Schedule, pp: int, m: int, v: int) -> None:
    if len(actions) != pp:
        raise ScheduleError(f"schedule has {len(actions)} ranks; expected pp = {pp}")
    expected = {(k, c, i) for k in ("F", "B") for c in range(v) for i in range(m)}
    for rank, acts in enumerate(actions):
        seen: set[tuple[str, int, int]] = set()
        for a in acts:
            key = (a.kind, a.chunk, a.micro_batch)
            if key in seen:
                raise ScheduleError(f"rank {rank}: action {a} appears twice\n" + format_grid(actions))
            if key not in expected:
                raise ScheduleError(f"rank {rank}: action {a} is not in chunks 0..{v - 1} x micro-batches "
                                    f"0..{m - 1} (kinds F, B)\n" + format_grid(actions))
            seen.add(key)
        missing = sorted(expected - seen)
        if missing:
            raise ScheduleError(f"rank {rank}: missing actions {' '.join(str(Action(*k)) for k in missing)}\n"
                                + format_grid(actions))


def dry_run(actions: Schedule, pp: int, num_micro_batches: int, virtual_stages: int = 1,
            forward_time: float = 1.0, backward_time: float = 1.0) -> DryRun:
    """Execute the schedule with fixed op times and no communication time; raise ScheduleError
    on an incomplete schedule or a deadlock (no rank can start its next action).

    An action starts when its rank is free and its dependencies have finished (list scheduling
    in each rank's order); the result does not depend on the order in which ranks are visited."""
    v = virtual_stages
    _check_complete(actions, pp, num_micro_batches, v)
    last_stage = pp * v - 1
    # per rank: (own key, dependency keys, duration), keys are (kind, global stage, micro-batch)
    plans = []
    for rank, acts in enumerate(actions):
        plan = []
        for a in acts:
            stage = a.chunk * pp + rank
            plan.append(((a.kind, stage, a.micro_batch), _deps(a.kind, stage, a.micro_batch, last_stage),
                         forward_time if a.kind == "F" else backward_time))
        plans.append(plan)
    finish: dict[tuple[str, int, int], float] = {}
    pos = [0] * pp
    clock = [0.0] * pp
    starts: list[list[float]] = [[] for _ in range(pp)]
    total = sum(len(p) for p in plans)
    done = 0
    while done < total:
        progressed = False
        for rank in range(pp):
            plan, i, t = plans[rank], pos[rank], clock[rank]
            while i < len(plan):
                key, deps, duration = plan[i]
                t0 = t
                ready = True
                for d in deps:
                    f = finish.get(d)
                    if f is None:
                        ready = False
                        break
                    if f > t0:
                        t0 = f
                if not ready:
                    break
                t = t0 + duration
                finish[key] = t
                starts[rank].append(t0)
                i += 1
            if i != pos[rank]:
                done += i - pos[rank]
                pos[rank], clock[rank] = i, t
                progressed = True
        if not progressed:
            waits = []
            for rank in range(pp):
                if pos[rank] < len(plans[rank]):
                    key, deps, _ = plans[rank][pos[rank]]
                    missing = [_describe(d, pp) for d in deps if d not in finish]
                    waits.append(f"rank {rank} at step {pos[rank]} ({actions[rank][pos[rank]]}) "
                                 f"waits for {', '.join(missing)}")
            raise ScheduleError("deadlock: " + "; ".join(waits) + "\n"
                                + format_grid(actions, error_steps={r: pos[r] for r in range(pp)
                                                                    if pos[r] < len(actions[r])}))
    busy = tuple(sum(p[2] for p in plan) for plan in plans)
    return DryRun(start=tuple(tuple(s) for s in starts), makespan=max(clock) if clock else 0.0, busy=busy)


def validate_schedule(actions: Schedule, pp: int, num_micro_batches: int, virtual_stages: int = 1) -> None:
    """Every (chunk, micro_batch) forward and backward exactly once per rank, and a unit-time dry
    run that completes. Raises ScheduleError (with a step x rank grid) otherwise."""
    dry_run(actions, pp, num_micro_batches, virtual_stages)


def max_in_flight(actions_of_rank: tuple[Action, ...] | list[Action]) -> int:
    """Most (chunk, micro-batch) pairs whose forward is done and backward not yet, at any point:
    the number of micro-batch activations one rank holds at its peak. With interleaving each
    pair holds the activations of one chunk (``layers / (pp * v)`` layers), not of the whole stage."""
    live: set[tuple[int, int]] = set()
    peak = 0
    for a in actions_of_rank:
        if a.kind == "F":
            live.add((a.chunk, a.micro_batch))
            peak = max(peak, len(live))
        elif a.kind == "B":
            live.discard((a.chunk, a.micro_batch))
    return peak


def format_grid(actions: Schedule, error_steps: dict[int, int] | None = None) -> str:
    """A step x rank table of the actions (like torch.distributed.pipelining's
    ``_format_pipeline_order``); rows holding a rank's blocked action end in ``<-- ERROR HERE``."""
    error_steps = error_steps or {}
    pp = len(actions)
    steps = max((len(a) for a in actions), default=0)
    width = max([len(f"Rank {r}") for r in range(pp)] + [len(str(a)) for acts in actions for a in acts] + [1])
    label = len(f"Step {max(steps - 1, 0):02d}:")
    lines = [" " * label + " " + " ".join(f"Rank {r}".ljust(width) for r in range(pp))]
    for s in range(steps):
        cells = []
        for r in range(pp):
            cells.append((str(actions[r][s]) if s < len(actions[r]) else "").ljust(width))
        line = f"Step {s:02d}:".ljust(label) + " " + " ".join(cells)
        bad = sorted(r for r, step in error_steps.items() if step == s)
        if bad:
            line = line.rstrip() + "  <-- ERROR HERE (rank " + ", ".join(map(str, bad)) + ")"
        lines.append(line.rstrip())
    return "\n".join(lines)
