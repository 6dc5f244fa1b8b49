"""One sweep: enumerate, evaluate on an executor, rank, re-rank the best with the event engine.

1. The search space is cut into tasks (a shape and some of its micro-batch sizes, about
   ``total / (workers * TASKS_PER_WORKER)`` layouts each, so that the pool balances and the
   progress bar moves); each worker enumerates its layouts itself.
2. Each layout: memory pre-check, then the closed-form estimate if it fits (evaluate.py).
3. All rows are ranked by (-tokens/s, layout key) (rank.py).
4. The best ``rerank`` feasible layouts, and the scenario's own layout when it is valid on this
   cluster, run through the event engine; they are ranked by simulated tokens/s ahead of all
   others, which keep their closed-form order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from clustersim.errors import InputError
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES
from clustersim.scenario import check_layout
from clustersim.sweep.evaluate import (
    COL,
    KEY_FIELDS,
    METRIC_FIELDS,
    SweepSpec,
    Task,
    evaluate_keys,
    evaluate_task,
    simulate_key,
)
from clustersim.sweep.executors import Executor, SerialExecutor
from clustersim.sweep.rank import feasible_mask, pareto_front, rank_order
from clustersim.sweep.space import count_shape_layouts, layout_key, micro_batch_sizes, shapes

TASKS_PER_WORKER = 16
# Progress callback: (phase, layouts or layouts done, total); phase "estimate" or "simulate".
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class SweepResult:
    """A ranked sweep. ``table`` (columns COLUMNS, closed-form metrics) is in final rank order;
    ``sim`` (columns METRIC_FIELDS) holds the event engine's metrics of the same rows, NaN where
    it did not run."""

    spec: SweepSpec
    table: np.ndarray
    sim: np.ndarray

    @property
    def evaluated(self) -> int:
        return int(self.table.shape[0])

    @property
    def feasible(self) -> int:
        return int(self.feasible_mask().sum())

    def feasible_mask(self) -> np.ndarray:
        """Fits and has a time; where the event engine ran, by its memory verdict."""
        ran = ~np.isnan(self.sim[:, 0])
        return np.where(ran, self.sim[:, 0] == 1.0, feasible_mask(self.table))

    def top(self, k: int) -> list[dict[str, object]]:
        """The best ``k`` feasible layouts with the event engine's numbers where it ran
        (the JSON shape of ``clustersim sweep --json``)."""
        out: list[dict[str, object]] = []
        n_key = len(KEY_FIELDS)
        for i in np.flatnonzero(self.feasible_mask())[:k]:
            row = self.table[i]
            ran = not math.isnan(self.sim[i, 0])
            _, peak, step, tps, mfu = (float(x) for x in (self.sim[i] if ran else row[n_key:]))
            out.append({"parallel": parallel_dict(tuple(int(v) for v in row[:n_key]),
                                                  self.spec.scenario.parallel.global_batch),
                        "step_time_s": step, "tokens_per_s": tps, "mfu": mfu, "peak_bytes_per_gpu": int(peak),
                        "engine": "simulate" if ran else "estimate",
                        "estimate_tokens_per_s": float(row[COL["tokens_per_s"]])})
        return out

    def pareto(self) -> np.ndarray:
        """Row indices of the Pareto front (closed-form tokens/s against peak memory)."""
        return pareto_front(self.table)

    def to_frame(self) -> pd.DataFrame:
        """Every evaluated layout, best first, as written by ``--out``."""
        t = self.table
        df = pd.DataFrame({"rank": np.arange(1, len(t) + 1)})
        for name in ("tp", "pp", "dp", "cp", "ep", "micro_batch"):
            df[name] = t[:, COL[name]].astype(np.int64)
        df["num_micro_batches"] = (self.spec.scenario.parallel.global_batch
                                   // (df["dp"] * df["micro_batch"])).astype(np.int64)
        df["zero_stage"] = t[:, COL["zero_stage"]].astype(np.int64)
        df["recompute"] = [RECOMPUTE[int(v)] for v in t[:, COL["recompute"]]]
        df["sequence_parallel"] = t[:, COL["sequence_parallel"]] == 1.0
        df["schedule"] = [SCHEDULES[int(v)] for v in t[:, COL["schedule"]]]
        df["virtual_stages"] = t[:, COL["virtual_stages"]].astype(np.int64)
        df["fits"] = t[:, COL["fits"]] == 1.0
        df["peak_bytes_per_gpu"] = t[:, COL["peak_bytes_per_gpu"]].astype(np.int64)
        for name in ("step_time_s", "tokens_per_s", "mfu"):
            df[name] = t[:, COL[name]]
        ran = ~np.isnan(self.sim[:, 0])
        df["sim_fits"] = pd.array(np.where(ran, self.sim[:, 0] == 1.0, False), dtype="boolean")
        df.loc[~ran, "sim_fits"] = pd.NA
        df["sim_peak_bytes_per_gpu"] = pd.array(np.where(ran, self.sim[:, 1], 0).astype(np.int64), dtype="Int64")
        df.loc[~ran, "sim_peak_bytes_per_gpu"] = pd.NA
        df["sim_step_time_s"] = self.sim[:, 2]
        df["sim_tokens_per_s"] = self.sim[:, 3]
        df["sim_mfu"] = self.sim[:, 4]
        df["rank"] = np.where(self.feasible_mask(), df["rank"], 0)
        return df


def parallel_dict(key: tuple[int, ...], global_batch: int) -> dict[str, object]:
    """A layout key as the scenario file's ``parallel:`` section (searched fields only)."""
    tp, cp, pp, dp, ep, mb, zero, rec, sp, sched, v = key
    return {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "micro_batch": mb, "global_batch": global_batch,
            "zero_stage": zero, "recompute": RECOMPUTE[rec], "sequence_parallel": bool(sp),
            "schedule": SCHEDULES[sched], "virtual_stages": v}


