"""One sweep: screen every layout, evaluate what can matter in closed form, re-rank the best.

1. **Screen** (every layout, in parallel tasks of the shapes that share unit-time classes,
   ``make_tasks``): exact peak memory, and a lower bound on the closed-form step time
   (clustersim.sweep.screen), at its first level (the compiled units). Layouts that do not fit
   are done.
2. **Branch and bound** with the closed form (``api.estimate``): fitting layouts in order of
   their bound, in rounds, until the next bound exceeds the step time of the ``keep``-th best
   layout found so far. A layout left out has a step time at least its bound, so it cannot
   enter the best ``keep`` (ties go to the smaller layout key, so an equal bound is evaluated).
   Layouts that a round could pick first have their bound refined to the second level (the
   units compiled as the engines run them); refinement never lowers a bound, so the rounds pick
   what they would pick with the second level everywhere (``_branch_and_bound``). The layouts
   a round is about to evaluate are then replayed to the third level (the schedule on the unit
   times, clustersim.sweep.replay), which also only raises bounds, and the round starts again.
   With ``pareto=True`` rounds go on while a layout could still be on the Pareto front (no
   evaluated layout needs no more memory and is faster than its bound).
3. **Re-rank** the best ``rerank`` with the event engine (``api.simulate``), plus the scenario's
   own layout when it is valid on this cluster; these lead the ranking by simulated tokens/s.
4. The rest follow in closed-form order, then the bounded-out layouts (by bound), then the
   layouts that do not fit. Ties are broken by the canonical layout key, so the order is total.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from clustersim.errors import InputError
from clustersim.hardware.load import check_domain
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_SWEEP_LAYOUTS, check_gpus
from clustersim.memory.report import VERDICTS
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES
from clustersim.scenario import Scenario, check_layout
from clustersim.sweep.evaluate import (
    COL,
    COLUMNS,
    ESTIMATE_FIELDS,
    KEY_FIELDS,
    METRIC_FIELDS,
    SweepSpec,
    Task,
    estimate_keys,
    layout_from_key,
    level_keys,
    replay_keys,
    screen_task,
    simulate_key,
)
from clustersim.sweep.executors import Executor, SerialExecutor
from clustersim.sweep.rank import key_codes, pareto_front, rank_order
from clustersim.sweep.space import (
    TORCHTITAN_RECOMPUTE,
    SearchSpace,
    Shape,
    count_shape_layouts,
    layout_key,
    micro_batch_sizes,
    shapes,
)
from clustersim.uncertainty import step_interval

TASKS_PER_WORKER = 16
N_KEY = len(KEY_FIELDS)
# key columns in the order that groups layouts of one unit-time class (Screen.class_key) together
CLASS_COLUMNS = tuple(KEY_FIELDS.index(f) for f in ("tp", "cp", "ep", "expert_tp", "micro_batch", "recompute",
                                                     "sequence_parallel", "dp", "pp", "schedule", "virtual_stages",
                                                     "zero_stage", "offload_optimizer"))
# Progress callback: (phase, done, total); phases "screen", "estimate", "simulate".
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class SweepResult:
    """A ranked sweep. ``table`` (columns COLUMNS) is in final rank order; ``sim`` (columns
    METRIC_FIELDS) holds the event engine's metrics of the same rows, NaN where it did not run."""

    spec: SweepSpec
    table: np.ndarray
    sim: np.ndarray
    # rows (in table order) whose first-level bound the branch and bound refined (None: the
    # screener's bounds were final)
    refined_mask: np.ndarray | None = None

    @property
    def refined(self) -> int:
        """Layouts whose bound was refined to the second level (unit times compiled)."""
        return 0 if self.refined_mask is None else int(self.refined_mask.sum())

    def classes(self, refined_only: bool = False) -> int:
        """Unit-time classes (clustersim.sweep.screen.Screen.class_key) of every screened layout
        (priced by the screen), or of the ones the branch and bound refined (the second level)."""
        from clustersim.sweep.screen import screen_for

        rows = self.table if not refined_only else self.table[self.refined_mask] if self.refined_mask is not None \
            else self.table[:0]
        cols = [KEY_FIELDS.index(f) for f in ("tp", "cp", "pp", "dp", "ep", "expert_tp", "micro_batch", "recompute",
                                               "sequence_parallel")]
        return screen_for(self.spec.scenario).count_classes(np.unique(rows[:, cols], axis=0))

    @property
    def evaluated(self) -> int:
        """Layouts screened (every valid layout of the search space)."""
        return int(self.table.shape[0])

    @property
    def fitting(self) -> int:
        """Layouts that fit in memory."""
        return int((self.table[:, COL["fits"]] == 1.0).sum())

    @property
    def estimated(self) -> int:
        """Layouts evaluated in closed form."""
        return int((~np.isnan(self.table[:, COL["step_time_s"]])).sum())

    @property
    def simulated(self) -> int:
        return int((~np.isnan(self.sim[:, 0])).sum())

    @property
    def feasible(self) -> int:
        return int(self.feasible_mask().sum())

    def feasible_mask(self) -> np.ndarray:
        """Fits in memory (by the event engine where it ran, else the closed form, else the screen)."""
        t = self.table
        fits = t[:, COL["fits"]] == 1.0
        ran = ~np.isnan(self.sim[:, 0])
        return np.where(ran, self.sim[:, 0] == 1.0, fits)

    def ranked_mask(self) -> np.ndarray:
        """Feasible rows with a time (closed form or event engine): the ranking proper."""
        ran = ~np.isnan(self.sim[:, 0])
        return self.feasible_mask() & (ran | ~np.isnan(self.table[:, COL["step_time_s"]]))

    def top(self, k: int) -> list[dict[str, object]]:
        """The best ``k`` layouts, with the event engine's numbers where it ran (the JSON shape of
        ``clustersim sweep --json``)."""
        out: list[dict[str, object]] = []
        for i in np.flatnonzero(self.ranked_mask())[:k]:
            row = self.table[i]
            ran = not math.isnan(self.sim[i, 0])
            if ran:
                _, peak, step, tps, mfu, verdict = (float(x) for x in self.sim[i])
            else:
                peak, verdict = row[COL["peak_bytes_per_gpu"]], row[COL["verdict"]]
                step, tps, mfu = (float(row[COL[f]]) for f in ESTIMATE_FIELDS)
            key = tuple(int(v) for v in row[:N_KEY])
            iv = step_interval(replace(self.spec.scenario, parallel=layout_from_key(key, self.spec.scenario.parallel)))
            out.append({"parallel": parallel_dict(key, self.spec.scenario.parallel.global_batch),
                        "step_time_s": step, "tokens_per_s": tps, "mfu": mfu, "peak_bytes_per_gpu": int(peak),
                        "memory_verdict": VERDICTS[int(verdict)],
                        "engine": "simulate" if ran else "estimate",
                        "estimate_tokens_per_s": float(row[COL["tokens_per_s"]]),
                        "interval": iv.to_json(step, mfu, tps)})
        return out

    def indistinguishable(self, rows: list[dict[str, object]]) -> list[int]:
        """Indices (0-based) of the rows after the first whose step-time interval overlaps the
        best row's: within the prediction's uncertainty they may be as fast as the winner."""
        if not rows:
            return []
        lo_best = rows[0]["interval"]["step_time_s"]  # type: ignore[index]
        return [i for i, r in enumerate(rows[1:], start=1)
                if r["interval"]["step_time_s"][0] <= lo_best[1]]  # type: ignore[index]

    def pareto(self) -> np.ndarray:
        """Row indices of the Pareto front (closed-form tokens/s against peak memory)."""
        return pareto_front(self.table)

    def _repr_html_(self) -> str:
        """Rich display in Jupyter: counts and the top layouts (clustersim/html/notebook.py)."""
        from clustersim.html.notebook import sweep_html

        return sweep_html(self)

    def to_frame(self) -> pd.DataFrame:
        """Every screened layout, best first, as written by ``--out``."""
        t = self.table
        gb = self.spec.scenario.parallel.global_batch
        df = pd.DataFrame({"rank": np.arange(1, len(t) + 1)})
        for name in ("tp", "pp", "dp", "cp", "ep", "micro_batch"):
            df[name] = t[:, COL[name]].astype(np.int64)
        df["num_micro_batches"] = (gb // (df["dp"] * df["micro_batch"])).astype(np.int64)
        df["zero_stage"] = t[:, COL["zero_stage"]].astype(np.int64)
        df["recompute"] = [RECOMPUTE[int(v)] for v in t[:, COL["recompute"]]]
        df["sequence_parallel"] = t[:, COL["sequence_parallel"]] == 1.0
        df["schedule"] = [SCHEDULES[int(v)] for v in t[:, COL["schedule"]]]
        df["virtual_stages"] = t[:, COL["virtual_stages"]].astype(np.int64)
        df["expert_tp"] = t[:, COL["expert_tp"]].astype(np.int64)
        df["offload_optimizer"] = t[:, COL["offload_optimizer"]] == 1.0
        df["fits"] = self.feasible_mask()
        df["peak_bytes_per_gpu"] = t[:, COL["peak_bytes_per_gpu"]].astype(np.int64)
        ran = ~np.isnan(self.sim[:, 0])
        codes = np.where(ran, self.sim[:, METRIC_FIELDS.index("verdict")], t[:, COL["verdict"]]).astype(np.int64)
        df["memory_verdict"] = [VERDICTS[int(c)] for c in codes]
        df["bound_step_time_s"] = t[:, COL["bound_step_time_s"]]
        for name in ESTIMATE_FIELDS:
            df[name] = t[:, COL[name]]
        ran = ~np.isnan(self.sim[:, 0])
        df["sim_step_time_s"] = self.sim[:, 2]
        df["sim_tokens_per_s"] = self.sim[:, 3]
        df["sim_mfu"] = self.sim[:, 4]
        df["sim_peak_bytes_per_gpu"] = np.where(ran, self.sim[:, 1], np.nan)
        df["rank"] = np.where(self.ranked_mask(), df["rank"], 0)
        return df


def parallel_dict(key: tuple[int, ...], global_batch: int) -> dict[str, object]:
    """A layout key as the scenario file's ``parallel:`` section (searched fields only)."""
    tp, cp, pp, dp, ep, etp, mb, zero, rec, sp, sched, v, off = key
    out: dict[str, object] = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "micro_batch": mb,
                              "global_batch": global_batch, "zero_stage": zero, "recompute": RECOMPUTE[rec],
                              "sequence_parallel": bool(sp), "schedule": SCHEDULES[sched], "virtual_stages": v}
    if etp:
        out["expert_tp"] = etp
    if off:
        out["offload"] = {"optimizer": True}
    return out


