"""ComputeLane: one GPU's compute stream in the event engine, slowed while collectives run beside it.

``run(work_s)`` returns an event that fires once ``work_s`` seconds of full-rate compute are done;
``comm_started(cause)`` / ``comm_ended(cause)`` tell the lane that a collective began or ended on
this GPU, which changes the rate (``clustersim.plan.overlap.compute_rate``). The lane keeps the
seconds its work lost per cause. With the same collectives at the same times it gives exactly what
``clustersim.plan.overlap.advance`` computes in closed form.
"""

from __future__ import annotations

import simpy

from clustersim.plan.overlap import compute_rate

_EPS = 1e-12


class ComputeLane:
    def __init__(self, env: simpy.Environment, slowdown: float) -> None:
        self.env = env
        self.slowdown = slowdown
        self.active: dict[str, int] = {}
        self._n = 0                            # collectives in flight (sum of active)
        self._left = 0.0                       # work seconds left of the running job
        self._done: simpy.Event | None = None  # its completion event
        self._lost: dict[str, float] = {}      # seconds the running job lost, by cause
        self._last = env.now
        self._wakeup: simpy.Event | None = None

    @property
    def comm_active(self) -> bool:
        return self._n > 0

    def rate(self) -> float:
        return compute_rate(self.slowdown, self._n)

    def run(self, work_s: float) -> simpy.Event:
        """Event whose value is the job's lost seconds by cause, once ``work_s`` is done."""
        if self._done is not None:
            raise RuntimeError("a compute lane runs one job at a time")
        done = self.env.event()
        if work_s <= 0:
            done.succeed({})
            return done
        self._advance()
        self._left, self._done, self._lost = float(work_s), done, {}
        self._reschedule()
        return done

    def comm_started(self, cause: str) -> None:
        self._advance()
        self.active[cause] = self.active.get(cause, 0) + 1
        self._n += 1
        self._reschedule()

    def comm_ended(self, cause: str) -> None:
        self._advance()
        self.active[cause] -= 1
        self._n -= 1
        if not self.active[cause]:
            del self.active[cause]
        self._reschedule()

    def _advance(self) -> None:
        now = self.env.now
        dt, self._last = now - self._last, now
        if dt <= 0 or self._done is None:
            return
        rate = self.rate()
        self._left -= dt * rate
        n = self._n
        if n:
            for cause, k in self.active.items():
                self._lost[cause] = self._lost.get(cause, 0.0) + dt * (1.0 - rate) * k / n

    def _reschedule(self) -> None:
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.callbacks.clear()
        self._wakeup = None
        if self._done is None:
            return
        self._wakeup = self.env.timeout(max(0.0, self._left) / self.rate())
        self._wakeup.callbacks.append(self._on_wakeup)

    def _on_wakeup(self, _event: simpy.Event) -> None:
        self._advance()
        if self._done is not None and self._left <= _EPS * max(1.0, self.env.now):
            done, lost = self._done, self._lost
            self._done, self._lost, self._left = None, {}, 0.0
            self._wakeup = None
            done.succeed(lost)
        else:
            self._reschedule()
