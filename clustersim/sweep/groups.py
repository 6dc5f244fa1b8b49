"""The final ranking of a sweep: layouts grouped into rows, rows ordered by the ranked value.

A group is the layouts that differ only in virtual stages or in ZeRO stage 1 against 2
(clustersim.sweep.objective.group_codes), with the same memory verdict class (fits or tight).
Its row is its best member: the event engine's numbers before the closed form's (the re-ranked
member keeps its row), then the lowest ranked value, then the most free memory (ZeRO-2 before a
ZeRO-1 twin of the same time), then the layout key. Ranked by ``memory-headroom``, the groups are
those ``time`` lists (by that row) and each stands for its roomiest member: the most free memory
first (a ZeRO-2 twin before a faster ZeRO-1 one), then the time. Groups are ordered by the value of their row:
fitting before tight, then ascending value (for ``memory-headroom``: the ``keep`` fastest by free
memory first, then the rest by time), then free memory, then key; so no row sits below another
with a better value of the ranked metric. The order is total and the same on every executor.
"""

from __future__ import annotations

import numpy as np

from clustersim.sweep.evaluate import COL, METRIC_FIELDS
from clustersim.sweep.objective import group_codes
from clustersim.sweep.rank import key_codes

_SIM = {f: i for i, f in enumerate(METRIC_FIELDS)}


def shown(table: np.ndarray, sim: np.ndarray, rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per row (of ``rows``, default all), the numbers a ranking uses: the event engine's where it
    ran, else the closed form's (``time`` NaN where neither timed it)."""
    t, m = (table, sim) if rows is None else (table[rows], sim[rows])
    ran = ~np.isnan(m[:, 0])
    return {"ran": ran,
            "fits": np.where(ran, m[:, _SIM["fits"]] == 1.0, t[:, COL["fits"]] == 1.0),
            "time": np.where(ran, m[:, _SIM["step_time_s"]], t[:, COL["step_time_s"]]),
            "peak": np.where(ran, m[:, _SIM["peak_bytes_per_gpu"]], t[:, COL["peak_bytes_per_gpu"]]),
            "verdict": np.where(ran, m[:, _SIM["verdict"]], t[:, COL["verdict"]])}


def _heads(sorted_gids: np.ndarray) -> np.ndarray:
    """Where each group starts in an array of group ids sorted by group."""
    if not sorted_gids.size:
        return np.zeros(0, dtype=bool)
    return np.concatenate(([True], sorted_gids[1:] != sorted_gids[:-1]))


def rank_groups(table: np.ndarray, sim: np.ndarray, scale: np.ndarray | None, capacity_bytes: int,
                rank_by: str, keep: int, codes: np.ndarray | None = None, full: bool = True
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row order, each row's group rank in that order (1 = best; 0: not ranked), whether the row
    is its group's row). In the order: the group rows by rank, then the other timed members (by
    group, then as their rows are chosen), then fitting layouts without a time by bound, then the
    rest by key. ``codes``: the table's ``rank.key_codes``, if known; ``full=False``: the timed
    rows only (the group rows first), for a ranking that only its rows matter of."""
    n = table.shape[0]
    codes = key_codes(table) if codes is None else codes
    timed_any = np.flatnonzero(~np.isnan(table[:, COL["step_time_s"]]) | ~np.isnan(sim[:, 0]))
    s = shown(table, sim, timed_any)
    ok = s["fits"] & ~np.isnan(s["time"])
    t = timed_any[ok]
    ran = s["ran"][ok]
    value = s["time"][ok] if scale is None else s["time"][ok] * scale[t]
    # equal to the nanosecond is equal: two schedules that run the same step (GPipe and 1F1B on
    # one stage) differ in the 14th digit by rounding, and that decided against 4.5x the memory
    value = np.round(value, 9)
    free = capacity_bytes - s["peak"][ok]
    tight = (s["verdict"][ok] == 1.0).astype(np.int64)
    c = codes[t]
    gid = np.zeros(t.size, dtype=np.int64)
    if t.size:
        pairs = np.stack([group_codes(table[t]), tight], axis=1)
        gid = np.unique(pairs, axis=0, return_inverse=True)[1].reshape(-1)
    # members of a group: the event engine's first, then by value, free memory (more first), key
    by_member = np.lexsort((c, -free, value, ~ran, gid))
    reps = by_member[_heads(gid[by_member])]
    groups = reps[np.lexsort((c[reps], -free[reps], value[reps], tight[reps]))]
    if rank_by == "memory-headroom" and groups.size:
        # the `keep` groups that time lists, each standing for its roomiest member (the most free
        # memory, then the time): a ZeRO-2 twin before its faster ZeRO-1 twin
        roomy = np.lexsort((c, value, -free, ~ran, gid))
        roomiest = np.zeros(int(gid.max()) + 1, dtype=np.int64)
        roomiest[gid[roomy[_heads(gid[roomy])]]] = roomy[_heads(gid[roomy])]
        first = roomiest[gid[groups[:keep]]]
        groups = np.concatenate([first[np.lexsort((c[first], value[first], -free[first], tight[first]))],
                                 groups[keep:]])
    rank_of_gid = np.zeros(int(gid.max()) + 1 if gid.size else 0, dtype=np.int64)
    rank_of_gid[gid[groups]] = np.arange(1, groups.size + 1)
    is_rep = np.zeros(t.size, dtype=bool)
    is_rep[groups] = True
    others = by_member[~is_rep[by_member]]
    others = others[np.argsort(rank_of_gid[gid[others]], kind="stable")]
    local = np.concatenate([groups, others])
    order = t[local]
    grank = rank_of_gid[gid[local]]
    is_row = np.zeros(local.size, dtype=bool)
    is_row[:groups.size] = True
    if not full:
        return order, grank, is_row
    done = np.zeros(n, dtype=bool)
    done[t] = True
    bounded = np.flatnonzero(~done & np.where(np.isnan(sim[:, 0]), table[:, COL["fits"]] == 1.0, False))
    bounded = bounded[np.lexsort((codes[bounded], table[bounded, COL["bound_step_time_s"]]))]
    done[bounded] = True
    rest = np.flatnonzero(~done)
    rest = rest[np.argsort(codes[rest], kind="stable")]
    tail = np.concatenate([bounded, rest])
    return (np.concatenate([order, tail]), np.concatenate([grank, np.zeros(tail.size, dtype=np.int64)]),
            np.concatenate([is_row, np.zeros(tail.size, dtype=bool)]))
