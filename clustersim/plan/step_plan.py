"""What each simulated rank does in one step: compiled units, sends, optimizer, schedule.

Both engines walk *simulated ranks*. A simulated rank is pipeline rank ``p`` of a *rank class*: a
set of data-parallel replicas (pipelines) that run alike. A healthy, homogeneous cluster has one
class standing for all ``dp`` replicas, so the engines walk ``pp`` ranks (the representative-rank
path). Faults and mixed GPUs (clustersim.perrank) split the replicas into classes whose pipeline
stages differ in where they run (``Host``: the scenario as seen from that stage's node group, a
compute speed, a scale-out link speed) and in how many micro-batches they run; data-parallel
collectives then couple the classes (a collective starts when its slowest member is ready).

Simulated rank ``k`` is pipeline rank ``k % pp`` of class ``k // pp``; its global stages are
``chunk * pp + k % pp``.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from clustersim.collectives import CollectivePlan
from clustersim.frameworks import blocking_from
from clustersim.parallel.pipeline import build_schedule
from clustersim.plan import step_terms
from clustersim.plan.actions import plan_actions
from clustersim.plan.comm_plans import Item, pp_plan
from clustersim.plan.compiled_unit import CompiledUnit, compile_unit
from clustersim.plan.data_parallel import DpPlan, DpTail, dp_plan
from clustersim.plan.optimizer_step import grad_norm_all_reduce_s
from clustersim.plan.overlap import overlap_slowdown
from clustersim.plan.speed_scaling import scale_dp_plan, scale_plan, scale_work
from clustersim.plan.stage_work import StageWork, Work, build_step_work
from clustersim.scenario import Scenario

Key = tuple[str, int, int, int]  # (kind, class, global stage, micro-batch) of an input sent between ranks

CLASSIC_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")


class _Kinds(Sequence):
    """The kinds of a rank's actions, read only where ``frameworks.blocking_from`` looks at them
    (Megatron's interleaved schedule): a view, so the other schedules' plans do not build a list
    of every action's kind per rank."""

    __slots__ = ("_actions",)

    def __init__(self, actions: Sequence[RankAction]) -> None:
        self._actions = actions

    def __len__(self) -> int:
        return len(self._actions)

    def __getitem__(self, i):  # type: ignore[override]
        return self._actions[i].kind


class Total(NamedTuple):
    """The contention-free duration of an action's units and its split by cause."""

    time_s: float
    by_cause: tuple[tuple[str, float], ...]


class RankAction(NamedTuple):
    """One scheduled action of a simulated rank, resolved (clustersim.plan.actions): its global
    stage, the units it runs (``part``: "F", "B" the whole backward, "Bi" its input-gradient part,
    "W" the weight-gradient part), the input it waits for, the outputs it sends (key and the
    pipeline boundary whose link carries it), whether it completes the chunk's gradients and
    whether it runs overlapped with the next action (a DualPipe / EP-overlap F&B pair).

    Immutable, as a named tuple: a step of a 1,000-stage schedule holds tens of thousands of
    them, and a frozen dataclass spends 10 us building each (``object.__setattr__`` per field)."""

    kind: str
    chunk: int
    micro_batch: int
    stage: int
    part: str
    needs: Key | None
    sends: tuple[tuple[Key, int], ...]
    final: bool
    paired: bool
    label: str

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True, slots=True)
class Host:
    """Where one pipeline stage of a class runs: the scenario as its GPUs see it (their node
    group's cluster), the compute speed of its slowest GPU (1 = nominal; a GPU at 0.5 takes twice
    as long for every kernel) and the bandwidth factor of its slowest scale-out link."""

    scenario: Scenario
    speed: float = 1.0
    link_speed: float = 1.0


@dataclass(frozen=True, slots=True)
class RankClass:
    """Data-parallel replicas that run alike: one host per pipeline rank, their micro-batches."""

    hosts: tuple[Host, ...]
    num_micro_batches: int
    replicas: tuple[int, ...] = ()   # the data-parallel indices it stands for (reports)