def make_tasks(spec: SweepSpec, workers: int) -> tuple[list[Task], list[int]]:
    """Screening tasks and the number of layouts in each.

    A block is a shape and some of its micro-batch sizes (about ``total / (workers *
    TASKS_PER_WORKER)`` layouts at most, in canonical order); a task holds every block whose
    layouts share unit-time classes (same tp, cp, ep and expert tp: ``Screen.class_key``), so
    each worker prices a class once instead of every worker pricing most classes. Tasks come in
    the order of their first block; ``canonical_order`` restores the canonical order of rows."""
    return _tasks(spec, workers)[:2]


def _tasks(spec: SweepSpec, workers: int) -> tuple[list[Task], list[int], list[list[tuple[int, int]]]]:
    """``make_tasks`` and, per task, each of its blocks' (first canonical row, layouts)."""
    s = spec.scenario
    gb = s.parallel.global_batch
    units = [(shape, mb, count_shape_layouts(s.model, shape, gb, mb, spec.space, s.parallel.hsdp_replicas,
                                                    s.cluster.pcie is not None))
             for shape in shapes(s.model, s.cluster, gb, spec.space) for mb in micro_batch_sizes(shape, gb)]
    units = [u for u in units if u[2] > 0]
    total = sum(u[2] for u in units)
    target = max(32, math.ceil(total / max(1, workers * TASKS_PER_WORKER)))
    blocks: list[tuple[Shape, tuple[int, ...], int, int]] = []  # shape, micro-batches, layouts, first row
    row = 0
    for shape, mb, n in units:
        if blocks and blocks[-1][0] == shape and blocks[-1][2] + n <= target:
            last = blocks[-1]
            blocks[-1] = (shape, (*last[1], mb), last[2] + n, last[3])
        else:
            blocks.append((shape, (mb,), n, row))
        row += n
    grouped: dict[tuple[int, int, int, int], list[tuple[Shape, tuple[int, ...], int, int]]] = {}
    for block in blocks:
        x = block[0]
        grouped.setdefault((x.tp, x.cp, x.ep, x.etp), []).append(block)
    tasks = [Task(tuple((b[0], b[1]) for b in group)) for group in grouped.values()]
    sizes = [sum(b[2] for b in group) for group in grouped.values()]
    placed = [[(b[3], b[2]) for b in group] for group in grouped.values()]
    return tasks, sizes, placed


