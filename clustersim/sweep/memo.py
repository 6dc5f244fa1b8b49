"""The memo of one sweep in one process: every table the screen and the bounds fill.

A sweep prices ~10^6 layouts of one base scenario from a few thousand distinct pieces (a class's
unit times, a schedule's memory profile, a data-parallel plan), so each piece is computed once
per process and kept here, keyed by the few integers it depends on (never by the big Scenario,
which would be hashed per layout, nor by an object's identity). One ``SweepMemo`` belongs to one
``screen.Screen`` (one base scenario); a worker process builds its own
(``screen.screen_for``) and keeps it from task to task of the same sweep.

The pure functions below the sweep keep their own bounded ``functools.lru_cache`` where their
arguments are integers or frozen specs (``plan.comm_plans``, ``plan.stage_work.build_step_work``,
the schedule tables of ``sweep.profiles`` and ``sweep.programs``): they are the same for every
run. What one run's layouts share lives here.
"""

from __future__ import annotations

from typing import Any

from clustersim.plan.plan_cache import PlanCache


class SweepMemo:
    """The tables of one sweep (module docstring); each maps a key of integers to what the
    bounds computed for it. ``plans``: the plan-level builds of the run (the canonical stage work
    of each data-parallel plan, ``PlanCache.remember``)."""

    __slots__ = ("buffers", "compiled", "dp_keys", "dp_streams", "extra", "factors", "host", "layer_units",
                 "lower_times", "optimizer", "p2p", "pair_times", "part_times", "plans", "rank_streams", "rank_sums",
                 "replays", "states", "sync_fraction", "tail", "unit_times", "floor_layer_s", "moe_sync", "class_work")

    def __init__(self) -> None:
        self.plans = PlanCache()
        # unit-time classes (sweep.unit_times.ClassTimes), keyed by the class
        self.compiled: dict[tuple[object, ...], Any] = {}       # plan.compiled_unit.unit_key -> CompiledUnit
        self.unit_times: dict[tuple[object, ...], Any] = {}     # class -> UnitTimes (compiled units)
        self.lower_times: dict[tuple[object, ...], Any] = {}    # class -> UnitTimes (kernels alone)
        self.part_times: dict[tuple[object, ...], Any] = {}     # class -> PartTimes
        self.pair_times: dict[tuple[object, ...], Any] = {}     # class -> UnitTimes inside pairs
        self.class_work: dict[tuple[object, ...], Any] = {}     # class -> (shortened representative, StepWork)
        self.dp_keys: dict[tuple[int, ...], object] = {}       # (tp, cp, ep, etp, dp, cp_a2a) -> class_dp_key
        # the step's terms beside the pipeline (sweep.step_terms.StepTerms)
        self.p2p: dict[tuple[object, ...], float] = {}          # (GPUs per stage, pp, bytes) -> fastest transfer
        self.optimizer: dict[tuple[object, ...], float] = {}    # (params, dp, cp, zero, offload, GPUs) -> step
        self.extra: dict[tuple[object, ...], Any] = {}          # layout's groups and parameters -> Extra
        self.tail: dict[tuple[object, ...], float] = {}         # layout's groups and parameters -> tail
        # the least waits for the slowest GPU and for the host (Screen.wait_floor_s)
        self.sync_fraction: dict[int, float] = {}               # GPUs -> compute.variation.sync_wait_fraction
        self.floor_layer_s: dict[tuple[object, ...], float] = {}  # class -> a layer's kernels alone, F + B
        self.moe_sync: dict[tuple[object, ...], float] = {}     # class -> a MoE layer's own issue deficit, F + B
        # data-parallel streams (sweep.stream_terms.StreamTerms) and replays (sweep.replay)
        self.dp_streams: dict[tuple[object, ...], Any] = {}     # plan key -> rank 0's DpStream
        self.rank_streams: dict[tuple[object, ...], Any] = {}   # plan key -> every rank's RankStream
        self.rank_sums: dict[tuple[object, ...], Any] = {}      # class and program -> RankSums per rank
        self.replays: dict[tuple[object, ...], Any] = {}        # class, program, gates -> replay times
        # host memory (Screen.screen_host): degrees, ZeRO, offload and each rank's layers -> fits
        self.host: dict[tuple[object, ...], bool] = {}
        # memory (sweep.memory_screen.MemoryModel), keyed by what each part reads of the layout
        self.states: dict[tuple[object, ...], tuple[int, int, int]] = {}
        self.layer_units: dict[tuple[object, ...], Any] = {}
        self.buffers: dict[tuple[object, ...], tuple[float, float, int]] = {}
        self.factors: dict[tuple[object, ...], tuple[float, float]] = {}
