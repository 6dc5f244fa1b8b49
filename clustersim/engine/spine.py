"""A spine shared by several jobs: leaf uplinks as one processor-sharing resource (simpy).

The scale-out network is a two-level fat tree (clustersim.network.topology): a leaf's uplinks
carry ``nodes_per_leaf / oversubscription`` node-NICs' worth of bandwidth towards the spines.
When jobs share leaves, the cross-leaf traffic of all of them competes for those uplinks. The
engine's representative ranks stand for every GPU of their pipeline stage, so a cross-leaf
transfer of job J's stage adds ``f x L_J / pp_J`` to a leaf's uplink demand (in node-NICs): ``f``
is the fraction of its bytes that cross leaves (clustersim.collectives.ports: all-to-all over
``n`` nodes with ``L`` per leaf sends ``(n - L) / (n - 1)`` across, recursive halving/doubling all
of it, rings and pipeline pairs next to nothing), ``L_J`` the job's nodes in the leaf, ``pp_J / 1``
its stages. Each transfer counts at the share of its own link it gets. While demand exceeds the
uplinks, every cross-leaf transfer runs at ``capacity / demand`` of its rate (max-min fair sharing
with equal weights; Bertsekas and Gallager, "Data Networks", 1992, §6.5.2). A single job that fills
its leaves and runs one collective pattern on every stage gets ``1 / max(1, f x oversubscription)``,
the factor the closed-form collective model applies (ports.spine_factor).
"""

from __future__ import annotations

import simpy

from clustersim.network import FairShareLink

_EPS = 1e-12


class Spine:
    """The representative leaf's uplinks: ``capacity`` node-NICs; links report their transfers."""

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.links: list[SpineLink] = []
        self.factor = 1.0

    def demand(self) -> float:
        return sum(link.demand() for link in self.links)

    def refresh(self) -> None:
        """Serve every link at the old factor up to now, then re-rate and re-plan them."""
        for link in self.links:
            link._advance()
        d = self.demand()
        self.factor = min(1.0, self.capacity / d) if d > 0 else 1.0
        for link in self.links:
            link._reschedule()


class SpineLink(FairShareLink):
    """A FairShareLink whose cross-leaf transfers also share the spine: transfer ``i`` progresses at
    ``1 / n`` of the link, times the spine's factor when it has a spine weight."""

    def __init__(self, env: simpy.Environment, name: str, spine: Spine) -> None:
        super().__init__(env, name)
        self.spine = spine
        self._weight: dict[int, float] = {}
        spine.links.append(self)

    def demand(self) -> float:
        n = len(self._remaining)
        return sum(self._weight.get(tid, 0.0) for tid in self._remaining) / n if n else 0.0

    def _rate(self, tid: int, n: int) -> float:
        return (self.spine.factor if self._weight.get(tid, 0.0) > 0 else 1.0) / n

    def transfer(self, work_s: float, weight: float = 0.0) -> simpy.Event:
        done = self.env.event()
        if work_s <= 0:
            done.succeed()
            return done
        self.spine.refresh() if weight > 0 else self._advance()
        tid = self._next_id
        self._next_id += 1
        self._remaining[tid] = float(work_s)
        self._weight[tid] = weight
        self._events[tid] = done
        if weight > 0 or any(self._weight.get(t, 0.0) > 0 for t in self._remaining):
            self.spine.refresh()   # the link's share of its spine flows changed
        else:
            self._reschedule()
        return done

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last_update
        self._last_update = now
        if dt <= 0 or not self._remaining:
            return
        self.busy_s += dt
        n = len(self._remaining)
        for tid in self._remaining:
            self._remaining[tid] -= dt * self._rate(tid, n)

    def _reschedule(self) -> None:
        if self._wakeup is not None and not self._wakeup.triggered:
            self._wakeup.callbacks.clear()
        if not self._remaining:
            self._wakeup = None
            return
        n = len(self._remaining)
        delay = min(max(0.0, left) / self._rate(tid, n) for tid, left in self._remaining.items())
        self._wakeup = self.env.timeout(delay)
        self._wakeup.callbacks.append(self._on_wakeup)

    def _on_wakeup(self, _event: simpy.Event) -> None:
        self._advance()
        limit = _EPS * max(1.0, self.env.now)
        finished = sorted(tid for tid, left in self._remaining.items() if left <= limit)
        spine_flows = any(self._weight.get(t, 0.0) > 0 for t in self._remaining)
        for tid in finished:
            del self._remaining[tid]
            self._weight.pop(tid, None)
            self._events.pop(tid).succeed()
        if spine_flows:
            self.spine.refresh()
        else:
            self._reschedule()
