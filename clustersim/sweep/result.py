"""A ranked sweep: its table of every layout, the group rows and what ``--json`` prints of them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from clustersim.memory.report import VERDICTS
from clustersim.parallel.layout import RECOMPUTE, SCHEDULES, ParallelLayout
from clustersim.report import step_at_peak_s
from clustersim.sweep.evaluate import (
    COL,
    ESTIMATE_FIELDS,
    KEY_FIELDS,
    METRIC_FIELDS,
    SweepSpec,
    host_unfit_mask,
)
from clustersim.sweep.objective import METRIC_FIELDS as RANKED_FIELDS
from clustersim.sweep.objective import cost_per_million_tokens, plain_mask
from clustersim.sweep.rank import pareto_front
from clustersim.sweep.space import layout_from_key
from clustersim.uncertainty import step_interval

N_KEY = len(KEY_FIELDS)
# fields whose values a group row lists when its members differ (numbers as [least, most])
_RANGE_FIELDS = ("virtual_stages", "zero_stage")


def intervals_overlap(a: Mapping[str, Any], b: Mapping[str, Any], key: str = "step_time_s") -> bool:
    """Whether two rows' 80% intervals of ``key`` (the sweep's step time; `compare`'s ranked time
    to train, cost or energy) overlap, on both sides: a row below #1 may be slower (time ranking)
    or faster (a tight row, or ``--rank-by memory-headroom``)."""
    lo_a, hi_a = a["interval"][key]
    lo_b, hi_b = b["interval"][key]
    return bool(lo_a <= hi_b and lo_b <= hi_a)


def overlapping_best(rows: Sequence[Mapping[str, Any]], key: str = "step_time_s") -> list[int]:
    """Indices (0-based) of the rows after the first whose 80% interval of ``key`` overlaps the
    best row's: within the prediction's uncertainty they may be as good as the winner (the
    sweep's and `compare`'s "indistinguishable from #1")."""
    return [i for i, r in enumerate(rows[1:], start=1) if intervals_overlap(rows[0], r, key)]


@dataclass(frozen=True)
class SweepResult:
    """A ranked sweep. ``table`` (columns COLUMNS) is in final rank order (clustersim.sweep.groups:
    the group rows first); ``sim`` (columns METRIC_FIELDS) holds the event engine's metrics of the
    same rows, NaN where it did not run; ``group_rank`` each row's group (1 = best, 0 = unranked)
    and ``is_row`` whether the row is its group's row."""

    spec: SweepSpec
    table: np.ndarray
    sim: np.ndarray
    # rows (in table order) whose first-level bound the branch and bound refined (None: the
    # screener's bounds were final)
    refined_mask: np.ndarray | None = None
    group_rank: np.ndarray | None = None
    is_row: np.ndarray | None = None
    rank_by: str = "time"

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
    def host_unfit(self) -> int:
        """Layouts that fit the GPU's memory but offload more than a node's host memory holds
        (``fits`` 0 with a GPU verdict other than does-not-fit: screen.Screen.screen_host)."""
        return int(host_unfit_mask(self.table).sum())

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

    @property
    def groups(self) -> int:
        """Ranked rows (groups of layouts)."""
        return 0 if self.is_row is None else int(self.is_row.sum())

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

    def row_indices(self, k: int | None = None) -> np.ndarray:
        """Table rows of the best ``k`` groups' rows, in rank order."""
        rows = np.flatnonzero(self.is_row) if self.is_row is not None else np.flatnonzero(self.ranked_mask())
        return rows if k is None else rows[:k]

    def top(self, k: int) -> list[dict[str, object]]:
        """The best ``k`` rows (groups), with the event engine's numbers where it ran (the JSON
        shape of ``clustersim sweep --json``)."""
        return [self.row(int(i)) for i in self.row_indices(k)]

    def row(self, i: int) -> dict[str, object]:
        """Table row ``i`` as a ranked row: its numbers, interval, ranked metrics and group."""
        s = self.spec.scenario
        row = self.table[i]
        ran = not math.isnan(self.sim[i, 0])
        if ran:
            _, peak, step, tps, mfu, verdict = (float(x) for x in self.sim[i])
        else:
            peak, verdict = row[COL["peak_bytes_per_gpu"]], row[COL["verdict"]]
            step, tps, mfu = (float(row[COL[f]]) for f in ESTIMATE_FIELDS)
        key = tuple(int(v) for v in row[:N_KEY])
        at = replace(s, parallel=layout_from_key(key, s.parallel))
        iv = step_interval(at).within_peak(step_at_peak_s(at), step)
        hours, usd = cost_per_million_tokens(s, step)
        out: dict[str, object] = {
            "rank": int(self.group_rank[i]) if self.group_rank is not None else 0,
            "parallel": {**parallel_dict(key, s.parallel.global_batch, s.parallel.cp_comm),
                         **recompute_fields(layout_from_key(key, s.parallel)), **stated_split(s, key)},
            "step_time_s": step, "tokens_per_s": tps, "mfu": mfu, "peak_bytes_per_gpu": int(peak),
            "free_bytes_per_gpu": int(s.cluster.gpu.hbm_capacity_bytes - int(peak)),
            "memory_verdict": VERDICTS[int(verdict)], "engine": "simulate" if ran else "estimate",
            "estimate_tokens_per_s": float(row[COL["tokens_per_s"]]),
            "interval": iv.to_json(step, mfu, tps), "p90_step_time_s": iv.of(step)[1],
            "gpu_hours_per_million_tokens": hours, "cost_usd_per_million_tokens": usd,
            "plain_3d": bool(plain_mask(self.table[i:i + 1])[0]),
        }
        out["group"] = self.group_of(i)
        return out

    def group_of(self, i: int) -> dict[str, object]:
        """The layouts that share row ``i``'s group and have a time: how many, the closed form's
        step times over them, and the fields that vary ([least, most] of virtual stages and ZeRO
        stages)."""
        if self.group_rank is None or self.group_rank[i] == 0:
            return {"layouts": 1, "varies": {}}
        members = np.flatnonzero(self.group_rank == self.group_rank[i])
        steps = self.table[members, COL["step_time_s"]]
        steps = steps[~np.isnan(steps)]
        varies: dict[str, list[int]] = {}
        for f in _RANGE_FIELDS:
            values = self.table[members, COL[f]]
            if values.min() != values.max():
                varies[f] = [int(values.min()), int(values.max())]
        out: dict[str, object] = {"layouts": int(members.size), "varies": varies}
        if steps.size:
            out["estimate_step_time_s"] = [float(steps.min()), float(steps.max())]
        return out

    @property
    def ranked_field(self) -> str:
        """The row field the ranking orders (``free_bytes_per_gpu`` descending, the others ascending)."""
        field = RANKED_FIELDS[self.rank_by]
        if field == "cost_usd_per_million_tokens" and self.spec.scenario.cluster.gpu.price_per_gpu_hour_usd <= 0:
            return "gpu_hours_per_million_tokens"
        return field

    def best_plain(self) -> tuple[int, dict[str, object]] | None:
        """(position in the ranking, from 1; the row) of the best plain 3D group, or None."""
        rows = self.row_indices()
        plain = np.flatnonzero(plain_mask(self.table[rows]))
        if plain.size == 0:
            return None
        return int(plain[0]) + 1, self.row(int(rows[plain[0]]))

    def indistinguishable(self, rows: list[dict[str, object]]) -> list[int]:
        """Indices (0-based) of the rows after the first whose step-time interval overlaps the
        best row's: within the prediction's uncertainty they may be as fast as the winner."""
        return overlapping_best(rows)

    def pareto(self) -> np.ndarray:
        """Row indices of the Pareto front (closed-form tokens/s against peak memory)."""
        return pareto_front(self.table)

    def to_frame(self) -> pd.DataFrame:
        """Every screened layout, best first, as written by ``--out``: ``rank`` the position among
        the ranked layouts (0 = unranked), ``group`` the rank of the layout's row (group) and
        ``group_row`` whether the layout is that row."""
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
        df["sim_step_time_s"] = self.sim[:, 2]
        df["sim_tokens_per_s"] = self.sim[:, 3]
        df["sim_mfu"] = self.sim[:, 4]
        df["sim_peak_bytes_per_gpu"] = np.where(ran, self.sim[:, 1], np.nan)
        df["rank"] = np.where(self.ranked_mask(), df["rank"], 0)
        if self.group_rank is not None and self.is_row is not None:
            df["group"] = self.group_rank
            df["group_row"] = self.is_row
        return df