def canonical_order(placed: list[list[tuple[int, int]]], parts: list[np.ndarray]) -> np.ndarray:
    """The screened rows of ``parts`` (one array per task, its blocks one after another) in
    canonical order; ``placed``: per task, each block's (first canonical row, layouts)."""
    total = sum(n for blocks in placed for _, n in blocks)
    out = np.empty((total, parts[0].shape[1]))
    for part, blocks in zip(parts, placed, strict=True):
        if part.shape[0] != sum(n for _, n in blocks):
            raise RuntimeError("the screener returned another number of layouts than the space counts")
        at = 0
        for start, n in blocks:
            out[start:start + n] = part[at:at + n]
            at += n
    return out


def no_layout_error(spec: SweepSpec, table: np.ndarray | None) -> InputError:
    s = spec.scenario
    what = f"{s.model.name} on {s.cluster.num_gpus} GPUs of {s.cluster.name} (global_batch {s.parallel.global_batch})"
    if table is None or table.shape[0] == 0:
        return InputError("--gpus", s.cluster.num_gpus,
                          f"a GPU count that some valid layout of {what} can use (tp dividing heads "
                          f"{s.model.heads} inside a node, dp dividing the global batch, pp <= layers "
                          f"{s.model.layers})")
    least = float(np.min(table[:, COL["peak_bytes_per_gpu"]]))
    return InputError("--gpus", s.cluster.num_gpus,
                      f"a GPU count on which some layout fits in memory: of {table.shape[0]} layouts of {what}, "
                      f"the smallest needs {least / 2**30:.1f} GiB per GPU, the GPU has "
                      f"{s.cluster.gpu.hbm_capacity_bytes / 2**30:.1f} GiB")


