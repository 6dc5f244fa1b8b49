"""Closed-form bubble and activation memory of each pipeline schedule.

Times are those of one *chunk* (the layers one global stage runs) for one micro-batch: ``f`` its
forward, ``b`` the input-gradient part of its backward, ``w`` the weight-gradient part (a whole
backward is ``b + w``). The bubble is the idle time of the rank that finishes last, between the
start of the step and its end, with every rank running the same work and no communication time
(``clustersim.parallel.pipeline.dry_run`` reproduces each formula exactly; tests/parallel check
it on a grid of times, and tests/engine check the step engine against it).

| schedule | bubble | valid for |
|---|---|---|
| gpipe, 1f1b | ``(pp - 1)(f + b + w)`` (Narayanan et al. 2021 §2.2.1) | any |
| interleaved-1f1b | ``(pp - 1)(f + b + w)`` with chunk times, ``1/v`` of 1F1B's (§2.2.2) | m a multiple of pp |
| zb-h1 | ``(pp - 1)(f + b - w)`` (Qi et al. 2024 §2.1; DualPipe README: ``(PP-1)(F+B-2W)``) | w <= f <= b <= 2w |
| zb-v | ``(pp - 1) b`` | w <= f <= b <= 2w |
| dualpipe | ``(n - 1)(2f + b - w) + max(0, (n - 1) b - n f)``, ``n = pp / 2`` | w <= f <= b <= 2w |
| dualpipe-v | the same with ``n = pp`` (``2 pp`` stages) | w <= f <= b <= 2w |

ZB-V's "zero bubble" (Qi et al. §6) holds when each rank's optimizer step may start as soon as
that rank is done (their optimizer post-validation); clustersim's step ends with a synchronised
optimizer step (Megatron's gradient-norm all-reduce), so the ``pp - 1`` forwards by which the
last rank starts later remain: with ``f = b = w`` the bubble is ``(pp - 1) f``. For DualPipe the
README of deepseek-ai/DualPipe gives ``(PP/2 - 1)(F&B + B - 3W)``; with ``F&B = f + b + w`` (no
communication to hide) and ``f = b = w`` both expressions give ``2 (n - 1) f``, which is also
what the README's own figure shows (8 ranks, 20 micro-batches: six idle cells per device); for
``b != w`` the public implementation's order gives the expression above.

In-flight activations (micro-batches of one stage's layers held at the peak), checked against the
schedules in tests/parallel: 1F1B ``pp`` on rank 0; ZB-H1 ``pp`` on every rank ("no more than
1F1B", Qi et al. §2.1); ZB-V ``2 pp`` chunks of half a stage, i.e. ``pp`` stages (§6); DualPipe
``pp + 1`` (DualPipe README: "PP+1"), twice the parameters; DualPipe-V ``2 pp + 1`` chunks of half
a stage.
"""

from __future__ import annotations


def analytic_bubble(schedule: str, pp: int, f: float, b: float, w: float) -> float:
    """Idle time of the last rank to finish (see the module table); ``f, b, w`` per chunk."""
    if schedule in ("gpipe", "1f1b", "interleaved-1f1b"):
        return (pp - 1) * (f + b + w)
    if schedule == "zb-h1":
        return (pp - 1) * (f + b - w)
    if schedule == "zb-v":
        return (pp - 1) * b
    if schedule in ("dualpipe", "dualpipe-v"):
        n = pp // 2 if schedule == "dualpipe" else pp
        return (n - 1) * (2 * f + b - w) + max(0.0, (n - 1) * b - n * f)
    raise ValueError(f"unknown schedule {schedule!r}")


def analytic_in_flight(schedule: str, pp: int, virtual_stages: int = 1) -> float:
    """Peak activations held by the busiest rank, in micro-batches of one chunk's layers."""
    if schedule in ("1f1b", "zb-h1"):
        return pp
    if schedule == "zb-v":
        return 2 * pp
    if schedule == "dualpipe":
        return pp + 1
    if schedule == "dualpipe-v":
        return 2 * pp + 1
    if schedule == "interleaved-1f1b":
        return 2 * (pp - 1) + (virtual_stages - 1) * pp + 1
    raise ValueError(f"no closed form for {schedule!r}")