@dataclass(frozen=True, slots=True)
class SimRank:
    index: int
    klass: int
    pp_rank: int
    actions: tuple[RankAction, ...]
    units: dict[tuple[int, str], tuple[CompiledUnit, ...]]   # (global stage, part) -> units in order
    totals: dict[tuple[int, str], Total]
    isolated: dict[tuple[int, str], bool]    # the action's units cannot contend with other traffic
    private: dict[tuple[int, str], bool]     # ... except among themselves (their tiers carry nothing else)
    split: dict[tuple[int, int], tuple[CompiledUnit, CompiledUnit]]  # (stage, bwd unit) -> recompute, proper
    send: dict[str, CollectivePlan | None]   # "F": to the next stage, "B": to the previous one
    send_s: dict[str, float]                 # their contention-free durations
    tail: DpTail                             # after the last backward: reductions, optimizer step, gathers
    final_b: frozenset[int]                  # action indices of each chunk's last backward (or W)
    stages: tuple[int, ...]                  # global stages held (chunk order)
    slowdown: float                          # compute rate lost per concurrent collective (its GPU)
    send_at: dict[int, CollectivePlan] = field(default_factory=dict)   # pipeline boundary -> transfer
    send_at_s: dict[int, float] = field(default_factory=dict)
    # (schedule, pp, micro-batches, virtual stages, pp rank) when ``actions`` are ``classic_actions``'
    # of those integers (a key for tables over them that depend on the schedule alone); else None
    schedule_key: tuple[str, int, int, int, int] | None = None
    # waits both engines add before the optimizer step (clustersim.plan.step_terms): the slowest
    # GPU's pace (breakdown cause "jitter") and the host's share (cause "host")
    jitter_s: float = 0.0
    host_s: float = 0.0
    # the first action whose sends hold the rank until they have arrived (len(actions): none; 0: every
    # one), clustersim.frameworks.blocking_from: both engines wait after action i >= blocks_from
    blocks_from: int = 0


class StepMemo:
    """What the timing models learn about one plan and keep with it (the plan's own memo, so
    it lives and dies with the plan): the event engine's duration of an action run alone, per
    compiled units (clustersim.engine.unit_runner.alone_total, for the hybrid engine), and the
    steady-state tables of the periodic collapse (clustersim.engine.collapse), and that run's
    segments where a timeline is recorded (unit_runner.alone_segments)."""

    __slots__ = ("alone", "alone_segments", "collapse_tables")

    def __init__(self) -> None:
        self.alone: dict[tuple, Total] = {}
        self.alone_segments: dict[tuple, list] = {}
        self.collapse_tables: tuple[list[list[int]], list[list[int]]] | None = None


@dataclass(frozen=True, slots=True)
class StepPlan:
    """Every simulated rank of one step, resolved: what all timing models run (module docstring)."""

    scenario: Scenario
    pp: int
    virtual_stages: int
    num_global: int
    ranks: tuple[SimRank, ...]
    classes: tuple[RankClass, ...]
    dp: DpPlan                                   # data-parallel work of every class (stage-indexed)
    shared_tiers: frozenset[str]                 # link tiers DP or PP traffic uses beside compute
    isolated: bool                               # no unit's collectives can contend with other traffic
    period: tuple[int, int] = (0, 0)             # (actions, micro-batches) of the steady state; 0: none
    param_gathers: tuple[tuple[tuple[int, int], tuple[Item, ...]], ...] = field(default=())
    # the schedule has actions only the general paths run (W actions, F&B pairs, a V or DualPipe
    # stage graph, the host link): no steady-state collapse, no hybrid event engine
    general: bool = False
    memo: StepMemo = field(default_factory=StepMemo, compare=False, hash=False, repr=False)

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def rank_of(self, klass: int, stage: int) -> int:
        return klass * self.pp + stage % self.pp


# ---------------------------------------------------------------------------------------------
# building

class UnitCompiler:
    """Compiled units per (work tuple, host scenario, speed, link speed), shared by the ranks of a
    plan and by every plan built with the same compiler (clustersim.plan.plan_cache.PlanCache).

    The work tuples of a step are shared and immutable (clustersim.plan.stage_work: layers of one
    kind share one tuple), so they are keyed by identity: hashing them would cost more than
    compiling. The compiler holds every tuple it has seen, so an identity stays valid while it lives."""

    def __init__(self) -> None:
        self._units: dict[tuple[int, Scenario, float, float], CompiledUnit] = {}
        self._keep: list[Work] = []

    def __call__(self, host: Host, work: Work) -> CompiledUnit:
        key = (id(work), host.scenario, host.speed, host.link_speed)
        unit = self._units.get(key)
        if unit is None:
            unit = compile_unit(host.scenario, scale_work(work, host.speed), host.link_speed)
            self._units[key] = unit
            self._keep.append(work)  # keep the id valid
        return unit