def check_sweep_size(spec: SweepSpec, total: int) -> None:
    """InputError (exit 2) before any work when the space holds more than MAX_SWEEP_LAYOUTS layouts."""
    if total > MAX_SWEEP_LAYOUTS:
        s = spec.scenario
        raise InputError("sweep", f"{total:,} layouts of {s.model.name} on {s.cluster.num_gpus:,} GPUs "
                                  f"(global_batch {s.parallel.global_batch:,}, {s.model.layers:,} layers)",
                         f"at most {MAX_SWEEP_LAYOUTS:,} layouts per sweep (clustersim's limit, a few minutes); "
                         "sweep fewer GPUs (--gpus) or a global batch with fewer divisors (--set "
                         "parallel.global_batch=...); every layer count a pipeline stage can hold multiplies "
                         "the interleaved schedule's options")


def _keys(rows: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in row[:N_KEY]) for row in rows]


def _chunks(items: list, n: int) -> list[tuple]:
    """``items`` cut into consecutive chunks of at most ``n``."""
    return [tuple(items[i:i + n]) for i in range(0, len(items), n)]


def run_sweep(spec: SweepSpec, executor: Executor | None = None, rerank: int = 8, keep: int = 10,
              pareto: bool = False, progress: Progress | None = None) -> SweepResult:
    """Screen every layout of ``spec``, evaluate what can matter, re-rank the best.

    ``keep``: how many layouts the closed-form ranking must get exactly (at least ``rerank``).
    Raises InputError when no layout is valid or none fits.
    """
    executor = executor or SerialExecutor()
    workers = max(1, getattr(executor, "workers", 1))
    tasks, sizes, placed = _tasks(spec, workers)
    total = sum(sizes)
    if total == 0:
        raise no_layout_error(spec, None)
    check_sweep_size(spec, total)
    done = [0]

    def on_done(i: int) -> None:
        done[0] += sizes[i]
        if progress:
            progress("screen", done[0], total)

    if progress:
        progress("screen", 0, total)
    parts = executor.run(functools.partial(screen_task, spec), tasks, on_done)
    screened = canonical_order(placed, parts)
    table = np.full((screened.shape[0], len(COLUMNS)), np.nan)
    table[:, : screened.shape[1]] = screened
    if not (table[:, COL["fits"]] == 1.0).any():
        raise no_layout_error(spec, table)
    table, refined = _branch_and_bound(spec, table, executor, max(keep, rerank, 1), pareto, progress)
    return _rerank(spec, table, executor, rerank, progress, refined)


