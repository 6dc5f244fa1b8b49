"""FairShareLink: a simpy processor-sharing link (flow-level fair sharing).

``transfer(work_s)`` returns an event that fires once the transfer has received ``work_s``
seconds of exclusive link time; while N transfers are active each progresses at 1/N. Alone on
the link a transfer takes exactly ``work_s``; two equal transfers started together both finish
at 2 x ``work_s`` (egalitarian processor sharing, Kleinrock 1967).
"""

from __future__ import annotations

import simpy

_EPS = 1e-12


class FairShareLink:
    def __init__(self, env: simpy.Environment, name: str) -> None:
        self.env = env
        self.name = name
        self._remaining: dict[int, float] = {}  # transfer id -> exclusive seconds left
        self._events: dict[int, simpy.Event] = {}
        self._next_id = 0
        self._last_update = env.now
        self._wakeup: simpy.Event | None = None
        self.busy_s = 0.0  # time with at least one active transfer

    @property
    def active(self) -> int:
        return len(self._remaining)

    def transfer(self, work_s: float) -> simpy.Event:
        """Event that succeeds when ``work_s`` seconds of link time have been served."""
        done = self.env.event()
        if work_s <= 0:
            done.succeed()
            return done
        self._advance()
        tid = self._next_id
        self._next_id += 1
        self._remaining[tid] = float(work_s)
        self._events[tid] = done
        self._reschedule()
        return done

    def _advance(self) -> None:
        """Serve the active transfers for the time elapsed since the last update."""
        now = self.env.now
        dt = now - self._last_update
        self._last_update = now
        if dt <= 0 or not self._remaining:
            return
        self.busy_s += dt
        n = len(self._remaining)
        for tid in self._remaining:
            self._remaining[tid] -= self._served_s(tid, dt, n)

    def _served_s(self, tid: int, dt: float, n: int) -> float:
        """Exclusive link seconds that transfer ``tid`` receives in ``dt`` among ``n`` active ones:
        an equal share (the hook a link with other rates overrides, clustersim.engine.spine)."""
        return dt / n

    def _finish_delay_s(self, tid: int, left_s: float, n: int) -> float:
        """Seconds until transfer ``tid``, with ``left_s`` exclusive seconds left, finishes at its
        current share among ``n`` (the inverse of ``_served_s``)."""
        return left_s * n

    def _reschedule(self) -> None:
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.callbacks.clear()  # superseded: the next completion time changed
        if not self._remaining:
            self._wakeup = None
            return
        n = len(self._remaining)
        delay = min(self._finish_delay_s(tid, max(0.0, left), n) for tid, left in self._remaining.items())
        self._wakeup = self.env.timeout(delay)
        self._wakeup.callbacks.append(self._on_wakeup)

    def _on_wakeup(self, _event: simpy.Event) -> None:
        self._advance()
        finished = sorted(tid for tid, left in self._remaining.items() if left <= _EPS * max(1.0, self.env.now))
        for tid in finished:
            del self._remaining[tid]
            self._events.pop(tid).succeed()
        self._reschedule()