def stated_split(scenario, key: tuple[int, ...]) -> dict[str, str]:
    """``{"pipeline_layout": ...}`` where a Megatron-family framework builds the layout's split only
    from a flag (clustersim.parallel.split.flag_layout, the Megatron export's rule too: 32 layers on
    pp 3, 40 layers per rank over 14 chunks), Megatron-Core's --pipeline-model-parallel-layout of the
    split the row was priced with, so that the row runs as written; else ``{}``."""
    from clustersim.frameworks import megatron_family
    from clustersim.parallel.split import flag_layout

    tp, cp, pp, dp, ep, etp, mb, zero, rec, sp, sched, v, off = key
    m = scenario.model
    if not megatron_family(scenario.framework.name) or SCHEDULES[sched] not in ("gpipe", "1f1b", "interleaved-1f1b"):
        return {}
    layout = flag_layout(SCHEDULES[sched], pp, v, m.layers, m.mtp_layers)
    return {"pipeline_layout": layout} if layout else {}


def recompute_fields(layout: ParallelLayout) -> dict[str, object]:
    """The partial-recompute options a row's layout runs with, as the scenario file's keys: the
    template's, on the rows of the mode they belong to (clustersim.sweep.space.with_recompute)."""
    out: dict[str, object] = {}
    if layout.recompute_modules:
        out["recompute_modules"] = list(layout.recompute_modules)
    if layout.recompute_method != "uniform" or layout.recompute_num_layers != 1:
        out["recompute_method"] = layout.recompute_method
        out["recompute_num_layers"] = layout.recompute_num_layers
    return out


def parallel_dict(key: tuple[int, ...], global_batch: int, cp_comm: str = "p2p") -> dict[str, object]:
    """A layout key as the scenario file's ``parallel:`` section (searched fields only, and the
    template's context-parallel exchange where cp > 1 and it is not the default p2p: the row must
    run as written)."""
    tp, cp, pp, dp, ep, etp, mb, zero, rec, sp, sched, v, off = key
    out: dict[str, object] = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "micro_batch": mb,
                              "global_batch": global_batch, "zero_stage": zero, "recompute": RECOMPUTE[rec],
                              "sequence_parallel": bool(sp), "schedule": SCHEDULES[sched], "virtual_stages": v}
    if etp:
        out["expert_tp"] = etp
    if off:
        out["offload"] = {"optimizer": True}
    if cp > 1 and cp_comm != "p2p":
        out["cp_comm"] = cp_comm
    return out