def _total(units: tuple[CompiledUnit, ...]) -> Total:
    by_cause: dict[str, float] = {}
    for unit in units:
        for cause, sec in unit.by_cause:
            by_cause[cause] = by_cause.get(cause, 0.0) + sec
    return Total(sum(u.time_s for u in units), tuple(sorted(by_cause.items())))


def _send_plan(scenario: Scenario, hosts: tuple[Host, ...], boundary: int, size_bytes: float) -> CollectivePlan:
    """The transfer across the boundary between pipeline ranks ``boundary`` and ``boundary + 1``:
    priced on each side's fabric, the slower one wins, at the slower side's link speed."""
    a, b = hosts[boundary], hosts[(boundary + 1) % len(hosts)]
    plan = pp_plan(a.scenario, size_bytes, boundary)
    if b.scenario is not a.scenario:
        other = pp_plan(b.scenario, size_bytes, boundary)
        plan = other if other.time_s > plan.time_s else plan
    return scale_plan(plan, min(a.link_speed, b.link_speed))


def _plan_tiers(plans: list[CollectivePlan]) -> frozenset[str]:
    return frozenset(ph.tier for plan in plans for ph in plan.phases)


def _isolated(unit: CompiledUnit, shared: frozenset[str]) -> bool:
    """No other transfer can share a link with this unit's collectives, and at most one of them
    overlaps compute: its contention-free duration is exact."""
    overlapped = any(s.plan is not None and s.overlapped for s in unit.steps)
    collectives = sum(1 for s in unit.steps if s.plan is not None)
    return not (unit.tiers & shared) and (not overlapped or collectives == 1)


def steady_period(schedule: str, pp: int, virtual_stages: int) -> tuple[int, int]:
    """(actions, micro-batches) after which a rank's steady-state actions repeat with the
    micro-batch index advanced: 1F1B alternates F and B (2, 1); interleaved 1F1B runs ``pp``
    micro-batches over every chunk, forward and backward (2 pp v, pp); GPipe runs all forwards
    then all backwards (1, 1)."""
    if schedule == "gpipe":
        return 1, 1
    if schedule == "interleaved-1f1b" and virtual_stages > 1:
        return 2 * pp * virtual_stages, pp
    return 2, 1


def build_plan(scenario: Scenario, classes: tuple[RankClass, ...] | None = None,
               dp_link_speed: dict[int, float] | None = None, dp_scenario: Scenario | None = None,
               compiler: UnitCompiler | None = None) -> StepPlan:
    """The step plan of ``scenario``: one class on the representative path (``classes`` None),
    else the given classes; ``dp_link_speed`` slows the data-parallel collectives of a stage;
    ``dp_scenario`` prices them (mixed GPUs: on the slowest group's fabric); ``compiler``: the
    run's compiled units (clustersim.plan.plan_cache.PlanCache; None: this plan's own). Built
    anew at every call: a run that times one plan several times keeps it in a PlanCache."""
    return _build(scenario, classes or (_healthy_class(scenario),), dp_link_speed or {}, dp_scenario or scenario,
                  compiler or UnitCompiler())


def runs_rank_classes(scenario: Scenario) -> bool:
    """Whether the scenario's step is planned per rank class (faults, mixed GPU groups:
    clustersim.perrank) rather than as one class of healthy replicas (``_healthy_class``)."""
    return scenario.faults is not None or bool(scenario.node_groups)


def _healthy_class(scenario: Scenario) -> RankClass:
    par = scenario.parallel
    return RankClass(tuple(Host(scenario) for _ in range(par.pp)), par.num_micro_batches, tuple(range(par.dp)))


