"""The healthy cluster's own variation: every synchronisation waits for its slowest member.

GPUs of one SKU do not run equally fast. Under the board power limit each die settles at the
clock its own voltage-frequency-temperature curve allows (manufacturing variability, leakage)
and its cooling position permits, so the same kernels take a few percent longer on some GPUs
than on others, persistently:

* Sinha et al., "Not All GPUs Are Created Equal: Characterizing Variability in Large-Scale,
  Accelerator-Rich Systems" (SC22, arXiv 2208.11035): over 90% of the GPUs of five clusters
  (Summit, Vortex, Frontera, Longhorn: V100; Corona: MI60), 18,800 GPU hours, "8% (max 22%)
  average performance variation" between GPUs of one SKU, outliers up to 1.5x slower than the
  median. Read as the spread between the box plot's whiskers (Q1 - 1.5 IQR to Q3 + 1.5 IQR, the
  paper's outliers lie beyond them) over the median: a normal distribution puts the whiskers
  5.40 sigma apart, so sigma = 8% / 5.40 = 1.48%.
* stas00/ml-engineering, compute/accelerator/README.md ("Not all accelerators are created
  equal", "Silicon lottery", commit 744d01e): "5% and higher" MAMF differences between the GPUs of
  one 8-GPU node. The expected range of 8 normal draws is 2.847 sigma: sigma = 5% / 2.847 = 1.76%.

``SIGMA_GPU`` is the mean of the two, 1.6% of a GPU's kernel time (one sigma). The expected
time of the slowest of ``n`` GPUs is then ``1 + SIGMA_GPU * E[max of n standard normals]``
(the order statistic; about ``sqrt(2 ln n)`` for large n): 0 for one GPU, 1.42 sigma for 8,
3.25 for 1,024 and 3.97 for 16,384.

Which GPUs wait for which: a blocking TP/CP/EP collective in every layer makes a model-parallel
group run at the pace of its slowest member, a pipeline runs at the pace of its slowest stage,
and the data-parallel gradient reduction of every step waits for the slowest replica: one step
is paced by the slowest of all ``num_gpus`` GPUs of the job. A persistent speed spread (the
papers' measurements are minutes to hours long) therefore delays a rank's kernel time by
``SIGMA_GPU * E[max of num_gpus]``; the step plan (clustersim.plan.step_plan) prices it per
simulated rank from its contention-free kernel seconds and both engines add it, as the
breakdown's ``jitter`` cause, where the step's last data-parallel collective completes (that
collective is what cannot finish before its slowest member has produced its gradients).

Not modelled: short-term (per-kernel) noise on top of the persistent spread (OS and interrupt
noise, power-management steps), for which no microbenchmark is at hand; Llama 3's diurnal 1-2%
(Llama 3 paper §3.3.4) moves all GPUs together and is no synchronisation cost.

In per-rank mode the faults (``slow_gpus``, ``stragglers``) are GPUs out in this distribution's
tail. The wait for the slowest GPU stays on every rank as on a healthy cluster, and the engine runs
a faulty GPU only as much slower as it lies beyond the slowest GPU that wait already stands for
(``speed_beyond_spread``: speed x (1 + the wait's fraction), at most nominal), so that the two do
not count the same slowness twice: where the faulty GPU paces the step its kernels take
``1 / speed`` of their time in all (its simulated slowdown times the wait), and where it does not
(a stage with slack in its pipeline bubble) the step is still paced by the healthy spread, as on a
healthy cluster. A faulty GPU is therefore never faster than the healthy cluster (the simulated
speed is at most 1, the wait the same), and one within the spread (speed above ``1 / (1 + the
fraction)``) costs nothing. An earlier rule took the slowest fault's slowdown off every rank's
wait instead, which assumed that the fault paced the step: a GPU at 0.9 on a stage with slack
made the step faster than the healthy cluster's.
"""

from __future__ import annotations

import functools
import math

# One sigma of the persistent per-GPU kernel-time spread: mean of Sinha et al. 2022 (1.48%) and
# stas00/ml-engineering (1.76%), module docstring
SIGMA_GPU = (0.08 / 5.40 + 0.05 / 2.847) / 2
_GRID = 4000          # integration points over [-9, 9] for the expected maximum
_LO, _HI = -9.0, 9.0


@functools.lru_cache(maxsize=1024)
def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] (0 for n <= 1), by integrating
    ``x n phi(x) Phi(x)^(n-1)`` on a fine grid (error below 1e-6 for n up to 1e7)."""
    if n <= 1:
        return 0.0
    step = (_HI - _LO) / _GRID
    total = 0.0
    for i in range(_GRID + 1):
        x = _LO + i * step
        cdf = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        if cdf <= 0.0:
            continue
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        weight = 0.5 if i in (0, _GRID) else 1.0
        total += weight * x * n * pdf * math.exp((n - 1) * math.log(cdf))
    return total * step


def sync_wait_fraction(num_gpus: int, sigma: float = SIGMA_GPU) -> float:
    """Fraction of a rank's kernel time lost waiting for the slowest of ``num_gpus`` GPUs
    (module docstring)."""
    return sigma * expected_max_normal(num_gpus)


def speed_beyond_spread(speed: float, num_gpus: int) -> float:
    """The compute speed the engines simulate for a faulty GPU at ``speed`` (fraction of nominal)
    in a job of ``num_gpus`` GPUs: only the part of its slowness beyond the healthy spread's
    slowest GPU, whose wait (``sync_wait_fraction``) every rank keeps (module docstring)."""
    return min(1.0, speed * (1.0 + sync_wait_fraction(num_gpus)))
