"""Layouts the sweep leaves out because a twin is never worse: ZeRO-2 against ZeRO-1.

A ZeRO-2 layout that reduces every micro-batch's gradients (``plan.data_parallel.grads_every_micro_batch``:
it keeps only its shard, so it cannot accumulate whole ones) runs its ZeRO-1 twin's compute and
its last reduction, plus one more reduction per earlier micro-batch: in the shipped step models
(``SweepSpec.zero2_dominated``) it is never faster (tests/sweep/test_twins.py, on random layouts). Its one gain is
memory. Ranked by time, p90 (where its interval factor is no smaller) or cost, it can therefore
stand above its twin only where the twin does not fit or fits with a worse verdict (tight against
fits); everywhere else the sweep gives it an infinite bound before the branch and bound, so it
costs no closed form (it stays in the table: it was screened, and it fits). Ranked by memory headroom, every layout stays. The scenario's own layout is added back where
it is one of them (``runner._add_incumbent``), so a user always sees it.
"""

from __future__ import annotations

import numpy as np

from clustersim.parallel.layout import ParallelLayout
from clustersim.plan.data_parallel import grads_every_micro_batch
from clustersim.sweep.evaluate import COL, KEY_FIELDS
from clustersim.sweep.space import layout_from_key

N_KEY = len(KEY_FIELDS)


def slower_zero2(table: np.ndarray, template: ParallelLayout, scale: np.ndarray | None) -> np.ndarray:
    """Rows to leave out (a boolean mask over ``table``'s rows): ZeRO-2 layouts that reduce every
    micro-batch and whose ZeRO-1 twin is in the table, fits with a verdict at least as good, and
    has a ranked-value scale no larger (module docstring)."""
    zcol = COL["zero_stage"]
    out = np.zeros(table.shape[0], dtype=bool)
    zero2 = np.flatnonzero(table[:, zcol] == 2.0)
    if not zero2.size:
        return out
    # the rule, asked once per distinct (dp, cp, micro-batch): the only fields it reads besides the stage
    every: dict[tuple[float, float, float], bool] = {}
    cols = [COL["dp"], COL["cp"], COL["micro_batch"]]
    for row in zero2.tolist():
        sig = tuple(table[row, cols].tolist())
        if sig not in every:
            every[sig] = grads_every_micro_batch(layout_from_key(tuple(int(v) for v in table[row, :N_KEY]), template))
    ones = np.flatnonzero(table[:, zcol] == 1.0)
    twin_of = {tuple(table[row, :N_KEY].tolist()): row for row in ones.tolist()}
    fits, verdict = table[:, COL["fits"]], table[:, COL["verdict"]]
    for row in zero2.tolist():
        if not every[tuple(table[row, cols].tolist())]:
            continue
        key = table[row, :N_KEY].copy()
        key[zcol] = 1.0
        twin = twin_of.get(tuple(key.tolist()))
        if twin is None or fits[twin] != 1.0 or verdict[twin] > verdict[row]:
            continue
        if scale is not None and scale[row] < scale[twin]:
            continue
        out[row] = True
    return out
