"""Each pipeline rank's actions as the closed form runs them, for the sweep's bounds.

``program`` is the schedule as the third level of the bound replays it (clustersim.sweep.replay):
per rank, its actions in order, each with the inputs it awaits, the (stage, part) it runs (two
for an overlapped pair), what it sends and the stages whose final backward it is.

``final_counts`` reads the same program without waits: per rank and per final backward, how
many actions of each kind the rank runs before it. The rank's compute stream runs its actions
one after another, so each final backward starts no earlier than the sum of their durations
(``StreamTerms.stream_floor_s``, the second level's data-parallel stream term of the schedules
without the backward chain: zero-bubble and DualPipe).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

from clustersim.parallel.pipeline import build_schedule, model_split, stage_graph
from clustersim.plan.actions import action_skeleton
from clustersim.plan.optimizer_step import micro_batch_grad_pass_s
from clustersim.plan.step_plan import CLASSIC_SCHEDULES, RankAction, classic_actions
from clustersim.sweep.unit_times import PartTimes, UnitSeconds

if TYPE_CHECKING:
    from clustersim.parallel.layout import ParallelLayout
    from clustersim.scenario import Scenario

# an action: one (stage, part), or the two halves of an overlapped pair
Kind = tuple[tuple[int, str], ...]


class ProgramStep(NamedTuple):
    """One step of a rank's program: an action alone or an overlapped pair of two."""

    needs: tuple[tuple, ...]       # the inputs it awaits (keys of the closed form's sends)
    parts: Kind                    # (global stage, part) of the action, or of both halves of a pair
    sends: tuple[tuple, ...]       # the outputs it sends
    finals: tuple[int, ...]        # the stages whose final backward (or W) it is


class FinalCount(NamedTuple):
    """A final backward of a rank (``final_counts``): how many of each kind of the rank's actions
    run before it and its stages."""

    before: tuple[int, ...]
    stages: tuple[int, ...]


class RankCounts(NamedTuple):
    """``final_counts`` of one rank: its kinds of action, its final backwards, how many of each
    kind it runs in all, and the producers of its first action's inputs, each as (their rank, how
    many of each of that rank's kinds run up to and including it)."""

    kinds: tuple[Kind, ...]
    finals: tuple[FinalCount, ...]
    total: tuple[int, ...]
    producers: tuple[tuple[int, tuple[int, ...]], ...]


def pair_s(a: UnitSeconds, b: UnitSeconds, slowdown: float = 0.0) -> float:
    """Least duration of a forward and a backward run as one overlapped pair
    (``engine.pair``): both chains' kernels share one compute stream and their collectives one
    communication stream, and each chain runs its own segments one after another, so the pair
    lasts at least ``max(c_a + c_b, m_a + m_b, c_a + m_a, c_b + m_b)`` (kernels at full rate,
    collectives at their contention-free time; ``UnitSeconds`` = (compiled, kernels, collectives)).

    Kernels run at most ``1 - slowdown`` of their rate while a collective of the pair is in
    flight (``plan.overlap.compute_rate``, ``engine.pair.pair_timing``). With ``C`` and ``M``
    the pair's kernel and collective seconds and ``A`` the time both run: the pair lasts at
    least (kernels alone) + A + (collectives alone) = ``(C - (1 - s) A) + A + (M - A)``, and
    ``A <= min(M, C / (1 - s))``: so at least ``C + M - (1 - s) min(M, C / (1 - s))``, which is
    ``C + s M`` wherever the collectives fit under the slowed kernels."""
    c, m = a[1] + b[1], a[2] + b[2]
    both = min(m, c / (1.0 - slowdown)) if slowdown < 1.0 else 0.0
    return max(c + m - (1.0 - slowdown) * both, c, m, a[1] + a[2], b[1] + b[2])


