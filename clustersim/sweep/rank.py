"""Key codes and the Pareto front of a sweep table (columns: clustersim.sweep.evaluate.COLUMNS).

``key_codes`` orders rows like the canonical layout key (clustersim.sweep.space.layout_key), the
tie-break of every order the sweep makes (the ranking itself: clustersim.sweep.groups).
"""

from __future__ import annotations

import numpy as np

from clustersim.sweep.evaluate import COL, KEY_FIELDS

_KEY_COLS = [COL[f] for f in KEY_FIELDS]


def key_codes(table: np.ndarray) -> np.ndarray:
    """One int64 per row that orders like the row's layout key: its fields (small non-negative
    integers) packed into bits from the first field to the last, or, where they do not fit in 62
    bits, each row's rank among the keys. Sorting by it is sorting by the key, in one pass
    instead of one per field."""
    keys = table[:, _KEY_COLS]
    if keys.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    if not (np.isnan(keys).any() or (keys < 0).any()):
        widths = [max(1, int(m).bit_length()) for m in keys.max(axis=0)]
        if sum(widths) <= 62:
            codes = np.zeros(keys.shape[0], dtype=np.int64)
            for j, w in enumerate(widths):
                codes = (codes << w) | keys[:, j].astype(np.int64)
            return codes
    ranks = np.empty(keys.shape[0], dtype=np.int64)
    ranks[np.lexsort([keys[:, j] for j in reversed(range(keys.shape[1]))])] = np.arange(keys.shape[0])
    return ranks


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
