"""Fit a cluster's fabric constants to measured collectives, through the simulator itself.

Each measurement (nccl-tests row, NCCL kernel of a profiler trace) is predicted by
``plan_collective`` on the cluster being fitted, exactly as ``clustersim collective`` and the
step engine price it: NCCL's own choice of algorithm and protocol included. The constants that
move are *knobs* of the two fabrics:

* ``bw``: achievable per-direction port bandwidth (raw rate x efficiency) of the tier: NVLink /
  NVSwitch for ``scale_up``, the NIC for ``scale_out``; every ring, tree and all-to-all uses it;
* ``latency``: the fabric's one-way latency; the collectives pay what exceeds NCCL's LL hop on
  every algorithm step (clustersim.collectives.algorithms._hop);
* ``nvls_bw`` and ``nvls_latency`` (NVSwitch with NVLink SHARP only): the NVLS port bandwidth
  and the fixed cost of one NVLS / NVLS-tree collective (NCCL's tuning table says 23 us).

Everything else the base preset knows (NVLS itself, SHARP bandwidth, switch latencies, PCIe,
rail layout) is kept. A knob that no measurement is sensitive to (all-reduce NVLS knobs for an
all_gather log, scale-out knobs for a one-node log) stays at the preset's value.

The fit minimises the sum of squared log errors ``log(predicted / measured)^2`` (relative error,
symmetric in over- and under-prediction) by coordinate descent: for each knob a log-spaced grid
then golden-section search on the log scale, repeated until no knob improves the fit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from clustersim.collectives import GroupShape, plan_collective
from clustersim.collectives import nccl_tuning as nt
from clustersim.hardware.spec import ClusterSpec, FabricSpec

TIERS = ("scale_up", "scale_out")
KNOBS = ("bw", "latency", "nvls_bw", "nvls_latency")
SENSITIVITY = 1e-3      # a knob matters if x1.5 moves some prediction by at least 0.1%
MAX_SWEEPS = 4
# A bandwidth moves only where the data ask for it: 10% off the preset costs as much as 1 in
# 10,000 (REGULARISATION 0.01 x 0.1^2) of the total weight of observations missing by 100%. Without
# it, a bandwidth the data barely see (the ring bandwidth of an all_reduce log that NVLS serves above
# 2 MiB) drifts to wherever it bends a few medium sizes, and the profile extrapolates badly.
REGULARISATION = float(os.environ.get("CLUSTERSIM_FIT_REGULARISATION", "0.01"))


@dataclass(frozen=True, slots=True)
class Observation:
    """One measured collective: op (clustersim name), nccl-tests size convention, seconds."""

    op: str
    size_bytes: float
    measured_s: float
    ranks_per_node: int
    nodes: int
    source: str = ""
    weight: float = 1.0

    @property
    def shape(self) -> GroupShape:
        return GroupShape(ranks_per_node=self.ranks_per_node, num_nodes=self.nodes)


@dataclass(frozen=True, slots=True)
class FabricFit:
    cluster: ClusterSpec                       # the base cluster with the fitted fabrics
    knobs: dict[str, float]                    # "tier.knob" -> fitted value (SI units)
    start: dict[str, float]                    # the same knobs on the base cluster
    fixed: tuple[str, ...]                     # knobs no observation is sensitive to
    rms_log_error: float


def get_knob(cluster: ClusterSpec, tier: str, knob: str) -> float:
    f: FabricSpec = getattr(cluster, tier)
    if knob == "bw":
        return f.effective_bw_bytes_per_s
    if knob == "latency":
        return f.latency_s
    if knob == "nvls_bw":
        from clustersim.collectives.ports import nvls_bw
        return nvls_bw(cluster)
    if knob == "nvls_latency":
        return f.nvls_latency_s or nt.BASE_LAT_S["nvls"]["Simple"]
    raise ValueError(knob)


def set_knob(cluster: ClusterSpec, tier: str, knob: str, value: float) -> ClusterSpec:
    f: FabricSpec = getattr(cluster, tier)
    if knob == "bw":
        f = replace(f, bw_bytes_per_s=value, efficiency=1.0)
    elif knob == "latency":
        f = replace(f, latency_s=value)
    elif knob == "nvls_bw":
        f = replace(f, nvls_bw_bytes_per_s=value)
    elif knob == "nvls_latency":
        f = replace(f, nvls_latency_s=value)
    else:
        raise ValueError(knob)
    return replace(cluster, **{tier: f})


def _bounds(cluster: ClusterSpec, tier: str, knob: str) -> tuple[float, float]:
    v = get_knob(cluster, tier, knob)
    if knob == "bw":
        # at most the preset's line rate (efficiency <= 1: a faster machine needs a faster preset),
        # at least a quarter of what it achieves: below that the fit would switch NCCL algorithms
        # off to bend the curve, and the profile would not extrapolate
        return v / 4, max(v, getattr(cluster, tier).bw_bytes_per_s)
    if knob == "nvls_bw":
        return v / 4, v * 1.5  # the preset's NVLS rate is NCCL's 5/6 of NVLink (ports.nvls_bw)
    if knob == "latency":
        # below NCCL's LL hop the simulator scales NCCL's per-step latencies down (algorithms._hop);
        # a twentieth of the hop is as fast as any published NCCL run; 1 ms is a very slow fabric
        hw = nt.HW_NET if tier == "scale_out" else nt.HW_NVLINK
        return nt.HW_LAT_S[hw]["ring"]["LL"] / 20, max(1e-3, v * 10)
    return 1e-6, max(1e-3, v * 10)  # nvls_latency


def predict_s(obs: Observation, cluster: ClusterSpec) -> float:
    c = cluster if cluster.num_nodes >= obs.nodes else replace(cluster, num_nodes=obs.nodes)
    return plan_collective(obs.op, float(obs.size_bytes), c, obs.shape).time_s


def objective(observations: Sequence[Observation], cluster: ClusterSpec) -> float:
    total = 0.0
    for o in observations:
        t = predict_s(o, cluster)
        total += o.weight * math.log(max(t, 1e-15) / o.measured_s) ** 2
    return total


def _penalty(cluster: ClusterSpec, start: dict[str, float], scale: float) -> float:
    """Pull the bandwidths towards the preset: ``REGULARISATION`` x total weight x sum
    log(bandwidth / preset)^2. Latencies move freely: NCCL's real fixed costs differ from its
    tuning table by tens of percent, and they shape the medium sizes that matter."""
    return scale * sum(math.log(get_knob(cluster, *k.split(".")) / v) ** 2 for k, v in start.items()
                       if k.endswith("bw"))


def _sensitive(observations: Sequence[Observation], cluster: ClusterSpec, tier: str, knob: str) -> bool:
    v = get_knob(cluster, tier, knob)
    base = [predict_s(o, cluster) for o in observations]
    for factor in (1.5, 1 / 1.5):
        moved = set_knob(cluster, tier, knob, v * factor)
        if any(abs(predict_s(o, moved) / b - 1) > SENSITIVITY for o, b in zip(observations, base, strict=True)):
            return True
    return False


def _search(err, lo: float, hi: float, start: float, points: int = 24, iters: int = 30) -> float:
    """Minimise ``err`` over [lo, hi] on the log scale: grid (plus ``start``), then golden section."""
    grid = sorted({lo * (hi / lo) ** (k / (points - 1)) for k in range(points)} | {min(max(start, lo), hi)})
    errs = [err(x) for x in grid]
    i = min(range(len(grid)), key=errs.__getitem__)
    a, b = math.log(grid[max(0, i - 1)]), math.log(grid[min(len(grid) - 1, i + 1)])
    best_x, best_e = grid[i], errs[i]
    inv_phi = (math.sqrt(5) - 1) / 2
    for _ in range(iters):
        x1, x2 = b - inv_phi * (b - a), a + inv_phi * (b - a)
        e1, e2 = err(math.exp(x1)), err(math.exp(x2))
        for x, e in ((x1, e1), (x2, e2)):
            if e < best_e:
                best_x, best_e = math.exp(x), e
        if e1 <= e2:
            b = x2
        else:
            a = x1
    return best_x


def _tiers_seen(observations: Sequence[Observation]) -> list[str]:
    """The tiers the observations calibrate. Scale-out from groups across nodes; scale-up from
    groups inside one node, or, when there are none, from the multi-node groups (a two-node
    all-reduce runs NCCL's tree at NVLink speed inside each node), which a one-node log in the
    same fit then pins instead."""
    multi = any(o.nodes > 1 for o in observations)
    single = any(o.nodes == 1 and o.ranks_per_node > 1 for o in observations)
    tiers = ["scale_up"] if single or multi else []
    return tiers + (["scale_out"] if multi else [])


def _materialise_nvls(cluster: ClusterSpec) -> ClusterSpec:
    """Write the NVLS bandwidth and latency that the simulator derives into the fabric, so that
    fitting ``bw`` does not move them (ports.nvls_bw derives one from the other when unset)."""
    if not cluster.scale_up.nvls:
        return cluster
    for knob in ("nvls_bw", "nvls_latency"):
        cluster = set_knob(cluster, "scale_up", knob, get_knob(cluster, "scale_up", knob))
    return cluster


def fit_fabrics(base: ClusterSpec, observations: Sequence[Observation],
                knobs: Sequence[tuple[str, str]] | None = None) -> FabricFit:
    """Refit the knobs of ``base`` that ``observations`` are sensitive to (module docstring)."""
    if not observations:
        raise ValueError("no observations to fit")
    need = max(o.nodes for o in observations)
    cluster = _materialise_nvls(base if base.num_nodes >= need else replace(base, num_nodes=need))
    candidates = list(knobs) if knobs is not None else [(t, k) for t in _tiers_seen(observations) for k in KNOBS]
    candidates = [(t, k) for t, k in candidates
                  if not (k.startswith("nvls") and not getattr(cluster, t).nvls)]
    active = [(t, k) for t, k in candidates if _sensitive(observations, cluster, t, k)]
    start = {f"{t}.{k}": get_knob(cluster, t, k) for t, k in active}
    reg = REGULARISATION * sum(o.weight for o in observations)

    def total(c: ClusterSpec) -> float:
        return objective(observations, c) + _penalty(c, start, reg)
    best = total(cluster)
    for _ in range(MAX_SWEEPS):
        before = best
        for tier, knob in active:
            lo, hi = _bounds(base, tier, knob)

            def err(x: float, tier: str = tier, knob: str = knob, at: ClusterSpec = cluster) -> float:
                return total(set_knob(at, tier, knob, x))
            x = _search(err, lo, hi, get_knob(cluster, tier, knob))
            e = err(x)
            if e < best:
                cluster, best = set_knob(cluster, tier, knob, x), e
        if before - best <= 1e-6 * max(before, 1e-12):
            break
    fitted = {f"{t}.{k}": get_knob(cluster, t, k) for t, k in active}
    fixed = tuple(f"{t}.{k}" for t, k in candidates if (t, k) not in active)
    total_w = sum(o.weight for o in observations)
    return FabricFit(replace(cluster, num_nodes=base.num_nodes), fitted, start, fixed,
                     math.sqrt(best / total_w) if total_w else 0.0)
