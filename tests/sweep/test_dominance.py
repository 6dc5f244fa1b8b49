"""The sweep leaves out ZeRO-2 layouts that reduce every micro-batch where their ZeRO-1 twin fits
as well (clustersim.sweep.dominance): they are never faster, so the ranking by time must not move,
and they cost no closed form."""

from __future__ import annotations

import numpy as np

import clustersim.sweep.runner as runner
from clustersim.api import SWEEP_EVALUATORS
from clustersim.scenario import load_scenario
from clustersim.sweep.evaluate import COL
from clustersim.sweep.executors import SerialExecutor
from clustersim.sweep.runner import run_sweep, sweep_spec
from tests.sweep.test_screen import DP_SCENARIOS


def _sweep(monkeypatch, prune: bool, rank_by: str = "time"):
    if not prune:
        monkeypatch.setattr(runner, "slower_zero2", lambda table, template, scale: np.zeros(table.shape[0], bool))
    s = load_scenario(None, DP_SCENARIOS["dense"])
    spec = sweep_spec(s, evaluators=SWEEP_EVALUATORS)
    return run_sweep(spec, SerialExecutor(), rerank=0, keep=6, rank_by=rank_by)


def test_slower_zero2_layouts_are_left_out_and_the_ranking_keeps_its_times(monkeypatch):
    pruned = _sweep(monkeypatch, True)
    monkeypatch.undo()
    full = _sweep(monkeypatch, False)
    t = COL["step_time_s"]
    # the same layouts screened; the pruned sweep runs fewer closed forms
    assert pruned.table.shape[0] == full.table.shape[0]
    assert pruned.estimated < full.estimated
    # the best six rows' step times are the same (a left-out layout is never faster than its twin)
    top_p = [r["step_time_s"] for r in pruned.top(6)]
    top_f = [r["step_time_s"] for r in full.top(6)]
    assert top_p == top_f
    # every ZeRO-2 layout the full sweep timed is no faster than its ZeRO-1 twin
    keys = {tuple(row[:13]): row[t] for row in full.table if not np.isnan(row[t])}
    for key, time_s in keys.items():
        if key[COL["zero_stage"]] == 2:
            twin = list(key)
            twin[COL["zero_stage"]] = 1
            if tuple(twin) in keys:
                assert time_s >= keys[tuple(twin)]


def test_ranked_by_memory_headroom_every_layout_stays(monkeypatch):
    kept = _sweep(monkeypatch, True, "memory-headroom")
    monkeypatch.undo()
    full = _sweep(monkeypatch, False, "memory-headroom")
    assert kept.estimated == full.estimated
    assert np.array_equal(kept.table, full.table, equal_nan=True)