@functools.lru_cache(maxsize=256)
def classic_actions(schedule: str, pp: int, num_micro_batches: int, v: int,
                     klass: int) -> tuple[tuple[RankAction, ...], ...]:
    """Each rank's actions for GPipe / 1F1B / interleaved 1F1B without pairs, by arithmetic (as
    plan_actions gives them, as fast as the engines' former walk): stage ``chunk * pp + rank``,
    inputs from the neighbouring stage, forward sends over the rank's own boundary, backward ones
    over the one below. Memoised: a pure function of integers, the same for every plan (and
    every layout of a sweep) with this schedule."""
    num_global = pp * v
    out = []
    for p, acts in enumerate(build_schedule(schedule, pp, num_micro_batches, v)):
        last = {a.chunk: i for i, a in enumerate(acts) if a.kind == "B"}
        down = (p - 1) % pp
        planned = []
        for i, a in enumerate(acts):
            g, mb = a.chunk * pp + p, a.micro_batch
            if a.kind == "F":
                needs = ("F", klass, g, mb) if g > 0 else None
                sends = ((("F", klass, g + 1, mb), p),) if g < num_global - 1 else ()
            else:
                needs = ("B", klass, g, mb) if g < num_global - 1 else None
                sends = ((("B", klass, g - 1, mb), down),) if g > 0 else ()
            planned.append(RankAction(a.kind, a.chunk, mb, g, a.kind, needs, sends, last.get(a.chunk) == i, False,
                                      str(a)))
        out.append(tuple(planned))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def classic_counts(schedule: str, pp: int, num_micro_batches: int, v: int) -> tuple[dict[tuple[int, str], int], ...]:
    """Per rank: how many actions of each (global stage, part) ``classic_actions`` runs (the same
    for every class; the step terms weigh each action's seconds by it). Memoised with them."""
    return tuple(dict(Counter((a.stage, a.part) for a in acts))
                 for acts in classic_actions(schedule, pp, num_micro_batches, v, 0))


@functools.lru_cache(maxsize=256)
def classic_final(schedule: str, pp: int, num_micro_batches: int, v: int) -> tuple[frozenset[int], ...]:
    """Per rank: the indices of each chunk's last backward among ``classic_actions`` (the same for
    every class). Memoised with them: a pure function of integers."""
    return tuple(frozenset(i for i, a in enumerate(acts) if a.final)
                 for acts in classic_actions(schedule, pp, num_micro_batches, v, 0))


