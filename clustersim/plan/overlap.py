"""What overlapped communication costs the compute it hides behind (pure functions).

NCCL runs a collective as a kernel of one thread block (CTA) per channel on the same SMs as
the compute kernels, and moves its data through HBM. While a collective is in flight beside a
GEMM, the GEMM gets fewer SMs (and it loses whole waves to the tail effect), so overlapped
communication is not free:

* ``NCCL_CTAS`` = 24: an NCCL all-gather of an FSDP-style prefetch launched 24 thread blocks on
  an H100 (132 SMs) beside a GEMM that had sized its grid to all 132 SMs (NVIDIA developer forum,
  "Compute-Communication Overlap Causes Severe GEMM Performance Degradation because of Tail
  Effect", 2025, Nsight Systems trace). One CTA holds one SM for the collective's duration.
* So a compute kernel overlapped with one collective runs at ``1 - NCCL_CTAS / num_sms`` of its
  rate: 0.818 on H100 (132 SMs), 0.778 on A100 (108 SMs). Cross-check: Lee et al. 2025
  (arXiv 2507.03114, "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed
  Deep Learning") measured an average computational slowdown of 18.9% (max 40%) when
  collectives overlap GPT/Llama compute on A100 and H100 - the same size as 24/132 = 18.2% and
  24/108 = 22.2%.
* Collectives on separate streams (FSDP's all-gather and reduce-scatter streams, Megatron's
  gradient reduction beside an overlapped TP collective) each hold their own CTAs: the losses
  add up, down to ``MIN_COMPUTE_RATE``.
* A GPU profile without an SM count takes Lee et al.'s mean, 18.9%.
* Pipeline send/recv kernels are not counted: NCCL gives a point-to-point peer 2 channels
  (NCCL_NCHANNELS_PER_NET_PEER default 2, NCCL environment-variable docs), about 1.5% of an H100.

The time a compute kernel loses this way is blamed on the communication that caused it
(``dp_comm`` for data-parallel streams, ``tp_comm``/``cp_comm`` for overlapped TP/CP
collectives): it is the exposed cost of hiding that communication.

Both engines use these rules: the event engine through ``clustersim.engine.lane.ComputeLane``
(rates change as collectives start and end), the closed form through ``advance`` over the
known busy intervals of the rank's communication streams.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from clustersim.hardware.spec import GpuSpec

NCCL_CTAS = 24
LEE_2025_MEAN_SLOWDOWN = 0.189
MIN_COMPUTE_RATE = 0.25


def overlap_slowdown(gpu: GpuSpec) -> float:
    """Fraction of a compute kernel's rate lost to one concurrent NCCL collective on this GPU."""
    if gpu.num_sms > 0:
        return min(0.5, NCCL_CTAS / gpu.num_sms)
    return LEE_2025_MEAN_SLOWDOWN


def compute_rate(slowdown: float, active: int) -> float:
    """Rate of compute work with ``active`` collectives in flight on the same GPU."""
    return max(MIN_COMPUTE_RATE, 1.0 - slowdown * active) if active else 1.0


Interval = tuple[float, float, str]  # (start_s, end_s, cause) of one collective in flight


def advance(start_s: float, work_s: float, busy: Sequence[Interval], slowdown: float
            ) -> tuple[float, dict[str, float]]:
    """Run ``work_s`` seconds of compute from ``start_s`` beside the collectives in ``busy``.

    Returns the end time and the seconds lost to each cause (end - start = work + lost).
    Intervals may overlap each other; those ending before ``start_s`` are ignored.
    """
    lost: dict[str, float] = {}
    if work_s <= 0:
        return start_s, lost
    live = live_intervals(start_s, work_s, busy)
    if not live or slowdown <= 0:
        return start_s + work_s, lost
    if len(live) == 1:
        return advance_one(start_s, work_s, live[0], slowdown)
    return advance_many(start_s, work_s, live, slowdown)


def live_intervals(start_s: float, work_s: float, busy: Sequence[Interval]) -> list[Interval]:
    """The collectives of ``busy`` that can slow ``work_s`` seconds of compute from ``start_s``
    (in their order): non-empty, ending after ``start_s`` and starting before the work ends at the
    least rate (MIN_COMPUTE_RATE). A collective starting later changes nothing (the segment where
    the work ends, and so every number, is the same without it) -- a rank's reduce-scatter queue
    under ZeRO-3 reaches far ahead."""
    horizon = start_s + work_s / MIN_COMPUTE_RATE * (1.0 + 1e-9)
    return [iv for iv in busy if iv[1] > start_s and iv[0] < iv[1] and iv[0] < horizon]


def advance_many(start_s: float, work_s: float, live: list[Interval], slowdown: float
                  ) -> tuple[float, dict[str, float]]:
    """``advance`` over the collectives ``live`` (each ending after ``start_s``), segment by segment."""
    lost: dict[str, float] = {}
    points = {start_s}
    for s, e, _ in live:
        points.add(max(s, start_s))
        points.add(e)
    ordered = sorted(points)
    ordered.append(float("inf"))
    t, left = start_s, work_s
    for nxt in ordered[1:]:
        if nxt <= t:
            continue
        causes = [c for s, e, c in live if s <= t < e]
        rate = compute_rate(slowdown, len(causes))
        span = nxt - t
        if left <= span * rate:
            _blame(lost, causes, (left / rate) * (1.0 - rate))
            return t + left / rate, lost
        left -= span * rate
        _blame(lost, causes, span * (1.0 - rate))
        t = nxt
    raise AssertionError("unreachable: the last segment is unbounded")


def advance_one(start_s: float, work_s: float, iv: Interval, slowdown: float) -> tuple[float, dict[str, float]]:
    """``advance`` beside one collective (the common case), with the same floating-point
    operations in the same order as the general loop, so the results are identical to the bit."""
    begin, end, cause = iv
    t, left = start_s, work_s
    if begin > t:  # full rate until the collective starts
        if left <= begin - t:
            return t + left, {}
        left -= begin - t
        t = begin
    rate = compute_rate(slowdown, 1)
    span = end - t
    if left <= span * rate:
        seconds = (left / rate) * (1.0 - rate)
        return t + left / rate, ({cause: seconds} if seconds > 0 else {})
    left -= span * rate
    seconds = span * (1.0 - rate)
    return end + left, ({cause: seconds} if seconds > 0 else {})


def _blame(lost: dict[str, float], causes: Iterable[str], seconds: float) -> None:
    causes = causes if isinstance(causes, list) else list(causes)
    if not causes or seconds <= 0:
        return
    share = seconds / len(causes)
    for cause in causes:
        lost[cause] = lost.get(cause, 0.0) + share
