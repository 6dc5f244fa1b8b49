"""Seeded Monte-Carlo of whole runs: the spread around the expectation (same model as
clustersim.goodput.expectation, drawn event by event).

Each run draws its interruptions over the whole window from a numpy Generator with an explicit
seed: the number of events is Poisson with the summed rate, their times uniform, their cause
drawn in proportion to the class rates (a superposition of independent Poisson processes). The
runs are then walked event by event, all runs of a batch at once (numpy over runs):

* a failure while the job trains rolls it back to its last durable checkpoint and restarts it;
* a failure while it restarts (or saves before a planned stop) starts the restart again;
* a planned interruption while it trains saves, stops and restarts; one during a restart is
  dropped (maintenance waits for a job that is not running);
* training done when the window closes counts (the run goes on after it).

Same seed, same inputs: the same numbers, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustersim.goodput.expectation import RunParams

# Runs per batch: one batch's event table stays near this many entries (about 80 MB).
_BATCH_EVENTS = 8_000_000


@dataclass(frozen=True, slots=True)
class RunSamples:
    """Per-run outcomes (arrays of length trials), seconds of wall time."""

    useful_s: np.ndarray
    checkpoint_s: np.ndarray
    rework_s: np.ndarray
    restart_s: np.ndarray
    unplanned: np.ndarray       # interruptions by failure (int)
    planned: np.ndarray         # planned interruptions (int)
    by_class: np.ndarray        # (trials, classes) failures per class (int)


def _compute_done(x: np.ndarray, tau: float, period: float) -> np.ndarray:
    """Training (not checkpoint) seconds within the first ``x`` seconds after a (re)start."""
    q = np.floor(x / period)
    return q * tau + np.minimum(x - q * period, tau)


def simulate_runs(p: RunParams, class_rates: np.ndarray, interval_s: float, window_s: float, trials: int,
                  seed: int) -> RunSamples:
    """``trials`` runs of ``window_s`` seconds; ``class_rates`` (per second) sum to ``p.lam``."""
    rng = np.random.default_rng(seed)
    rates = np.append(np.asarray(class_rates, dtype=float), p.mu)
    total = float(rates.sum())
    probs = rates / total
    planned_idx = len(rates) - 1
    expected_events = total * window_s
    batch = max(1, min(trials, int(_BATCH_EVENTS // max(1.0, expected_events * 1.2 + 10))))
    parts = []
    for start in range(0, trials, batch):
        n = min(batch, trials - start)
        counts = rng.poisson(expected_events, size=n)
        width = int(counts.max()) if n else 0
        # each run's ``count`` event times: i.i.d. uniform over the window, the unused slots of its
        # row marked inf *before* the sort (sorting first and cutting after kept the smallest
        # ``count`` of ``width`` uniforms: events bunched at the window's start)
        times = rng.random((n, width)) * window_s
        times[np.arange(width)[None, :] >= counts[:, None]] = np.inf
        times.sort(axis=1)
        kinds = rng.choice(len(rates), size=(n, width), p=probs).astype(np.int16)
        parts.append(_walk(p, interval_s, window_s, times, kinds, planned_idx))
    return RunSamples(*(np.concatenate([part[i] for part in parts]) for i in range(7)))


def _walk(p: RunParams, tau: float, window_s: float, times: np.ndarray, kinds: np.ndarray,
          planned_idx: int) -> tuple[np.ndarray, ...]:
    n, width = times.shape
    period = tau + max(0.0, p.lag_s - tau) + p.blocking_s
    run_start = np.zeros(n)           # when the job last started training from a durable checkpoint
    save_end = np.zeros(n)            # end of the save before a planned stop (checkpoint time)
    useful, rework, ckpt = np.zeros(n), np.zeros(n), np.zeros(n)
    planned = np.zeros(n, dtype=np.int64)
    by_class = np.zeros((n, planned_idx), dtype=np.int64)
    rows = np.arange(n)
    for i in range(width):
        kind = kinds[:, i]
        valid = times[:, i] < window_s
        e = np.where(valid, times[:, i], window_s)      # padding and late events: inert below
        failure = valid & (kind != planned_idx)
        restarting = e < run_start
        # a failure during a restart (or the final save): the restart begins again
        hit = failure & restarting
        cut = np.where(hit, np.maximum(0.0, save_end - e), 0.0)
        ckpt -= cut
        save_end = np.where(hit, np.minimum(save_end, e), save_end)
        # a failure while training: back to the last durable checkpoint
        fail = failure & ~restarting
        x = np.maximum(e - run_start, 0.0)
        done = _compute_done(x, tau, period)
        kept = tau * np.maximum(0.0, np.floor((x - p.lag_s) / period))
        kept = np.minimum(kept, done)
        useful += np.where(fail, kept, 0.0)
        rework += np.where(fail, done - kept, 0.0)
        ckpt += np.where(fail, x - done, 0.0)
        # a planned stop while training: save everything, stop, restart
        stop = valid & (kind == planned_idx) & ~restarting
        useful += np.where(stop, done, 0.0)
        ckpt += np.where(stop, x - done + p.final_save_s, 0.0)
        save_end = np.where(stop, e + p.final_save_s, save_end)
        planned += stop
        run_start = np.where(failure, e + p.restart_failure_s,
                             np.where(stop, e + p.final_save_s + p.restart_planned_s, run_start))
        by_class[rows[failure], kind[failure]] += 1
    # the window closes: training since the last (re)start counts; a save beyond it does not
    x = np.maximum(window_s - run_start, 0.0)
    done = _compute_done(x, tau, period)
    useful += done
    ckpt += x - done - np.maximum(0.0, save_end - window_s)
    restart = window_s - useful - rework - ckpt
    return useful, ckpt, rework, restart, by_class.sum(axis=1), planned, by_class


__all__ = ["RunSamples", "simulate_runs"]