def _build(scenario: Scenario, classes: tuple[RankClass, ...], dp_link_speed: dict[int, float],
           dp_scenario: Scenario, compiler: UnitCompiler) -> StepPlan:
    par = scenario.parallel
    pp, v = par.pp, par.virtual_stages
    base_work = build_step_work(dp_scenario)
    dp = scale_dp_plan(dp_plan(dp_scenario, base_work), dp_link_speed)
    ranks: list[SimRank] = []
    sends: list[CollectivePlan] = []
    graph = base_work.graph
    general = par.schedule not in CLASSIC_SCHEDULES
    classic = general is False and not (par.overlap_moe_expert_parallel_comm and par.schedule != "gpipe")
    # Ranks that run the same work on the same host share their units, totals and transfers: each
    # distinct stage is compiled and summed once (the memos below live for this build only, keyed
    # by the identity of the work tuples that the step's work keeps alive meanwhile).
    unit_memo: dict[tuple, tuple[tuple[Work, ...], tuple[CompiledUnit, ...]]] = {}   # keeps its works alive
    total_memo: dict[int, Total] = {}
    send_memo: dict[tuple[int, int], CollectivePlan] = {}
    send_s: dict[int, float] = {}   # id(transfer) -> its duration (a property that sums the phases)

    def units_of(host: Host, works: tuple[Work, ...]) -> tuple[CompiledUnit, ...]:
        key = (id(host.scenario), host.speed, host.link_speed, *map(id, works))
        got = unit_memo.get(key)
        if got is None:
            got = unit_memo[key] = (works, tuple(compiler(host, w) for w in works))
        return got[1]

    def total_of(us: tuple[CompiledUnit, ...]) -> Total:
        got = total_memo.get(id(us))
        if got is None:
            got = total_memo[id(us)] = _total(us)
        return got

    def send_of(c: int, hosts: tuple[Host, ...], boundary: int) -> CollectivePlan:
        got = send_memo.get((c, boundary))
        if got is None:
            got = send_memo[(c, boundary)] = _send_plan(scenario, hosts, boundary, base_work.p2p_bytes)
            sends.append(got)
            send_s[id(got)] = got.time_s
        return got

    # step_terms: the barrier's latency
    barrier_s = grad_norm_all_reduce_s(scenario)
    last_model = max(graph.model_stage)
    for c, cls in enumerate(classes):
        classic_acts = classic_actions(par.schedule, pp, cls.num_micro_batches, v, c) if classic else None
        planned = plan_actions(scenario, base_work, cls.num_micro_batches) if classic_acts is None else ()
        for p in range(pp):
            host = cls.hosts[p]
            work = build_step_work(host.scenario)
            stages = tuple(graph.stage(p, chunk) for chunk in range(graph.chunks))
            units: dict[tuple[int, str], tuple[CompiledUnit, ...]] = {}
            split: dict[tuple[int, int], tuple[CompiledUnit, CompiledUnit]] = {}
            for g in stages:
                st: StageWork = work.stages[g]
                units[(g, "F")] = units_of(host, st.forward)
                units[(g, "B")] = units_of(host, st.backward)
                if dp.zero3 is not None and dp.zero3.backward_gathers == 2:
                    for b, (rec, proper) in enumerate(st.backward_split):
                        split[(g, b)] = (compiler(host, rec), compiler(host, proper))
            send: dict[str, CollectivePlan | None] = {"F": None, "B": None}
            if pp > 1:
                send["F"] = send_of(c, cls.hosts, p)
                send["B"] = send_of(c, cls.hosts, (p - 1) % pp)
            send_at: dict[int, CollectivePlan] = {}
            if classic_acts is not None:
                actions = classic_acts[p]
                if send["F"] is not None and send["B"] is not None:
                    send_at = {(p - 1) % pp: send["B"], p: send["F"]}
            else:
                resolved: list[RankAction] = []
                for a in planned[p]:
                    g = a.stage
                    if (g, a.part) not in units:
                        st = work.stages[g]
                        works = st.backward_input if a.part == "Bi" else st.backward_weight
                        units[(g, a.part)] = units_of(host, works)
                    out = []
                    for key, _dst, boundary in a.sends:
                        if boundary not in send_at:
                            plan = send["F"] if boundary == p else send["B"] if boundary == (p - 1) % pp else None
                            send_at[boundary] = plan if plan is not None else send_of(c, cls.hosts, boundary)
                        out.append(((key[0], c, key[1], key[2]), boundary))
                    needs = (a.needs[0], c, a.needs[1], a.needs[2]) if a.needs is not None else None
                    general |= a.paired or a.part in ("Bi", "W")
                    resolved.append(RankAction(a.kind, a.chunk, a.micro_batch, g, a.part, needs, tuple(out), a.final,
                                               a.paired, a.label))
                actions = tuple(resolved)
            if classic_acts is not None:
                key = (par.schedule, pp, cls.num_micro_batches, v, p)
                final_b = classic_final(*key[:4])[p]
            else:
                key, final_b = None, frozenset(i for i, a in enumerate(actions) if a.final)
            totals = {k: total_of(u) for k, u in units.items()}
            opt_s = work.optimizer_time_s[p] / host.speed
            counts = classic_counts(*key[:4])[p] if key is not None else Counter((a.stage, a.part) for a in actions)
            deficits = step_terms.issue_deficits(host.scenario, work,
                                                 {k: tuple(u.time_s for u in us) for k, us in units.items()})
            holds_data = any(graph.model_stage[g] in (0, last_model) for g in stages)
            ranks.append(SimRank(len(ranks), c, p, tuple(actions), units, totals,
                                 {}, {}, split, send, {k: (send_s[id(v)] if v is not None else 0.0) for k, v in send.items()},
                                 dp.tail(list(stages), opt_s), final_b, stages,
                                 overlap_slowdown(host.scenario.cluster.gpu), send_at,
                                 {b: send_s[id(v)] for b, v in send_at.items()}, key,
                                 step_terms.jitter_s(scenario, counts, totals, opt_s),
                                 step_terms.host_s(host.scenario, counts, deficits, cls.num_micro_batches,
                                                   holds_data, barrier_s),
                                 blocking_from(scenario.framework, par, _Kinds(actions))))
    groups = [dp.grad_buckets, dp.param_gathers]
    if dp.zero3 is not None:
        groups += [dp.zero3.gather, dp.zero3.reduce]
    plans = [plan for group in groups for items in group.values() for _, plan in items]
    plans += [plan for items in dp.after_backward.values() for _, plan in items]
    shared = _plan_tiers(plans + sends)
    distinct = {id(us): us for rk in ranks for us in rk.units.values()}
    general |= any("host" in u.tiers for us in distinct.values() for u in us)
    isolated_of = {i: all(_isolated(u, shared) for u in us) for i, us in distinct.items()}
    private_of = {i: not any(u.tiers & shared for u in us) for i, us in distinct.items()}
    for rk in ranks:
        rk.isolated.update({key: isolated_of[id(us)] for key, us in rk.units.items()})
        rk.private.update({key: private_of[id(us)] for key, us in rk.units.items()})
    isolated = all(rk.isolated.values() for rk in ranks)
    period = (0, 0) if general else steady_period(par.schedule, pp, v)
    gathers = tuple(sorted(dp.param_gathers.items()))
    return StepPlan(scenario, pp, v, graph.num_stages, tuple(ranks), classes, dp, shared, isolated, period, gathers,
                    general)
