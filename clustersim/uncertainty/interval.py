"""The 80% prediction interval of a step time, from the residuals of published runs.

For a run, r = ln(predicted / measured) (clustersim/data/residuals.json, written by
``python benchmarks/accuracy.py --write`` from validation/reference/). For a scenario of regime R
with residuals r_1..r_n (clustersim.uncertainty.regimes):

* bias      mu = sum(r_i) / (n + K_MU)                   (shrunk toward 0 by K_MU pseudo-runs)
* spread    s^2 = (sum (r_i - mean)^2 + K_S * s_pool^2) / (n - 1 + K_S) + sum(w_j^2)
  where s_pool is the spread of all residuals of every regime (so a regime measured on few runs
  is not trusted more than the model as a whole), and each w_j widens the band for a feature
  that no measured run of R shares (``WIDEN``; faults and mixed GPUs: ``per_rank_widenings``); s >= S_MIN.
* band      measured / predicted in [exp(-mu - z s'), exp(-mu + z s')], z = 1.2816 (80%, normal),
  s' = s sqrt(1 + 1 / (n + K_S)) (a prediction interval: the new run's own scatter plus the
  uncertainty of the regime's bias).

A regime with no measured run takes mu = 0 and s = s_pool plus its widenings. A scenario on a
calibrated cluster (``ClusterSpec.calibration``, written by ``clustersim calibrate``) gets its
interval from clustersim.uncertainty.calibrated instead. The widening terms are judgments, not fits: they say
by how much a feature without evidence could move the error, and they are listed, with what
triggered them, in every interval (``Interval.why``).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from clustersim.compute.variation import sync_wait_fraction
from clustersim.uncertainty.regimes import Features

LEVEL = 0.8
Z_80 = 1.2816  # two-sided 80%: the 90th percentile of the standard normal
K_MU = 2.0     # pseudo-runs of zero bias the regime's mean residual is shrunk with
K_S = 3.0      # pseudo-runs of the pooled spread the regime's spread is shrunk with
S_MIN = 0.04   # no regime is trusted to better than 4% (1 sigma) of its step time
RESIDUALS_FILE = Path(__file__).resolve().parents[1] / "data" / "residuals.json"
JITTER_MODEL_UNCERTAINTY = 0.5   # relative, 1 sigma, of the slowest-GPU wait's growth beyond the measured runs

# Widening (1 sigma, in ln units) for a feature no measured run of the regime has. Judgments:
# about the spread that the model's errors have shown between regimes that *are* measured.
# Scale beyond the measured range widens twice (``scale_widening``): by JITTER_MODEL_UNCERTAINTY of
# how much the modelled wait for the slowest GPU grows from the largest measured run to this one
# (clustersim.compute.variation: its sigma is read off two sources 20% apart, on V100-era fleets,
# and short-term noise is left out, so half its size either way), and by ``scale_per_doubling``
# for the rest that grows with the GPU count (ring latency, congestion: the collective model is
# within 1% of published reduce-scatters to 256 GPUs and 8-22% pessimistic at 512-1,024,
# validation/collectives_at_scale.py; exposed collectives are a fifth of a step or less there).
# The second term widens only upward: a job smaller than every measured run of its regime has less
# of what grows with the GPU count, not more.
WIDEN = {
    "generation": 0.10,       # a GPU generation without measured runs (its GEMM efficiency is from microbenchmarks)
    "generation_unmeasured": 0.15,  # ... and without a public GEMM measurement either
    "zero3_impl": 0.10,       # a ZeRO-3 implementation other than the measured ones
    "framework": 0.05,        # a framework none of the regime's runs used
    # a pipeline schedule none of the regime's pipelined runs used: less than a framework (a schedule
    # reorders the passes and transfers whose costs the measured runs vouch for, it adds none)
    "schedule": 0.03,
    "scale_per_doubling": 0.02,  # per factor 2 of GPU count beyond the measured range (besides the jitter term)
    "moe": 0.12,              # mixture of experts: no measured MoE run
    "low_precision": 0.08,    # FP8 / FP4 training: no measured low-precision run
    "context_parallel": 0.05,  # context parallelism: no measured CP run
    # faults (slow GPUs, stragglers, slow links; docs/perrank.md): no measured run had one. The pacing
    # rules are first principles, like context parallelism's; a faulty GPU adds its documented bias
    # (``per_rank_widenings``)
    "faults": 0.05,
}


@dataclass(frozen=True, slots=True)
class Evidence:
    """The measured runs of one regime (or of one calibrated machine)."""

    log_ratios: tuple[float, ...]
    frameworks: frozenset[str] = frozenset()   # what ran (``framework_run``), not the runs' labels
    zero3_impls: frozenset[str] = frozenset()
    min_gpus: int = 0
    max_gpus: int = 0
    schedules: frozenset[str] = frozenset()   # pipeline schedules of the runs with a pipeline

    @property
    def n(self) -> int:
        return len(self.log_ratios)

    @property
    def mean(self) -> float:
        return sum(self.log_ratios) / self.n if self.n else 0.0


@dataclass(frozen=True, slots=True)
class Interval:
    """measured / predicted lies in [lo_factor, hi_factor] with probability ``level``."""

    level: float
    lo_factor: float
    hi_factor: float
    regime: str
    evidence_runs: int
    validated: bool                 # the regime is measured and nothing widened the band
    why: tuple[str, ...] = ()       # the widenings applied

    def of(self, predicted: float) -> tuple[float, float]:
        """The interval of a quantity proportional to the step time."""
        return predicted * self.lo_factor, predicted * self.hi_factor

    def within_peak(self, floor_s: float, step_s: float) -> Interval:
        """The interval of a step predicted at ``step_s`` whose FLOPs take ``floor_s`` at the GPUs'
        dense peak (report.step_at_peak_s, the floor `clustersim calibrate` refuses a measured step
        below): no step is shorter, so the low end stops there. Matters where the prediction sits
        near the peak, as on a profile whose peak is the measured GEMM rate (`clustersim validate`:
        the MFU interval read 65-105%), and for a band widened to hold a calibration's own runs
        (x0.19-5.1: the step's low end read MFU 110%)."""
        if 0.0 < floor_s <= step_s and self.lo_factor * step_s < floor_s:
            return replace(self, lo_factor=floor_s / step_s)
        return self

    def of_rate(self, predicted: float) -> tuple[float, float]:
        """The interval of a quantity inversely proportional to the step time (MFU, tokens/s)."""
        return predicted / self.hi_factor, predicted / self.lo_factor

    def to_json(self, step_time_s: float, mfu: float, tokens_per_s: float) -> dict[str, object]:
        return {"level": self.level, "step_time_s": list(self.of(step_time_s)), "mfu": list(self.of_rate(mfu)),
                "tokens_per_s": list(self.of_rate(tokens_per_s)), "regime": self.regime,
                "evidence_runs": self.evidence_runs, "validated": self.validated, "widened_for": list(self.why)}


@functools.cache
def _stored(path: Path = RESIDUALS_FILE) -> tuple[dict[str, Evidence], Evidence]:
    """Evidence per regime and pooled, from the residuals file."""
    runs = json.loads(path.read_text())["runs"]
    by_regime: dict[str, list[dict]] = {}
    for run in runs:
        by_regime.setdefault(run["regime"], []).append(run)
    out = {regime: _evidence(rows) for regime, rows in by_regime.items()}
    return out, _evidence(runs)


def _evidence(rows: list[dict]) -> Evidence:
    if not rows:
        return Evidence(())
    return Evidence(tuple(r["log_ratio"] for r in rows),
                    frozenset(framework_run(r["framework"], r["zero3_impl"]) for r in rows),
                    frozenset(r["zero3_impl"] for r in rows if r["zero3_impl"]),
                    min(r["gpus"] for r in rows), max(r["gpus"] for r in rows),
                    frozenset(r["schedule"] for r in rows if r.get("schedule")))


def framework_run(framework: str, zero3_impl: str) -> str:
    """The framework whose step a run measured, as the framework widening compares it: where
    DeepSpeed's ZeRO-3 runs the step (``zero3_impl`` "deepspeed") DeepSpeed's engine wraps the model
    and optimizer whichever label launched it, so it is "deepspeed ZeRO-3" for ``framework:
    megatron-legacy`` (SC21's ZeRO-3 rows: Megatron-DeepSpeed, recorded so in residuals.json) and
    ``framework: deepspeed`` alike; otherwise the framework itself (a 3D DeepSpeed job runs its own
    ZeRO 0-2 and pipeline engine, which no measured run did; Megatron-LM under torch FSDP is not
    DeepSpeed's step either). docs/uncertainty.md, "Widenings"."""
    return "deepspeed ZeRO-3" if zero3_impl == "deepspeed" else framework


def _spread(ev: Evidence) -> float:
    if ev.n < 2:
        return 0.0
    return math.sqrt(sum((r - ev.mean) ** 2 for r in ev.log_ratios) / (ev.n - 1))


def widenings(f: Features, ev: Evidence | None, generations: frozenset[str], gemm_measured: bool,
               pooled: Evidence | None = None) -> list[tuple[str, float]]:
    """(reason, 1-sigma widening) for every feature of ``f`` that ``ev`` has no measured run of.

    A regime without measured runs is judged against all measured runs (``pooled``): its
    ZeRO-3 implementation and framework widen the band unless some measured run used them."""
    out: list[tuple[str, float]] = []
    if ev is None or not ev.n:
        out.append((f"no measured run in regime {f.regime} (the model's pooled error stands in)", 0.0))
        ev = pooled
    if f.generation not in generations:
        key = "generation" if gemm_measured else "generation_unmeasured"
        out.append((f"no measured run on {f.generation} GPUs", WIDEN[key]))
    if ev is not None and ev.n:
        if f.zero3_impl and f.zero3_impl not in ev.zero3_impls:
            out.append((f"ZeRO-3 as {f.zero3_impl} not measured (only {', '.join(sorted(ev.zero3_impls))})",
                        WIDEN["zero3_impl"]))
        if framework_run(f.framework, f.zero3_impl) not in ev.frameworks:
            out.append((f"framework {f.framework} not measured in this regime", WIDEN["framework"]))
        out += schedule_widening(f.schedule, ev.schedules, "in this regime")
        wide = gpu_range_widening(f.gpus, ev.min_gpus, ev.max_gpus)
        if wide is not None:
            out.append((f"{f.gpus} GPUs outside the measured {ev.min_gpus}-{ev.max_gpus}", wide))
    if f.moe:
        out.append(("mixture of experts: no measured MoE run", WIDEN["moe"]))
    if f.dtype in ("fp8", "fp4"):
        out.append((f"{f.dtype} training: no measured low-precision run", WIDEN["low_precision"]))
    if f.cp > 1:
        out.append(("context parallelism: no measured CP run", WIDEN["context_parallel"]))
    return out + per_rank_widenings(f.faults, f.gpus)


def per_rank_widenings(faults: tuple[str, ...], gpus: int, mixed: tuple[str, ...] = ()) -> list[tuple[str, float]]:
    """(reason, 1-sigma widening) for each per-rank case (docs/perrank.md) that no measured run
    covers, [] for none; the one rule, for every band (``widenings``; the mixed-GPU band of
    uncertainty.step):

    * ``mixed``, the regimes of a job's GPUs where it has several: no measured run mixes GPUs. No
      widening here: the step's band is already the widest of theirs (uncertainty.step).
    * ``faults``, the kinds that slow something (regimes.fault_kinds): no measured run had a fault,
      ``WIDEN["faults"]``; with a slow GPU or straggler, in quadrature with ln(1 + J), J the wait for
      the healthy spread's slowest of ``gpus`` GPUs as a fraction of kernel time
      (variation.sync_wait_fraction): where the faulty GPU paces the step the model's cost of it is
      low by about J of that stage's kernel seconds (docs/perrank.md, "What this rule leaves out"),
      and a stage's kernel seconds are at most the step, so the step is low by at most ln(1 + J).
    """
    out: list[tuple[str, float]] = []
    if mixed:
        out.append((f"mixed GPUs ({', '.join(mixed)}): the widest band of their regimes, no measured run mixes GPUs",
                    0.0))
    if faults:
        reason, wide = f"faults ({', '.join(faults)}): no measured run has faults", WIDEN["faults"]
        if {"slow_gpus", "stragglers"} & set(faults):
            jitter = sync_wait_fraction(gpus)
            reason += (f"; the modelled cost of a GPU that paces its stage is low by up to J = {jitter:.1%} of the "
                       "stage's kernel seconds (docs/perrank.md)")
            wide = math.hypot(wide, math.log1p(jitter))
        out.append((reason, wide))
    return out


def schedule_widening(schedule: str, measured: frozenset[str] | tuple[str, ...], where: str) -> list[tuple[str, float]]:
    """[(reason, 1-sigma widening)] for a pipeline ``schedule`` ("" without a pipeline) that none of
    the runs with a pipeline ran (``measured``), else []. The one rule for every band that knows its
    runs' schedules (a regime's published runs, a calibration's runs: a profile fitted on pp 1 runs
    does not vouch for a pipeline's bubbles and transfers)."""
    if schedule and schedule not in measured:
        return [(f"pipeline schedule {schedule} not measured {where}", WIDEN["schedule"])]
    return []


def scale_widening(gpus: int, measured_gpus: int) -> float:
    """1-sigma widening (ln units) for ``gpus`` beyond a regime's nearest measured GPU count
    (module docstring, ``JITTER_MODEL_UNCERTAINTY`` and ``scale_per_doubling``). The per-doubling
    term stands for what grows with the GPU count and is not modelled (ring latency, congestion),
    so it widens only above the largest measured run; below the smallest, the jitter term says how
    much of the modelled wait for the slowest GPU the measured runs vouch for and the smaller job
    does not have."""
    doublings = max(0.0, math.log2(gpus / measured_gpus))
    jitter = abs(math.log1p(sync_wait_fraction(gpus)) - math.log1p(sync_wait_fraction(measured_gpus)))
    return math.hypot(JITTER_MODEL_UNCERTAINTY * jitter, WIDEN["scale_per_doubling"] * doublings)


def gpu_range_widening(gpus: int, min_gpus: int, max_gpus: int) -> float | None:
    """1-sigma widening for a job of ``gpus`` against runs of ``min_gpus``-``max_gpus`` GPUs, or
    None inside that range: ``scale_widening`` from the nearer bound. The one rule for every band
    that knows which GPU counts its runs had (a regime's published runs, a calibration's runs)."""
    if min_gpus <= gpus <= max_gpus:
        return None
    return scale_widening(gpus, max_gpus if gpus > max_gpus else min_gpus)


def gpu_range_widenings(gpus: int, min_gpus: int, max_gpus: int, runs: str) -> list[tuple[str, float]]:
    """[(reason, 1-sigma widening)] of ``gpu_range_widening``, [] inside the range; the reason says
    what the rule adds: above the range both terms, below it the jitter term only (a smaller job has
    less of what grows with the GPU count, so the band moves by the slowest-GPU wait alone)."""
    wide = gpu_range_widening(gpus, min_gpus, max_gpus)
    if wide is None:
        return []
    span = f"{min_gpus}" if min_gpus == max_gpus else f"{min_gpus}-{max_gpus}"
    if gpus > max_gpus:
        return [(f"{gpus} GPUs above {runs} runs' {span} (slowest-GPU wait and "
                 f"{WIDEN['scale_per_doubling']:g} per doubling of the GPU count)", wide)]
    return [(f"{gpus} GPUs below {runs} runs' {span} (the slowest-GPU wait term only: +-{wide:.2%} at 1 sigma)",
             wide)]


def regime_spread(ev: Evidence | None, pooled: Evidence) -> tuple[float, float, int]:
    """(bias mu, variance s^2 before widenings, runs n) of a regime's evidence (module docstring)."""
    s_pool = max(_spread(pooled), S_MIN)
    n = ev.n if ev is not None else 0
    if n:
        mu = sum(ev.log_ratios) / (n + K_MU)
        var = (_spread(ev) ** 2 * (n - 1) + K_S * s_pool ** 2) / (n - 1 + K_S)
    else:
        mu, var = 0.0, s_pool ** 2
    return mu, var, n


def band(mu: float, s: float) -> tuple[float, float]:
    """measured / predicted in [exp(-mu - z s), exp(-mu + z s)], extended to hold 1 (the point
    itself) where a bias estimate from few runs would put the prediction outside its own band."""
    half = Z_80 * max(s, S_MIN)
    return min(1.0, math.exp(-mu - half)), max(1.0, math.exp(-mu + half))


def interval_from(f: Features, ev: Evidence | None, pooled: Evidence, generations: frozenset[str],
                  gemm_measured: bool = True) -> Interval:
    """The interval for features ``f`` given the regime's evidence (pure; see module docstring)."""
    mu, var, n = regime_spread(ev, pooled)
    wides = widenings(f, ev, generations, gemm_measured, pooled)
    var += sum(w * w for _, w in wides)
    s = max(math.sqrt(var), S_MIN) * math.sqrt(1 + 1 / (n + K_S))
    lo, hi = band(mu, s)
    return Interval(LEVEL, lo, hi, f.regime, n, validated=n >= 3 and not wides, why=tuple(reason for reason, _ in wides))
