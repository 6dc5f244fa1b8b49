"""Pure fits of calibrated constants from measurements.

Collectives: the simulator's cost of a collective on one fabric is linear in the fabric's
latency ``alpha`` (s) and inverse bandwidth ``beta`` (s/B): ``t = a * alpha + b * beta``,
with ``a`` the number of latency terms the algorithm pays and ``b`` the bytes through the
bottleneck port (Hockney's alpha-beta model; Thakur, Rabenseifner & Gropp 2005, IJHPCA 19(1),
§2). The coefficients ``a`` and ``b`` come from the simulator itself (clustersim.calibrate.
predict), so the fitted constants are the ones its formulas need. The fit minimises the
squared *relative* error over the fit set, so small and large messages weigh alike.

Compute: one GEMM rate (FLOP/s) minimising the squared relative error over a shape sweep; one
memory bandwidth from a large copy.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DesignRow:
    """One fit case: ``measured_s ~= latency_terms * alpha + wire_bytes * beta``."""

    latency_terms: float
    wire_bytes: float
    measured_s: float


@dataclass(frozen=True, slots=True)
class AlphaBeta:
    alpha_s: float                 # latency per latency term
    beta_s_per_byte: float         # inverse achieved bandwidth
    points: int
    median_abs_err_pct: float      # of the fit on its own points

    @property
    def bw_bytes_per_s(self) -> float:
        return 1.0 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else float("inf")


def _solve_1d(xs: Sequence[float]) -> float:
    # minimise sum (x_i * v - 1)^2  ->  v = sum x_i / sum x_i^2
    den = sum(x * x for x in xs)
    return max(0.0, sum(xs) / den) if den > 0 else 0.0


def fit_alpha_beta(rows: Sequence[DesignRow]) -> AlphaBeta:
    """Least-squares alpha, beta >= 0 minimising sum ((a*alpha + b*beta) / m - 1)^2."""
    if not rows:
        raise ValueError("no fit points")
    xa = [r.latency_terms / r.measured_s for r in rows]
    xb = [r.wire_bytes / r.measured_s for r in rows]
    saa = sum(x * x for x in xa)
    sbb = sum(x * x for x in xb)
    sab = sum(a * b for a, b in zip(xa, xb, strict=True))
    sa, sb = sum(xa), sum(xb)
    det = saa * sbb - sab * sab
    alpha = beta = -1.0
    if det > 1e-12 * max(saa * sbb, 1e-300):
        # normal equations of the 2-parameter linear least squares (Cramer's rule)
        alpha = (sa * sbb - sb * sab) / det
        beta = (saa * sb - sab * sa) / det
    if alpha < 0 or beta < 0:  # the constrained optimum lies on an axis: fit one parameter
        only_beta, only_alpha = _solve_1d(xb), _solve_1d(xa)
        err_b = sum((x * only_beta - 1) ** 2 for x in xb)
        err_a = sum((x * only_alpha - 1) ** 2 for x in xa)
        alpha, beta = (0.0, only_beta) if err_b <= err_a else (only_alpha, 0.0)
    errs = [abs((r.latency_terms * alpha + r.wire_bytes * beta) / r.measured_s - 1) * 100 for r in rows]
    return AlphaBeta(alpha_s=alpha, beta_s_per_byte=beta, points=len(rows),
                     median_abs_err_pct=statistics.median(errs))


def fit_rate(work: Sequence[float], measured_s: Sequence[float]) -> float:
    """The rate R (work/s) minimising sum (work_i / (R * t_i) - 1)^2 (e.g. GEMM FLOP/s)."""
    xs = [w / t for w, t in zip(work, measured_s, strict=True)]
    inv = _solve_1d(xs)  # fits 1/R
    if inv <= 0:
        raise ValueError("cannot fit a rate to these points")
    return 1.0 / inv


def textbook_terms(op: str, world: int, size_bytes: float) -> tuple[float, float]:
    """(latency terms, bytes through one rank's port) of the algorithm gloo runs for ``op``.

    all_reduce: ring reduce-scatter then all-gather (gloo/allreduce.cc ``ring``), 2(n-1) steps
    of S/n; all_gather / reduce_scatter: one ring pass, n-1 steps of S/n; all_to_all: n-1
    pairwise exchanges of S/n; broadcast/reduce: a pipelined chain, n-1 hops and S; send_recv:
    one message of S (Thakur, Rabenseifner & Gropp 2005, IJHPCA 19(1), §4, Table 1).
    gloo's ring splits each chunk into at least two segments and keeps two in flight
    (gloo/allreduce.cc: numSegments >= 2 x ranks), so one "step" here costs a few one-way
    latencies: the fitted alpha per step is larger than a ping.
    """
    n = world
    if op == "all_reduce":
        return 2.0 * (n - 1), 2.0 * (n - 1) / n * size_bytes
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return float(n - 1), (n - 1) / n * size_bytes
    if op in ("broadcast", "reduce"):
        return float(n - 1), float(size_bytes)
    if op == "send_recv":
        return 1.0, float(size_bytes)
    raise ValueError(op)