def _branch_and_bound(spec: SweepSpec, table: np.ndarray, executor: Executor, keep: int, pareto: bool,
                      progress: Progress | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Fill the closed-form columns of every layout that can reach the best ``keep`` (module doc).

    Layouts that fit rank before tight ones (rank.rank_order), so the best ``keep`` come from the
    layouts whose memory verdict is ``fits`` when there are that many; tight layouts are
    evaluated only when fewer fit.

    With lazy bounds (``SweepSpec.lazy_bounds``) the screen's bound column holds a lower level
    (the shipped screen: level 1, the compiled units with the ZeRO-3 gathers; the tests' level-0
    screener: each unit's kernels alone) and a round first raises it, level by level
    (``SweepSpec.refine_levels``: ``screen.compiled_bounds`` after a level-0 screen; then, for MoE
    models, the data-parallel stream terms, ``screen.exact_bounds``), for every wanted layout whose bound
    at the level below is at most the bound of the last layout the round would pick; a layout
    not raised has a higher level at least its bound, above that edge, so it sorts after every
    picked one. Each round therefore picks the layouts that the last of these levels alone
    would pick, and the closed form runs on the same layouts as with it everywhere
    (tests/sweep/test_lazy_bound.py). With the
    third level (``SweepSpec.replay_bounds``) a round's picks must be at that level: those below
    the edge are replayed first (``max`` with their bound) and the round starts again, so every
    layout left out has a final bound above the threshold (tests/sweep/test_replay.py)."""
    clear = table[:, COL["verdict"]] == 0.0
    feasible = clear if int(clear.sum()) >= keep else table[:, COL["fits"]] == 1.0
    fits = np.flatnonzero(feasible)
    krank = key_codes(table)  # orders rows like their keys
    bcol = COL["bound_step_time_s"]

    def by_bound(rows: np.ndarray) -> np.ndarray:  # by bound, then key
        return rows[np.lexsort((krank[rows], table[rows, bcol]))]

    def resorted(rows: np.ndarray, raised: np.ndarray) -> np.ndarray:
        """``rows`` (in order) after the bounds of ``raised`` (some of them) rose: the others keep
        their order, the raised ones go back in by merging, in time linear in ``rows``."""
        gone = np.zeros(table.shape[0], dtype=bool)
        gone[raised] = True
        rest = rows[~gone[rows]]
        moved = by_bound(raised)
        b, k = table[rest, bcol], krank[rest]
        mb, mk = table[moved, bcol], krank[moved]
        lo = np.searchsorted(b, mb, side="left")
        hi = np.searchsorted(b, mb, side="right")
        for i in np.flatnonzero(hi > lo):  # equal bounds: by key (rare)
            lo[i] += int(np.searchsorted(k[lo[i]:hi[i]], mk[i]))
        return np.insert(rest, lo, moved)

    order = by_bound(fits)
    # the level of each row's bound: 0 the screen's, k + 1 that of refiners[k], then the replayer's (final)
    refiners = spec.refine_levels
    nref = len(refiners)
    top = nref + 1 if spec.replay_bounds else nref
    level = np.zeros(table.shape[0], dtype=np.int8)
    workers = max(1, getattr(executor, "workers", 1))
    # layouts a round picks: twice the best kept (the 1,024-GPU Mixtral sweep runs the same 374 closed
    # forms in 37 rounds instead of 74 with ``keep``; a round costs a trip through the workers)
    batch = max(4 * workers, 2 * keep)
    # what raises a bound from each level to the next: the refiners, then the replayer (its
    # bounds taken with ``max``: a replay never lowers one)
    raisers = [functools.partial(level_keys, name) for name in refiners] + [replay_keys] * (top - nref)
    # layouts raised per round and level, doubling: few rounds, at most twice the needed work
    # (replays at least four batches: a replay costs a tenth of the closed form; doubling too:
    # every wanted layout is below the threshold, so it is replayed or evaluated unless the
    # threshold falls below it first, and each round costs a pass over the order)
    raise_n = [8 * batch] * nref + [4 * batch] * (top - nref)
    evaluated = 0
    timed: dict[tuple[float, ...], int] = {}  # twin key -> the row run in closed form
    by_clear = int(clear.sum()) >= keep
    picked = np.zeros(0, dtype=np.int64)   # the rows picked so far (only they have a closed-form time)
    mark = np.zeros(table.shape[0], dtype=bool)
    while len(order):
        steps = table[picked, COL["step_time_s"]]
        feasible = (table[picked, COL["verdict"]] == 0.0) if by_clear else table[picked, COL["fits"]] == 1.0
        known = np.sort(steps[~np.isnan(steps) & feasible])
        threshold = known[keep - 1] if known.size >= keep else math.inf
        rest = order
        below = table[rest, bcol] <= threshold
        if not pareto:  # bounds only rise and the threshold only falls: a layout above it stays out
            rest = order = rest[below]
            wanted = rest
        else:
            wanted = rest[below]
            if known.size:
                wanted = np.union1d(wanted, _pareto_candidates(table, rest))
                wanted = rest[np.isin(rest, wanted)]
        if wanted.size == 0:
            break
        pick = wanted[:batch]
        edge = table[pick[-1], bcol]
        raised = False
        for k, bounds in enumerate(raisers):  # the lowest level first
            lazy = wanted[level[wanted] == k]
            if lazy.size and table[lazy[0], bcol] <= edge:
                lazy = lazy[:max(raise_n[k], int((table[lazy, bcol] <= edge).sum()))]
                raise_n[k] *= 2
                new = _refine(spec, table[lazy], executor, bounds)
                table[lazy, bcol] = new if k < nref else np.maximum(table[lazy, bcol], new)
                level[lazy] = k + 1
                raised = True
                break
        if raised:
            order = resorted(order, lazy)
            continue
        run, copies = pick, []
        if spec.time_twins:  # one closed form per ZeRO-1/2 twin pair (SweepSpec.time_twins)
            run, copies = _twins(table, pick, timed)
        if len(run):
            chunk = max(1, math.ceil(len(run) / (2 * workers)))
            jobs = _chunks(_keys(table[run]), chunk)
            results = executor.run(functools.partial(estimate_keys, spec), jobs)
            metrics = np.concatenate(results, axis=0)
            # The closed form's own memory verdict is final (the screen computes the same numbers);
            # a layout over the closed form's budget (NaN) keeps the screen's verdict and its bound.
            ran = ~np.isnan(metrics[:, 0])
            done = run[ran]
            table[done, COL["fits"]] = metrics[ran, 0]
            table[done, COL["peak_bytes_per_gpu"]] = metrics[ran, 1]
            table[done, COL["verdict"]] = metrics[ran, METRIC_FIELDS.index("verdict")]
            for f in ESTIMATE_FIELDS:
                table[done, COL[f]] = metrics[ran, METRIC_FIELDS.index(f)]
        for row, source in copies:  # the twin's time; memory stays the screen's (the closed form's)
            for f in ESTIMATE_FIELDS:
                table[row, COL[f]] = table[source, COL[f]]
        evaluated += len(pick)
        picked = np.concatenate([picked, pick])
        mark[pick] = True
        order = rest[~mark[rest]]
        mark[pick] = False
        if progress:  # the total is what the bound still admits: it shrinks as better layouts turn up
            progress("estimate", evaluated, evaluated + int(wanted.size) - len(pick))
    return table, level >= 1 if spec.lazy_bounds else None


def _twins(table: np.ndarray, pick: np.ndarray, timed: dict[tuple[float, ...], int]
           ) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Split ``pick`` into the rows to run in closed form and (row, twin) pairs whose ZeRO-1/2
    twin ran already or runs in this round (``SweepSpec.time_twins``); ``timed`` maps each
    twin key (the layout key with ZeRO stage 2 read as 1) to the row that ran."""
    zcol = COL["zero_stage"]
    run, copies = [], []
    for row in pick.tolist():
        key = table[row, :N_KEY].copy()
        if key[zcol] == 2.0:
            key[zcol] = 1.0
        twin = tuple(key.tolist())
        source = timed.get(twin)
        if source is None:
            timed[twin] = row
            run.append(row)
        else:
            copies.append((row, source))
    return np.array(run, dtype=pick.dtype), copies


def _refine(spec: SweepSpec, rows: np.ndarray, executor: Executor,
            bounds: Callable[[SweepSpec, tuple[tuple[int, ...], ...]], np.ndarray]) -> np.ndarray:
    """The next level's bounds of ``rows`` (table rows), computed by the executor's workers."""
    workers = max(1, getattr(executor, "workers", 1))
    # by key, so that each worker gets whole unit-time classes (tp, cp, ep, expert tp lead)
    by_class = np.lexsort([rows[:, c] for c in reversed(CLASS_COLUMNS)])
    keys = _keys(rows[by_class])
    jobs = _chunks(keys, max(64, math.ceil(len(keys) / (2 * workers))))
    out = np.empty(len(keys))
    out[by_class] = np.concatenate(executor.run(functools.partial(bounds, spec), jobs))
    return out


def _pareto_candidates(table: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Rows of ``rest`` that could still be on the Pareto front: no evaluated layout with at most
    their memory has a step time below their bound."""
    steps = table[:, COL["step_time_s"]]
    ok = np.flatnonzero(~np.isnan(steps) & (table[:, COL["fits"]] == 1.0))
    peaks = table[ok, COL["peak_bytes_per_gpu"]]
    by_peak = np.argsort(peaks, kind="stable")
    best_below = np.minimum.accumulate(steps[ok][by_peak])  # fastest step at or below each peak
    idx = np.searchsorted(peaks[by_peak], table[rest, COL["peak_bytes_per_gpu"]], side="right") - 1
    best = np.where(idx >= 0, best_below[np.maximum(idx, 0)], math.inf)
    return rest[table[rest, COL["bound_step_time_s"]] <= best]


def _incumbent_key(spec: SweepSpec) -> tuple[int, ...] | None:
    """The scenario's own layout, if the loader accepts it on this (possibly resized) cluster."""
    s = spec.scenario
    try:
        check_layout(s.model, s.cluster, s.parallel)
    except InputError:
        return None
    return layout_key(s.parallel)


def _final_order(table: np.ndarray, sim: np.ndarray) -> np.ndarray:
    """Simulated (fitting) rows by simulated tokens/s; closed-form rows by tokens/s; fitting rows
    without a time by their bound; then everything else; ties by layout key."""
    n = table.shape[0]
    sim_ok = sim[:, 0] == 1.0
    est_ok = ~sim_ok & np.isnan(sim[:, 0]) & (table[:, COL["fits"]] == 1.0) & ~np.isnan(table[:, COL["step_time_s"]])
    bounded = ~sim_ok & ~est_ok & np.isnan(sim[:, 0]) & (table[:, COL["fits"]] == 1.0)
    rest = ~(sim_ok | est_ok | bounded)
    parts = []
    codes = key_codes(table)
    for mask, tps in ((sim_ok, sim[:, 3]), (est_ok, table[:, COL["tokens_per_s"]]),
                      (bounded, 1.0 / table[:, COL["bound_step_time_s"]]), (rest, np.full(n, np.nan))):
        idx = np.flatnonzero(mask)
        parts.append(idx[rank_order(table[idx], tps[idx], codes[idx])])
    return np.concatenate(parts)


def _rerank(spec: SweepSpec, table: np.ndarray, executor: Executor, rerank: int,
            progress: Progress | None, refined: np.ndarray | None = None) -> SweepResult:
    est_ok = np.flatnonzero((table[:, COL["fits"]] == 1.0) & ~np.isnan(table[:, COL["step_time_s"]]))
    best = est_ok[rank_order(table[est_ok])][:rerank]
    keys = _keys(table[best])
    rows = [int(i) for i in best]
    incumbent = _incumbent_key(spec)
    if incumbent is not None and incumbent not in keys:
        keys.append(incumbent)
        present = (table[:, :N_KEY] == np.array(incumbent, dtype=np.float64)).all(axis=1)
        if not present.any():  # outside the enumerated space (tp=3, a symmetric twin): add its row
            row = np.full((1, len(COLUMNS)), np.nan)
            row[0, :N_KEY] = incumbent
            table = np.concatenate([table, row], axis=0)
            if refined is not None:
                refined = np.concatenate([refined, [False]])
            present = np.zeros(table.shape[0], dtype=bool)
            present[-1] = True
        i = int(np.flatnonzero(present)[0])
        rows.append(i)
        m = estimate_keys(spec, (incumbent,))[0] if math.isnan(table[i, COL["step_time_s"]]) else None
        if m is not None and not math.isnan(m[0]):  # give it closed-form numbers too (within budget)
            table[i, COL["fits"]], table[i, COL["peak_bytes_per_gpu"]] = m[0], m[1]
            table[i, COL["verdict"]] = m[METRIC_FIELDS.index("verdict")]
            for f in ESTIMATE_FIELDS:
                table[i, COL[f]] = m[METRIC_FIELDS.index(f)]
    sim = np.full((table.shape[0], len(METRIC_FIELDS)), np.nan)
    if keys:
        finished = [0]

        def on_sim(_: int) -> None:
            finished[0] += 1
            if progress:
                progress("simulate", finished[0], len(keys))

        if progress:
            progress("simulate", 0, len(keys))
        results = executor.run(functools.partial(simulate_key, spec), keys, on_sim)
        for row, metrics in zip(rows, results, strict=True):
            sim[row] = metrics
    order = _final_order(table, sim)
    return SweepResult(spec, table[order], sim[order], None if refined is None else refined[order])


def resize_cluster(cluster: ClusterSpec, gpus: int) -> ClusterSpec:
    """The same kind of cluster with ``gpus`` GPUs: whole nodes, or part of one node."""
    check_gpus("--gpus", gpus)
    gpn = cluster.gpus_per_node
    if gpus >= gpn and gpus % gpn == 0:
        resized = replace(cluster, num_nodes=gpus // gpn)
        check_domain(resized)  # whole scale-up domains (or at most one): InputError names the field
        return resized
    if gpus < gpn and gpn % gpus == 0:
        # Part of one node: NICs in proportion (at least one).
        return replace(cluster, num_nodes=1, gpus_per_node=gpus,
                       nics_per_node=max(1, cluster.nics_per_node * gpus // gpn))
    raise InputError("--gpus", gpus, f"a multiple of gpus_per_node ({gpn}) of {cluster.name}, or a divisor of it")


def check_uniform(scenario: Scenario) -> None:
    """Sweep and compare search layouts of one kind of GPU on a healthy cluster: InputError for
    ``cluster.groups`` and ``faults:`` (clustersim.perrank)."""
    if scenario.node_groups:
        raise InputError("cluster.groups", [g.preset for g in scenario.node_groups],
                         "one cluster preset: sweep and compare search the layouts of one kind of GPU")
    if scenario.faults is not None:
        raise InputError("faults", "present", "a scenario without faults: sweep and compare rank layouts on a "
                         "healthy cluster (clustersim run simulates the faults of one layout)")


def sweep_spec(scenario: Scenario, gpus: int | None = None, space: SearchSpace | None = None,
               **evaluators: str) -> SweepSpec:
    """The spec of a sweep of ``scenario``'s model and batch on its cluster, resized to ``gpus``."""
    check_uniform(scenario)
    # an explicit split (or a framework's: clustersim.parallel.split) belongs to the template's pipeline
    # depth; the sweep varies it and splits every candidate evenly
    scenario = replace(scenario, parallel=replace(scenario.parallel, layers_per_stage=(), first_stage_layers=0,
                                                  last_stage_layers=0, account_for_embedding=0, account_for_loss=0,
                                                  pipeline_layout=""))
    if gpus is not None and gpus != scenario.cluster.num_gpus:
        scenario = replace(scenario, cluster=resize_cluster(scenario.cluster, gpus))
    if space is None:
        space = SearchSpace(recompute=TORCHTITAN_RECOMPUTE) if scenario.framework.name == "torchtitan" \
            else SearchSpace()
    return SweepSpec(scenario, space, **evaluators)
