"""Pipeline schedules as data: per pipeline rank, the ordered list of forward/backward actions.

A schedule is a tuple (one entry per pipeline rank) of tuples of :class:`Action`. Chunk ``c`` on
rank ``r`` is global stage ``c * pp + r`` (Megatron's interleaved assignment: rank ``r`` holds
model chunks ``r, r + pp, r + 2 pp, ...``; Narayanan et al. 2021, arXiv 2104.04473, §2.2.2).

Dependencies (what :func:`validate_schedule` and :func:`dry_run` follow):
  * F of global stage ``k`` for micro-batch ``m`` needs F of stage ``k - 1`` for ``m``;
  * B of stage ``k`` needs B of stage ``k + 1`` for ``m`` and F of stage ``k`` for ``m``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from clustersim.errors import InputError
from clustersim.parallel.dualpipe import dualpipe_actions
from clustersim.parallel.list_schedule import list_schedule
from clustersim.parallel.pipeline_data import KINDS, Action, Schedule, ScheduleError
from clustersim.parallel.stage_graph import StageGraph, stage_graph
from clustersim.parallel.zb_auto import StageCosts, zb_auto
from clustersim.parallel.zero_bubble import zb_h1, zb_v

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-2p", "zb-v", "dualpipe", "dualpipe-v")
# ordered from stage times (clustersim.parallel.zb_auto): the plan passes them, with the memory
# count, as ``costs`` (clustersim.plan.schedule_costs)
COST_DRIVEN_SCHEDULES = ("zb-2p",)

__all__ = ["COST_DRIVEN_SCHEDULES", "KINDS", "SCHEDULES", "Action", "DryRun", "Schedule", "ScheduleError", "StageGraph", "build_schedule",
           "combined_1f1b", "dry_run", "format_grid", "max_in_flight", "pair_steady_state", "stage_graph", "stage_layers",
           "validate_schedule"]


# ---------------------------------------------------------------------------------------------
# generation

@lru_cache(maxsize=64)  # pure and immutable; simulate() and estimate() ask for the same one
def build_schedule(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int = 1,
                   costs: StageCosts | None = None) -> Schedule:
    """Per-rank action lists for ``schedule`` (one of SCHEDULES); its placement of stages on
    ranks is ``stage_graph(schedule, pp, virtual_stages, num_micro_batches)``. ``costs``: zb-2p's
    stage times (clustersim.parallel.zb_auto; None: the paper's unit times); the others ignore it."""
    if schedule not in SCHEDULES:
        raise InputError("parallel.schedule", schedule, SCHEDULES)
    for field, value in (("parallel.pp", pp), ("num_micro_batches", num_micro_batches),
                         ("parallel.virtual_stages", virtual_stages)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(field, value, "a positive integer")
    if schedule != "interleaved-1f1b" and virtual_stages != 1:
        raise InputError("parallel.virtual_stages", virtual_stages, "1 unless parallel.schedule is interleaved-1f1b")
    m = num_micro_batches
    if schedule == "zb-h1":
        return tuple(zb_h1(pp, r, m) for r in range(pp))
    if schedule == "zb-2p":
        try:
            return zb_auto(pp, m, costs).order   # memory limit 2 pp F's, counted as costs.memory
        except ValueError as e:
            raise InputError("num_micro_batches", m, f"a count the ZB-2p heuristic can order ({e})") from None
    if schedule == "zb-v":
        return tuple(zb_v(pp, r, m) for r in range(pp))
    if schedule in ("dualpipe", "dualpipe-v"):
        dual = schedule == "dualpipe"
        if dual and (pp % 2 or m % 2 or m < 2 * pp):
            raise InputError("parallel.pp" if pp % 2 else "num_micro_batches", pp if pp % 2 else m,
                             "an even pp and an even number of micro-batches >= 2 * pp for dualpipe")
        if not dual and m < 2 * pp:
            raise InputError("num_micro_batches", m, f"at least 2 * pp ({2 * pp}) micro-batches for dualpipe-v")
        return tuple(dualpipe_actions(pp, r, m, dual) for r in range(pp))
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


def model_split(graph: StageGraph, layers: int, mtp_layers: int) -> tuple[int, ...]:
    """Layers of each model stage of ``graph`` (``split_layers`` over its model stages per rank:
    DualPipe's two chunks of a rank run the same model stage's layers in either direction, the
    V and interleaved schedules' chunks each their own)."""
    return split_layers(layers, mtp_layers, graph.pp, graph.num_model_stages // graph.pp)


def split_layers(layers: int, mtp_layers: int, pp: int, chunks: int = 1) -> tuple[int, ...]:
    """``stage_layers`` with ``mtp_layers`` multi-token-prediction modules counted in the split and
    placed on the last stage (clustersim.plan.stage_work.model_stage_layers): the last stage keeps
    its share minus the MTP modules (at least one layer), the sum stays ``layers``."""
    if not mtp_layers or layers + mtp_layers < pp * chunks:
        return stage_layers(layers, pp, chunks)
    counts = list(stage_layers(layers + mtp_layers, pp, chunks))
    counts[-1] -= min(mtp_layers, counts[-1] - 1)
    rest = sum(counts) - layers
    for i in sorted(range(len(counts)), key=lambda k: (-counts[k], k)):   # keep the sum exact
        if rest <= 0:
            break
        if counts[i] > 1:
            counts[i] -= 1
            rest -= 1
    return tuple(counts)


def layout_stage_layers(layout, layers: int) -> tuple[int, ...]:
    """Layers of each global stage of ``layout`` (a ParallelLayout): its explicit or balanced
    ``layers_per_stage`` (parallel.layers_per_stage, mixed GPUs, or a framework's split:
    clustersim.parallel.split), else the even ``stage_layers``. A V schedule's split has two model
    stages per rank under ``virtual_stages = 1``: each rank's entry is then the sum of its two."""
    counts = layout.layers_per_stage
    if not counts:
        return stage_layers(layers, layout.pp, layout.virtual_stages)
    if len(counts) == layout.pp * layout.virtual_stages:
        return counts
    graph = stage_graph(layout.schedule, layout.pp, layout.virtual_stages)
    return tuple(sum(counts[m] for m in graph.rank_model_stages(r)) for r in range(layout.pp))


# ---------------------------------------------------------------------------------------------
# validation and dry run

@dataclass(frozen=True, slots=True)
class DryRun:
    """Execution of a schedule with fixed op times: start time of every action, per rank."""

    start: tuple[tuple[float, ...], ...]  # start time of each action, same shape as the schedule
    makespan: float
    busy: tuple[float, ...]  # compute time per rank

    @property
    def bubble_fraction(self) -> float:
        """Idle time over busy time of the busiest rank (Narayanan 2021 §2.2: bubble / ideal)."""
        ideal = max(self.busy)
        return (self.makespan - ideal) / ideal if ideal else 0.0

    @property
    def bubble(self) -> float:
        """Idle time of the busiest rank before the step ends."""
        return self.makespan - max(self.busy)


def _deps(kind: str, stage: int, mb: int, graph: StageGraph) -> tuple[tuple[str, int, int], ...]:
    """(kind, global stage, micro-batch) of the actions that must finish before this one starts:
    F after the previous stage's F; B after its own F and the next stage's B; W after its B."""
    if kind == "F":
        prev = graph.prev[stage]
        return (("F", prev, mb),) if prev >= 0 else ()
    if kind == "W":
        return (("B", stage, mb),)
    nxt = graph.next[stage]
    return (("F", stage, mb), ("B", nxt, mb)) if nxt >= 0 else (("F", stage, mb),)


def _describe(key: tuple[str, int, int], graph: StageGraph) -> str:
    kind, stage, mb = key
    rank, chunk = graph.placement[stage]
    return f"{Action(kind, chunk, mb)} on rank {rank}"


def _graph_for(pp: int, m: int, v: int, graph: StageGraph | None) -> StageGraph:
    return graph if graph is not None else stage_graph("interleaved-1f1b" if v > 1 else "1f1b", pp, v, m)


def _check_complete(actions: Schedule, graph: StageGraph, m: int) -> None:
    pp = graph.pp
    if len(actions) != pp:
        raise ScheduleError(f"schedule has {len(actions)} ranks; expected pp = {pp}")
    for rank, acts in enumerate(actions):
        expected = {(k, c, i) for c in range(graph.chunks) for i in range(m) if graph.runs(rank, c, i)
                    for k in ("F", "B")}
        seen: set[tuple[str, int, int]] = set()
        for step, a in enumerate(acts):
            key = a.key
            if key in seen:
                raise ScheduleError(f"rank {rank}: action {a} appears twice\n" + format_grid(actions))
            if key not in expected and not (a.kind == "W" and ("B", a.chunk, a.micro_batch) in expected):
                raise ScheduleError(f"rank {rank}: action {a} is not in chunks 0..{graph.chunks - 1} x micro-batches "
                                    f"0..{m - 1} of this rank (kinds F, B, W)\n" + format_grid(actions))
            if a.paired and (step + 1 >= len(acts) or {a.kind, acts[step + 1].kind} != {"F", "B"}):
                raise ScheduleError(f"rank {rank}: action {a} is paired but is not followed by a backward/forward"
                                    " to overlap with\n" + format_grid(actions))
            seen.add(key)
        missing = sorted(expected - seen)
        if missing:
            raise ScheduleError(f"rank {rank}: missing actions {' '.join(str(Action(*k)) for k in missing)}\n"
                                + format_grid(actions))


def split_weight_keys(actions_of_rank: tuple[Action, ...] | list[Action]) -> frozenset[tuple[int, int]]:
    """(chunk, micro-batch) whose backward is split: a W action follows its B."""
    return frozenset((a.chunk, a.micro_batch) for a in actions_of_rank if a.kind == "W")


def dry_run(actions: Schedule, pp: int, num_micro_batches: int, virtual_stages: int = 1,
            forward_time: float = 1.0, backward_time: float = 1.0, weight_time: float | None = None,
            graph: StageGraph | None = None) -> DryRun:
    """Execute the schedule with fixed op times and no communication time; raise ScheduleError
    on an incomplete schedule or a deadlock (no rank can start its next action).

    ``backward_time`` is a whole backward (input and weight gradients); where the schedule splits
    it, B takes ``backward_time - weight_time`` and W ``weight_time`` (default half). ``graph``:
    the schedule's stage placement (default: Megatron's interleaved placement with
    ``virtual_stages`` chunks). An action starts when its rank is free and its dependencies have
    finished (``parallel.list_schedule``: list scheduling in each rank's order, no transfer
    time); the halves of an overlapped pair run one after the other and hand on both results
    when the second ends. The result does not depend on the order in which ranks are visited."""
    graph = _graph_for(pp, num_micro_batches, virtual_stages, graph)
    _check_complete(actions, graph, num_micro_batches)
    w_t = backward_time / 2 if weight_time is None else weight_time
    # events: (kind, global stage, micro-batch) of every action, numbered by arithmetic
    m, stages = num_micro_batches, graph.num_stages
    prev, nxt = graph.prev, graph.next
    f_base, b_base, w_base = 0, stages * m, 2 * stages * m
    needs: list[list[tuple[int, ...]]] = []
    sends: list[list[tuple[int, ...]]] = []
    durations: list[list[float]] = []
    for rank, acts in enumerate(actions):
        split = split_weight_keys(acts)
        nd: list[tuple[int, ...]] = []
        sd: list[tuple[int, ...]] = []
        du: list[float] = []
        first = -1  # the event of the first half of a pair that runs just before
        for a in acts:
            stage = graph.stage(rank, a.chunk)
            mb = a.micro_batch
            at = stage * m + mb
            if a.kind == "F":
                own = f_base + at
                deps: tuple[int, ...] = (f_base + prev[stage] * m + mb,) if prev[stage] >= 0 else ()
                du.append(forward_time)
            elif a.kind == "W":
                own = w_base + at
                deps = (b_base + at,)
                du.append(w_t)
            else:
                own = b_base + at
                deps = (f_base + at, b_base + nxt[stage] * m + mb) if nxt[stage] >= 0 else (f_base + at,)
                du.append(backward_time - w_t if (a.chunk, mb) in split else backward_time)
            if a.paired:
                # an overlapped pair hands on both results when the pair ends (DualPipe sends
                # after _forward_backward_compute_chunk returns): the second half sends both
                sd.append(())
                first = own
            elif first >= 0:
                deps = tuple(d for d in deps if d != first)   # ran just before, on this rank
                sd.append((own, first))
                first = -1
            else:
                sd.append((own,))
            nd.append(deps)
        needs.append(nd)
        sends.append(sd)
        durations.append(du)

    def key(e: int) -> tuple[str, int, int]:
        kind, rest = divmod(e, stages * m)
        return ("F", "B", "W")[kind], rest // m, rest % m

    run = list_schedule(needs, sends, durations, 3 * stages * m)
    if not run.complete:
        waits = []
        for rank in range(pp):
            i = run.ran[rank]
            if i < len(actions[rank]):
                missing = [_describe(key(e), graph) for e in needs[rank][i] if run.arrivals[e] is None]
                waits.append(f"rank {rank} at step {i} ({actions[rank][i]}) waits for {', '.join(missing)}")
        raise ScheduleError("deadlock: " + "; ".join(waits) + "\n"
                            + format_grid(actions, error_steps={r: run.ran[r] for r in range(pp)
                                                                if run.ran[r] < len(actions[r])}))
    busy = tuple(sum(du) for du in durations)
    return DryRun(start=tuple(tuple(s) for s in run.starts), makespan=max(run.clock) if run.clock else 0.0,
                  busy=busy)


def validate_schedule(actions: Schedule, pp: int, num_micro_batches: int, virtual_stages: int = 1,
                      graph: StageGraph | None = None) -> None:
    """Every forward and backward of the rank's (chunk, micro-batch) pairs exactly once (and at
    most one W after its B), and a unit-time dry run that completes. Raises ScheduleError (with a
    step x rank grid) otherwise."""
    dry_run(actions, pp, num_micro_batches, virtual_stages, graph=graph)


def max_in_flight(actions_of_rank: tuple[Action, ...] | list[Action]) -> int:
    """Most (chunk, micro-batch) pairs whose forward is done and whose activations are not yet
    freed, at any point: the number of micro-batch activations one rank holds at its peak. They
    are freed by the backward, or by the W when the weight gradient is split off (the W still
    reads the layer inputs that the weight-gradient GEMMs need). With interleaving each pair holds
    the activations of one chunk (``layers / (pp * v)`` layers), not of the whole stage."""
    split = split_weight_keys(actions_of_rank)
    live: set[tuple[int, int]] = set()
    peak = 0
    for a in actions_of_rank:
        key = (a.chunk, a.micro_batch)
        if a.kind == "F":
            live.add(key)
            peak = max(peak, len(live))
        elif a.kind == "W" or key not in split:
            live.discard(key)
    return peak


COMBINED_1F1B_SCHEDULES = ("1f1b", "interleaved-1f1b")


def combined_1f1b(schedule: str, ep_overlap: bool) -> bool:
    """Whether ``schedule`` runs as Megatron-Core's combined 1F1B (``pair_steady_state``): with the
    EP all-to-all overlap on, the 1F1B schedules (DualPipe pairs its own chunks)."""
    return ep_overlap and schedule in COMBINED_1F1B_SCHEDULES


def pair_steady_state(actions: Schedule) -> Schedule:
    """Megatron's EP all-to-all overlap (``--overlap-moe-expert-parallel-comm``, MCore v0.14,
    megatron/core/pipeline_parallel/combined_1f1b.py) on a 1F1B schedule: each rank runs one
    forward more alone in its warmup than 1F1B does (schedules.py adds one to
    ``num_warmup_microbatches``; with one stage ``combined_1f1b_schedule_for_no_pipelining`` runs
    the first forward alone), then pairs each next forward with the oldest backward still to run,
    then runs the remaining backwards alone. 1F1B's own order would pair a forward with the
    backward right after it, which on the last stage is its own micro-batch's (docs/moe.md, "EP
    overlap: which forward pairs with which backward")."""
    return tuple(_combined_order(acts) for acts in actions)


def _combined_order(actions_of_rank: tuple[Action, ...]) -> tuple[Action, ...]:
    forwards = [a for a in actions_of_rank if a.kind == "F"]
    backwards = [a for a in actions_of_rank if a.kind == "B"]
    if len(forwards) + len(backwards) != len(actions_of_rank) or any(a.paired for a in actions_of_rank):
        raise ScheduleError("EP-overlap pairs need a 1F1B order of unpaired forwards and backwards\n"
                            + format_grid((actions_of_rank,)))
    # 1F1B's warmup forwards and its first steady-state one: the combined schedule's warmup
    warmup = next((i for i, a in enumerate(actions_of_rank) if a.kind != "F"), len(actions_of_rank))
    out = forwards[:warmup]
    for f, b in zip(forwards[warmup:], backwards, strict=False):
        out += [Action(f.kind, f.chunk, f.micro_batch, True), b]
    out += backwards[len(forwards) - warmup:]
    return tuple(out)


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