@functools.lru_cache(maxsize=1024)
def program(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int, ep_overlap: bool
            ) -> tuple[tuple[ProgramStep, ...], ...]:
    """Per rank, its actions as (inputs awaited, (stage, part) of the action or of both halves
    of a pair, outputs sent, the stages whose final backward it is), from the actions the closed
    form runs (``plan.step_plan.classic_actions`` for GPipe / 1F1B / interleaved 1F1B without
    pairs, else ``plan.actions.action_skeleton``)."""
    if schedule in CLASSIC_SCHEDULES and not (ep_overlap and schedule != "gpipe"):
        # the closed form's own resolution of these (cached: the layout's estimate reuses it)
        actions = classic_actions(schedule, pp, num_micro_batches, virtual_stages, 0)
    else:
        graph = stage_graph(schedule, pp, virtual_stages, num_micro_batches)
        actions = action_skeleton(schedule, pp, num_micro_batches, virtual_stages, ep_overlap, graph)
    out = []
    for acts in actions:
        if not any(a.paired for a in acts):   # every action alone (the classic schedules): one pass
            out.append(tuple([ProgramStep((a.needs,) if a.needs is not None else (), ((a.stage, a.part),),
                                          tuple([s[0] for s in a.sends]), (a.stage,) if a.final else ())
                              for a in acts]))
            continue
        prog, i = [], 0
        while i < len(acts):
            group = (acts[i], acts[i + 1]) if acts[i].paired else (acts[i],)
            prog.append(ProgramStep(tuple(x.needs for x in group if x.needs is not None),
                                    tuple((x.stage, x.part) for x in group),
                                    tuple(send[0] for x in group for send in x.sends),
                                    tuple(x.stage for x in group if x.final)))
            i += len(group)
        out.append(tuple(prog))
    return tuple(out)


class IndexedProgram(NamedTuple):
    """``program`` in the list-scheduling kernel's form (clustersim.parallel.list_schedule): per
    rank and step, the events it awaits and sends (integers), the index of its kind in
    ``kinds`` (one (stage, part), or the two halves of a pair), the stage of the forward it
    runs alone (-1: none) or, for a pair, of its forward half (``pair_forward``); and per rank
    its final backwards as (step, stage): alone or in a pair, a final backward enqueues its
    units' gradient buckets as each unit ends, so from its step's start on (docs/moe.md, "EP
    overlap and data parallelism")."""

    needs: tuple[tuple[tuple[int, ...], ...], ...]
    sends: tuple[tuple[tuple[int, ...], ...], ...]
    kind: tuple[tuple[int, ...], ...]
    kinds: tuple[Kind, ...]
    forward: tuple[tuple[int, ...], ...]
    pair_forward: tuple[tuple[tuple[int, ...], ...], ...]
    finals: tuple[tuple[tuple[int, int], ...], ...]
    num_events: int


def _indexed_classic(actions: tuple[tuple[RankAction, ...], ...]) -> IndexedProgram:
    """``indexed_program`` of the classic schedules' actions (every action alone, at most one
    input and one output each), read from them directly instead of through ``program``'s steps:
    the same events, kinds and numbering (first seen, rank by rank, each action's input before
    its output)."""
    events: dict[object, int] = {}
    kinds: dict[Kind, int] = {}
    needs, sends, kind, forward, finals = [], [], [], [], []
    for acts in actions:
        nd, sd, kd, fw, fin = [], [], [], [], []
        for i, a in enumerate(acts):
            if a.needs is None:
                nd.append(())
            else:
                e = events.get(a.needs)
                if e is None:
                    e = events[a.needs] = len(events)
                nd.append((e,))
            if a.sends:
                key = a.sends[0][0]
                e = events.get(key)
                if e is None:
                    e = events[key] = len(events)
                sd.append((e,))
            else:
                sd.append(())
            parts = ((a.stage, a.part),)
            k = kinds.get(parts)
            if k is None:
                k = kinds[parts] = len(kinds)
            kd.append(k)
            fw.append(a.stage if a.part == "F" else -1)
            if a.final:
                fin.append((i, a.stage))
        needs.append(tuple(nd))
        sends.append(tuple(sd))
        kind.append(tuple(kd))
        forward.append(tuple(fw))
        finals.append(tuple(fin))
    return IndexedProgram(tuple(needs), tuple(sends), tuple(kind), tuple(kinds), tuple(forward),
                          tuple(tuple(() for _ in acts) for acts in actions), tuple(finals), len(events))


@functools.lru_cache(maxsize=1024)
def indexed_program(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int, ep_overlap: bool
                    ) -> IndexedProgram:
    """``IndexedProgram`` of ``program`` (memoised: a pure function of its integer arguments)."""
    if schedule in CLASSIC_SCHEDULES and not (ep_overlap and schedule != "gpipe"):
        return _indexed_classic(classic_actions(schedule, pp, num_micro_batches, virtual_stages, 0))
    return indexed_steps(program(schedule, pp, num_micro_batches, virtual_stages, ep_overlap))