def make_tasks(spec: SweepSpec, workers: int) -> tuple[list[Task], list[int]]:
    """Tasks in canonical order and the number of layouts in each."""
    s = spec.scenario
    gb = s.parallel.global_batch
    units = [(shape, mb, count_shape_layouts(s.model, shape, gb, mb, spec.space))
             for shape in shapes(s.model, s.cluster, gb, spec.space) for mb in micro_batch_sizes(shape, gb)]
    units = [u for u in units if u[2] > 0]
    total = sum(u[2] for u in units)
    target = max(32, math.ceil(total / max(1, workers * TASKS_PER_WORKER)))
    tasks: list[Task] = []
    sizes: list[int] = []
    for shape, mb, n in units:
        if tasks and tasks[-1].shape == shape and sizes[-1] + n <= target:
            tasks[-1] = Task(shape, (*tasks[-1].micro_batches, mb))
            sizes[-1] += n
        else:
            tasks.append(Task(shape, (mb,)))
            sizes.append(n)
    return tasks, sizes


def no_layout_error(spec: SweepSpec, table: np.ndarray | None) -> InputError:
    s = spec.scenario
    what = f"{s.model.name} on {s.cluster.num_gpus} GPUs of {s.cluster.name} (global_batch {s.parallel.global_batch})"
    if table is None or table.shape[0] == 0:
        return InputError("--gpus", s.cluster.num_gpus,
                          f"a GPU count that some valid layout of {what} can use (tp dividing heads "
                          f"{s.model.heads}, dp dividing the global batch, pp <= layers {s.model.layers})")
    least = float(np.nanmin(table[:, COL["peak_bytes_per_gpu"]]))
    return InputError("--gpus", s.cluster.num_gpus,
                      f"a GPU count on which some layout fits in memory: of {table.shape[0]} layouts of {what}, "
                      f"the smallest needs {least / 2**30:.1f} GiB per GPU, the GPU has "
                      f"{s.cluster.gpu.hbm_capacity_bytes / 2**30:.1f} GiB")


def run_sweep(spec: SweepSpec, executor: Executor | None = None, rerank: int = 8,
              progress: Progress | None = None) -> SweepResult:
    """Evaluate every layout of ``spec``; raise InputError when none is valid or none fits."""
    executor = executor or SerialExecutor()
    tasks, sizes = make_tasks(spec, getattr(executor, "workers", 1))
    total = sum(sizes)
    if total == 0:
        raise no_layout_error(spec, None)
    done = [0]

    def on_done(i: int) -> None:
        done[0] += sizes[i]
        if progress:
            progress("estimate", done[0], total)

    if progress:
        progress("estimate", 0, total)
    parts = executor.run(functools.partial(evaluate_task, spec), tasks, on_done)
    table = np.concatenate(parts, axis=0)
    table = table[rank_order(table)]
    if not feasible_mask(table).any():
        raise no_layout_error(spec, table)
    return _rerank(spec, table, executor, rerank, progress)


def _incumbent_key(spec: SweepSpec) -> tuple[int, ...] | None:
    """The scenario's own layout, if the loader accepts it on this (possibly resized) cluster."""
    s = spec.scenario
    try:
        check_layout(s.model, s.cluster, s.parallel)
    except InputError:
        return None
    return layout_key(s.parallel)


def _rerank(spec: SweepSpec, table: np.ndarray, executor: Executor, rerank: int,
            progress: Progress | None) -> SweepResult:
    n_key = len(KEY_FIELDS)
    keys = [tuple(int(v) for v in table[i, :n_key]) for i in np.flatnonzero(feasible_mask(table))[:rerank]]
    incumbent = _incumbent_key(spec)
    if incumbent is not None and incumbent not in keys:
        keys.append(incumbent)
        present = (table[:, :n_key] == np.array(incumbent, dtype=np.float64)).all(axis=1)
        if not present.any():  # outside the enumerated space (tp=3, a symmetric twin): estimate it too
            table = np.concatenate([table, evaluate_keys(spec, [incumbent])], axis=0)
    sim = np.full((table.shape[0], len(METRIC_FIELDS)), np.nan)
    if progress:
        progress("simulate", 0, len(keys))
    results = executor.run(functools.partial(simulate_key, spec), keys,
                           (lambda i: progress("simulate", i + 1, len(keys))) if progress else None)
    where = {tuple(int(v) for v in row[:n_key]): i for i, row in enumerate(table)
             } if keys else {}
    for key, metrics in zip(keys, results, strict=True):
        sim[where[key]] = metrics
    # Re-ranked rows that fit in the simulation, by simulated tokens/s; then all others in
    # closed-form order (rows the simulation found not to fit are no longer feasible).
    head = np.flatnonzero(sim[:, 0] == 1.0)
    head = head[rank_order(table[head], sim[head, 3])]
    rest = np.ones(table.shape[0], dtype=bool)
    rest[head] = False
    rest_idx = np.flatnonzero(rest)
    rest_idx = rest_idx[rank_order(table[rest_idx])]
    order = np.concatenate([head, rest_idx])
    return SweepResult(spec, table[order], sim[order])
