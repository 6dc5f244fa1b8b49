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
from clustersim.sweep.rank import key_codes
from clustersim.sweep.space import layout_from_key

N_KEY = len(KEY_FIELDS)


def slower_zero2(table: np.ndarray, template: ParallelLayout, scale: np.ndarray | None) -> np.ndarray:
    """Rows to leave out (a boolean mask over ``table``'s rows): ZeRO-2 layouts that reduce every
    micro-batch and whose ZeRO-1 twin is in the table, fits with a verdict at least as good, and
    has a ranked-value scale no larger (module docstring)."""
    zcol = COL["zero_stage"]
    out = np.zeros(table.shape[0], dtype=bool)
    fitting = table[:, COL["fits"]] == 1.0   # only a fitting layout is ever timed, and its twin must fit
    zero2 = np.flatnonzero(fitting & (table[:, zcol] == 2.0))
    ones = np.flatnonzero(fitting & (table[:, zcol] == 1.0))
    if not zero2.size or not ones.size:
        return out
    # the rule, asked once per distinct (dp, cp, micro-batch): the only fields it reads besides the stage
    sig = ((table[zero2, COL["dp"]].astype(np.int64) << 32) | (table[zero2, COL["cp"]].astype(np.int64) << 20)
           | table[zero2, COL["micro_batch"]].astype(np.int64))   # dp, cp < 2^31, 2^12; micro-batch < 2^20
    _, first, which = np.unique(sig, return_index=True, return_inverse=True)
    every = np.array([grads_every_micro_batch(layout_from_key(tuple(int(v) for v in table[row, :N_KEY]), template))
                      for row in zero2[first].tolist()], dtype=bool)[which.reshape(-1)]
    rows = zero2[every]
    if not rows.size:
        return out
    # each candidate's ZeRO-1 twin: the same key with stage 1, matched by key codes packed alike
    keys = np.concatenate([table[ones, :N_KEY], table[rows, :N_KEY]])
    keys[len(ones):, zcol] = 1.0
    codes = key_codes(keys)
    one_codes, row_codes = codes[:len(ones)], codes[len(ones):]
    order = np.argsort(one_codes, kind="stable")
    sorted_codes = one_codes[order]
    at = np.minimum(np.searchsorted(sorted_codes, row_codes), len(sorted_codes) - 1)
    found = sorted_codes[at] == row_codes
    twin = ones[order[at]]
    verdict = table[:, COL["verdict"]]
    cut = found & (verdict[twin] <= verdict[rows])
    if scale is not None:
        cut &= scale[rows] >= scale[twin]
    out[rows[cut]] = True
    return out
