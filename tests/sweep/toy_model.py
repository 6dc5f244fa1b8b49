"""A toy cost model for testing the sweep machinery (not clustersim's model).

Simple enough to check by hand, with deliberate ties: step time ignores the ZeRO stage and
sequence parallelism, so layouts that differ only there tie and must be ordered by their key.
Memory grows with micro-batch and in-flight micro-batches and shrinks with tp, pp and ZeRO.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

CAPACITY_BYTES = 1000


@dataclass(frozen=True)
class Memory:
    peak_bytes_per_gpu: int
    fits: bool

    @property
    def verdict(self) -> str:  # the toy knows no interval: fits or does not
        return "fits" if self.fits else "does-not-fit"


@dataclass(frozen=True)
class Report:
    step_time_s: float
    tokens_per_s: float
    mfu: float
    memory: Memory


def peak_bytes(scenario) -> int:
    p = scenario.parallel
    static = 2400 // (p.tp * p.pp) // (1 + p.zero_stage)
    act = {"none": 100, "selective": 40, "full": 10}[p.recompute] * p.micro_batch * min(p.pp, p.num_micro_batches)
    return static + act // p.tp


def fits_in_memory(scenario) -> tuple[bool, int]:
    peak = peak_bytes(scenario)
    return peak <= CAPACITY_BYTES, peak


def estimate(scenario) -> Report:
    p = scenario.parallel
    m = scenario.model
    compute_s = 1.0 / (p.tp * p.pp * p.cp * p.dp) * (1.0 + 0.05 * p.tp) * (1.0 + {"none": 0, "selective": 0.05,
                                                                               "full": 0.33}[p.recompute])
    bubble = (p.pp - 1) / (p.num_micro_batches * p.virtual_stages) if p.schedule != "gpipe" else (p.pp - 1) / p.num_micro_batches
    step = compute_s * p.global_batch * (1 + bubble)
    tokens = p.global_batch * m.seq_len / step
    peak = peak_bytes(scenario)
    return Report(step, tokens, 0.5 / (1 + bubble), Memory(peak, peak <= CAPACITY_BYTES))


def simulate(scenario) -> Report:
    """The 'event engine' of the toy: 2% slower than the estimate, one layout class 10% slower."""
    r = estimate(scenario)
    slow = 1.02 * (1.10 if scenario.parallel.virtual_stages > 2 else 1.0)
    return Report(r.step_time_s * slow, r.tokens_per_s / slow, r.mfu / slow, r.memory)


def screen(base, shape, micro_batches, space):
    """The toy's screen: exact memory and a bound 10% under the toy estimate."""
    import numpy as np

    from clustersim.sweep.space import layout_key, shape_layouts

    rows = []
    for p in shape_layouts(base.model, shape, base.parallel, space, micro_batches=micro_batches):
        scenario = replace(base, parallel=p)
        peak = peak_bytes(scenario)
        fits = peak <= CAPACITY_BYTES
        rows.append((*layout_key(p), float(fits), float(peak), 0.9 * estimate(scenario).step_time_s,
                     0.0 if fits else 2.0))
    return np.array(rows, dtype=np.float64).reshape(len(rows), 17)
