"""The exact long-run expectation of a run with failures, checkpoints and restarts (pure).

The model (Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart
dumps", Future Generation Computer Systems 22(3):303-312, generalised to asynchronous
checkpoints and planned interruptions):

* Unplanned failures arrive as a Poisson process of rate ``lam`` (sum over components), during
  training, checkpoints and restarts alike. A failure rolls the job back to the last durable
  checkpoint and costs a restart of ``restart_failure_s``; a failure during a restart starts the
  restart again.
* Planned interruptions arrive at rate ``mu`` while the job trains. The job saves a final
  checkpoint (``final_save_s``, nothing is lost) and restarts (``restart_planned_s``).
* Training runs in periods of ``interval_s`` of compute followed by a checkpoint that blocks for
  ``blocking_s``. The checkpoint is durable ``lag_s`` later (the asynchronous write; 0 for a
  synchronous one). A snapshot waits until the previous write has finished, so a period lasts
  ``s = interval + max(0, lag - interval) + blocking``.

The run is a renewal process whose epochs are (restart, training until the next interruption Z,
with Z ~ Exp(lam + mu)). With ``L = lam + mu`` and the compute done by time Z,
``c(Z) = interval * floor(Z / s) + min(Z mod s, interval)``:

* checkpoints durable before a failure at Z: ``n(Z) = #{j >= 1: j s + lag <= Z}``, so
  ``E[n] = exp(-L lag) / (exp(L s) - 1)``;
* ``E[c(Z)] = (1 - exp(-L interval)) / (L (1 - exp(-L s)))``;
* a restart of length R with retries lasts ``(exp(lam R) - 1) / lam`` on average (Daly 2006).

Goodput (kept training time / wall time) is E[kept work per epoch] / E[epoch length]
(renewal-reward theorem). Without planned interruptions and with a synchronous checkpoint it
is exactly Daly's ``interval / (M exp(R/M) (exp((interval + blocking)/M) - 1))``, M = 1/lam.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class RunParams:
    """Rates (per second) and durations (seconds) of one run; see the module docstring."""

    lam: float                 # unplanned failures per second (> 0)
    mu: float                  # planned interruptions per second of training (>= 0)
    blocking_s: float          # training stopped per checkpoint
    lag_s: float               # blocking end -> durable (async write); 0 for sync
    final_save_s: float        # the save before a planned stop
    restart_failure_s: float   # detection + re-queue + start + load
    restart_planned_s: float   # re-queue + start + load


@dataclass(frozen=True, slots=True)
class Fractions:
    """Where the wall time goes, as fractions of it (they add up to 1), and interruption rates."""

    goodput: float
    checkpoint: float
    rework: float
    restart: float
    unplanned_per_s: float     # interruptions per wall second
    planned_per_s: float


def _period_s(p: RunParams, interval_s: np.ndarray) -> np.ndarray:
    return interval_s + np.maximum(0.0, p.lag_s - interval_s) + p.blocking_s


def fractions(p: RunParams, interval_s: np.ndarray | float) -> dict[str, np.ndarray]:
    """Vectorised over ``interval_s``: goodput, checkpoint, rework and restart fractions of the
    wall time, and the planned interruptions per wall second."""
    tau = np.asarray(interval_s, dtype=float)
    lam, mu = p.lam, p.mu
    big = lam + mu
    s = _period_s(p, tau)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        kept_failure = tau * np.exp(-big * p.lag_s) / np.expm1(big * s)          # E[interval * n(Z)]
        # E[c(Z)], divided in this order: big x (1 - e^-big s) underflowed to 0 for MTBFs past ~1e160 h
        # (no failures: goodput 0 and 11,520 GPU-hours lost)
        compute = (-np.expm1(-big * tau) / big) / -np.expm1(-big * s)
        run_s = 1.0 / big                                                       # E[Z]
        p_u, p_p = lam / big, mu / big
        restart_u = math.expm1(lam * p.restart_failure_s) / lam if lam * p.restart_failure_s < 700 else math.inf
        kept = p_u * kept_failure
        # both differences are >= 0 exactly; clip the rounding of nearly equal terms (tau >> MTBF)
        ckpt = np.maximum(run_s - compute, 0.0)
        rework = p_u * np.maximum(compute - kept_failure, 0.0)
        restart = p_u * restart_u
        if p_p > 0:
            length = p.final_save_s + p.restart_planned_s
            hit = -math.expm1(-lam * length)                                    # a failure before it ends
            restart_p = hit / lam * (1.0 + (restart_u * lam if math.isfinite(restart_u) else math.inf))
            save = -math.expm1(-lam * p.final_save_s) / lam                      # E[min(T, final save)]
            kept = kept + p_p * compute
            ckpt = ckpt + p_p * save
            restart = restart + p_p * (restart_p - save)
        cycle = restart + ckpt + rework + kept       # = E[restart phase] + E[Z] (+ final saves)
        out = {name: np.where(np.isfinite(cycle), part / cycle, 0.0)
               for name, part in (("goodput", kept), ("checkpoint", ckpt), ("rework", rework))}
        out["restart"] = np.maximum(1.0 - out["goodput"] - out["checkpoint"] - out["rework"], 0.0)   # rounding
        out["planned_per_s"] = np.where(np.isfinite(cycle), mu * run_s / cycle, 0.0)
    return out


def expected(p: RunParams, interval_s: float) -> Fractions:
    """The long-run fractions at one checkpoint interval."""
    f = fractions(p, np.array([float(interval_s)]))
    return Fractions(float(f["goodput"][0]), float(f["checkpoint"][0]), float(f["rework"][0]),
                     float(f["restart"][0]), p.lam, float(f["planned_per_s"][0]))


def best_interval_steps(p: RunParams, step_s: float, max_steps: int) -> int:
    """The whole number of steps between checkpoints (1..max_steps) that maximises goodput.

    Goodput is unimodal in the interval (rework grows with it, checkpoint overhead falls), so a
    log-spaced scan of 4,000 candidates brackets the peak between two neighbours, a ternary
    search narrows the bracket to 64 step counts, and each of those is evaluated.
    """
    max_steps = max(1, int(max_steps))
    grid = np.unique(np.round(np.geomspace(1, max_steps, num=min(4000, max_steps))).astype(np.int64))
    i = int(np.argmax(fractions(p, grid * step_s)["goodput"]))
    lo, hi = int(grid[max(0, i - 1)]), int(grid[min(len(grid) - 1, i + 1)])

    def goodput(k: int) -> float:
        return float(fractions(p, np.array([k * step_s]))["goodput"][0])

    while hi - lo > 64:
        third = (hi - lo) // 3
        if goodput(lo + third) < goodput(hi - third):
            lo += third
        else:
            hi -= third
    fine = np.arange(lo, hi + 1, dtype=np.int64)
    return int(fine[int(np.argmax(fractions(p, fine * step_s)["goodput"]))])


def young_interval_s(blocking_s: float, mtbf_s: float) -> float:
    """Young 1974 ("A first order approximation to the optimum checkpoint interval", CACM 17(9)):
    sqrt(2 delta M)."""
    return math.sqrt(2.0 * blocking_s * mtbf_s)


def daly_interval_s(blocking_s: float, mtbf_s: float) -> float:
    """Daly 2006 (FGCS 22(3), the higher-order estimate): for delta < 2M,
    sqrt(2 delta M) [1 + sqrt(delta/(2M))/3 + (delta/(2M))/9] - delta; else M."""
    if blocking_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = blocking_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * blocking_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - blocking_s


__all__ = ["Fractions", "RunParams", "best_interval_steps", "daly_interval_s", "expected", "fractions",
           "young_interval_s"]