def indexed_steps(progs: tuple[tuple[ProgramStep, ...], ...]) -> IndexedProgram:
    """``IndexedProgram`` of per-rank ``program`` steps."""
    events: dict[object, int] = {}
    kinds: dict[Kind, int] = {}
    needs, sends, kind, forward, pair_forward, finals = [], [], [], [], [], []
    def event(key: object) -> int:
        got = events.get(key)
        if got is None:
            got = events[key] = len(events)
        return got

    for prog in progs:
        nd, sd, kd, fw, pf, fin = [], [], [], [], [], []
        for i, (waits, parts, sent, final) in enumerate(prog):
            nd.append((event(waits[0]),) if len(waits) == 1 else tuple([event(k) for k in waits]))
            sd.append((event(sent[0]),) if len(sent) == 1 else tuple([event(k) for k in sent]))
            k = kinds.get(parts)
            if k is None:
                k = kinds[parts] = len(kinds)
            kd.append(k)
            if len(parts) == 1:
                fw.append(parts[0][0] if parts[0][1] == "F" else -1)
                pf.append(())
            else:
                fw.append(-1)
                pf.append(tuple([g for g, part in parts if part == "F"]))
            fin.extend([(i, g) for g in final])
        needs.append(tuple(nd))
        sends.append(tuple(sd))
        kind.append(tuple(kd))
        forward.append(tuple(fw))
        pair_forward.append(tuple(pf))
        finals.append(tuple(fin))
    return IndexedProgram(tuple(needs), tuple(sends), tuple(kind), tuple(kinds), tuple(forward),
                          tuple(pair_forward), tuple(finals), len(events))


@functools.lru_cache(maxsize=1024)
def final_counts(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int, ep_overlap: bool
                 ) -> tuple[RankCounts, ...]:
    """Per rank of ``program``, its ``RankCounts``: its kinds of action; per final backward (in
    order) how many of each kind run before it (alone or in a pair it enqueues its buckets from
    its start on: ``IndexedProgram``) and its stages; how many of each kind the rank runs in all; and the producers of its first action's
    inputs, each as (their rank, how many of each of that rank's kinds run up to and including it)."""
    progs = program(schedule, pp, num_micro_batches, virtual_stages, ep_overlap)
    kinds: list[dict[Kind, int]] = []
    through: list[list[tuple[int, ...]]] = []  # per rank and action: counts up to and including it
    sent: dict[object, tuple[int, int]] = {}
    for r, prog in enumerate(progs):
        ks: dict[Kind, int] = {}
        counts: list[int] = []
        cum = []
        for j, (_, parts, sends, _) in enumerate(prog):
            k = ks.setdefault(parts, len(ks))
            if k == len(counts):
                counts.append(0)
            counts[k] += 1
            cum.append(tuple(counts))
            for key in sends:
                sent[key] = (r, j)
        kinds.append(ks)
        through.append(cum)

    def padded(r: int, c: tuple[int, ...]) -> tuple[int, ...]:
        return c + (0,) * (len(kinds[r]) - len(c))

    out = []
    for r, prog in enumerate(progs):
        finals = []
        for j, (_, _, _, final) in enumerate(prog):
            if final:
                before = through[r][j - 1] if j else ()
                finals.append(FinalCount(padded(r, before), final))
        needs = prog[0][0] if prog else ()
        producers = tuple((q, padded(q, through[q][j])) for q, j in (sent[k] for k in needs))
        out.append(RankCounts(tuple(kinds[r]), tuple(finals), padded(r, through[r][-1]) if prog else (), producers))
    return tuple(out)


def _sum(n: int, layer: UnitSeconds, first: UnitSeconds | None, last: UnitSeconds | None) -> UnitSeconds:
    out = [n * x for x in layer]
    for extra in (first, last):
        if extra is not None:
            out = [a + b for a, b in zip(out, extra, strict=True)]
    return UnitSeconds(*out)


@functools.lru_cache(maxsize=1024)
def stage_layers(schedule: str, pp: int, virtual_stages: int, num_micro_batches: int, layers: int,
                 mtp_layers: int) -> tuple[tuple[int, ...], tuple[bool, ...], tuple[bool, ...]]:
    """Per global stage: its transformer layers, whether it holds the embedding, the head
    (``plan.stage_work.model_stage_layers``)."""
    graph = stage_graph(schedule, pp, virtual_stages, num_micro_batches)
    counts = model_split(graph, layers, mtp_layers)
    last = graph.num_model_stages - 1
    ms = [graph.model_stage[g] for g in range(graph.num_stages)]
    return tuple(counts[m] for m in ms), tuple(m == 0 for m in ms), tuple(m == last for m in ms)


