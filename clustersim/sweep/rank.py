"""Ranking and the Pareto front of a sweep table (columns: clustersim.sweep.evaluate.COLUMNS).

The order is total and deterministic: higher tokens/s first; ties, and layouts without a time
(which sort last), broken by the canonical layout key (clustersim.sweep.space.layout_key).
"""

from __future__ import annotations

import numpy as np

from clustersim.sweep.evaluate import COL, KEY_FIELDS

_KEY_COLS = [COL[f] for f in KEY_FIELDS]


def rank_order(table: np.ndarray, tokens_per_s: np.ndarray | None = None) -> np.ndarray:
    """Row indices best first: layouts that fit before tight ones (memory verdict), then by
    (-tokens_per_s, key), NaN tokens/s last."""
    tps = table[:, COL["tokens_per_s"]] if tokens_per_s is None else tokens_per_s
    missing = np.isnan(tps)
    tight = table[:, COL["verdict"]] == 1.0
    # np.lexsort sorts by its last key first.
    keys = [table[:, c] for c in reversed(_KEY_COLS)]
    return np.lexsort([*keys, np.where(missing, 0.0, -tps), tight, missing])


def feasible_mask(table: np.ndarray) -> np.ndarray:
    """Rows that fit in memory and have a time."""
    return (table[:, COL["fits"]] == 1.0) & ~np.isnan(table[:, COL["tokens_per_s"]])


def pareto_front(table: np.ndarray) -> np.ndarray:
    """Indices of feasible rows that no other feasible row beats on both axes (tokens/s at least
    as high at a peak memory no larger, one of them strictly), by ascending peak memory."""
    idx = np.flatnonzero(feasible_mask(table))
    if idx.size == 0:
        return idx
    sub = table[idx]
    keys = [sub[:, c] for c in reversed(_KEY_COLS)]
    # Ascending memory, the fastest first among equal memory, the key breaking exact ties.
    order = np.lexsort([*keys, -sub[:, COL["tokens_per_s"]], sub[:, COL["peak_bytes_per_gpu"]]])
    tps = sub[order, COL["tokens_per_s"]]
    prior_best = np.concatenate(([-np.inf], np.maximum.accumulate(tps)[:-1]))
    return idx[order[tps > prior_best]]