def stage_durations(base: Scenario, layout: ParallelLayout, t: PartTimes) -> dict[tuple[int, str], UnitSeconds]:
    """``UnitSeconds`` of every part of every global stage of ``layout`` (a layout of ``base``),
    from ``t`` (the ``unit_times.PartTimes`` of its class), each backward (B) and weight part (W)
    with the framework's pass over the stage's gradients that the plan appends to its last unit
    (``plan.optimizer_step.micro_batch_grad_pass_s`` of the stage's parameters, at least its
    layers at the cheaper kind's, its embedding and head; 0 for most frameworks). That unit
    lasts at least its compiled time and at least its kernels plus the pass, so the part lasts
    at least ``max(compiled, kernels + pass)`` of its units' sums; the pass is a kernel."""
    model = base.model
    counts, firsts, lasts = stage_layers(layout.schedule, layout.pp, layout.virtual_stages,
                                         layout.num_micro_batches, model.layers, model.mtp_layers)
    out = {}
    for g, (n, f, la) in enumerate(zip(counts, firsts, lasts, strict=True)):
        grad_pass_s = micro_batch_grad_pass_s(base, n * t.layer_params + (t.first_params if f else 0)
                                              + (t.last_params if la else 0))
        for part in t.layer:
            x = _sum(n, t.layer[part], t.first[part] if f else None, t.last[part] if la else None)
            if grad_pass_s and part in ("B", "W"):
                x = x._replace(compiled_s=max(x.compiled_s, x.kernels_s + grad_pass_s),
                               kernels_s=x.kernels_s + grad_pass_s)
            out[(g, part)] = x
    return out


class StartPath(NamedTuple):
    """A chain of forwards that a rank's first action waits for, run one after another: its
    transformer layers, embedding units, head units and pipeline transfers."""

    layers: int
    embeddings: int
    heads: int
    transfers: int


@functools.lru_cache(maxsize=1024)
def start_paths(schedule: str, pp: int, num_micro_batches: int, virtual_stages: int, layers: int,
                mtp_layers: int) -> tuple[tuple[StartPath, ...], ...]:
    """Per rank, what its first action waits for in the zero-bubble and DualPipe schedules (whose
    programs EP overlap leaves alone, ``plan.actions``): a first forward awaits the forward of
    the stage before it on the path (``StageGraph.prev``) for its micro-batch, which its rank runs
    after all the actions before it there, one after another, from that rank's own start; then
    one transfer. Each path counts the forwards run alone on the way (a backward or a half of a
    pair counts nothing: a bound); the rank starts no earlier than the longest. Read from the
    schedule's action lists (``build_schedule``), up to the producing actions only
    (tests/sweep/test_screen.py checks them against ``final_counts``' producers). For the
    classic schedules the screen's fill does this already (``ScheduleProfile.fill``)."""
    actions = build_schedule(schedule, pp, num_micro_batches, virtual_stages)
    graph = stage_graph(schedule, pp, virtual_stages, num_micro_batches)
    counts, firsts, lasts = stage_layers(schedule, pp, virtual_stages, num_micro_batches, layers, mtp_layers)
    memo: dict[int, tuple[StartPath, ...]] = {}

    def producer(r: int) -> tuple[int, tuple[int, int, int]] | None:
        """The rank that feeds rank r's first action, and the forwards it runs alone up to it."""
        a = actions[r][0] if actions[r] else None
        if a is None or a.kind != "F":
            return None
        prev = graph.prev[graph.stage(r, a.chunk)]
        if prev < 0:
            return None
        q, chunk = graph.placement[prev]
        n = e = h = 0
        acts = actions[q]
        for j, b in enumerate(acts):
            if b.kind == "F" and not b.paired and not (j and acts[j - 1].paired):
                g = graph.stage(q, b.chunk)
                n, e, h = n + counts[g], e + firsts[g], h + lasts[g]
            if b.kind == "F" and b.chunk == chunk and b.micro_batch == a.micro_batch:
                return q, (n, e, h)
        raise AssertionError(f"{schedule}: rank {q} never runs the forward rank {r} awaits")

    def paths(r: int) -> tuple[StartPath, ...]:
        if r not in memo:  # producers run before their consumers: no cycle
            fed = producer(r)
            if fed is None:
                memo[r] = ()
            else:
                q, (n, e, h) = fed
                memo[r] = tuple(StartPath(a + n, b + e, c + h, k + 1) for a, b, c, k in paths(q) or ((0, 0, 0, 0),))
        return memo[r]

    return tuple(paths(r) for r in range(pp))
