"""A spine shared by several jobs: the leaves' uplinks as processor-sharing resources (simpy).

The scale-out network is a two-level fat tree (clustersim.network.topology): a leaf's uplinks
carry ``nodes_per_leaf / oversubscription`` node-NICs' worth of bandwidth towards the spines (1 /
oversubscription per node of the leaf). When jobs share leaves, the cross-leaf traffic of all of
them competes for those uplinks. Leaves that hold the same nodes (the same pipeline stages of the
same jobs, in the same numbers) behave alike, so one ``Spine`` keeps one uplink set per such kind
of leaf (clustersim.engine.cosim decides the kinds). The engine's representative rank of a job's
pipeline stage stands for every GPU of the stage, so a cross-leaf transfer of that stage adds
``f x c`` to the demand (in node-NICs) of each kind of leaf that holds ``c`` of the stage's nodes:
``f`` is the share of a NIC's stream that the leaf's uplinks carry (clustersim.collectives.ports
``leaf_uplink_share``: all-to-all over ``n`` nodes with ``L`` per leaf sends ``(n - L) / (n - 1)``
across, recursive halving/doubling all of it, a ring at least its one crossing hop per leaf, ``1 /
L``). Each transfer counts at the share of its own link it gets. While a leaf's demand exceeds its
uplinks, every cross-leaf transfer through it runs at ``capacity / demand`` of its rate (max-min
fair sharing with equal weights; Bertsekas and Gallager, "Data Networks", 1992, §6.5.2); a transfer
through several kinds of leaf runs at the slowest one's. A single job that fills its leaves and runs
one collective pattern on every node gets ``1 / max(1, f x oversubscription)``, the factor the
closed-form collective model applies (ports.spine_factor).
"""

from __future__ import annotations

import simpy

from clustersim.network import FairShareLink

_EPS = 1e-12


class Spine:
    """The uplinks of each kind of leaf (``capacities``, node-NICs); links report their transfers."""

    def __init__(self, capacities: list[float] | tuple[float, ...]) -> None:
        self.capacities = tuple(float(c) for c in capacities)
        self.links: list[SpineLink] = []
        self.factors = [1.0] * len(self.capacities)

    def demand(self) -> list[float]:
        out = [0.0] * len(self.capacities)
        for link in self.links:
            link.add_demand(out)
        return out

    def factor(self, weights: tuple[tuple[int, float], ...]) -> float:
        """The rate factor of a transfer with these (leaf kind, demand) weights: its slowest leaf's."""
        return min((self.factors[leaf] for leaf, w in weights if w > 0), default=1.0)

    def refresh(self) -> None:
        """Serve every link at the old factors up to now, then re-rate and re-plan them."""
        for link in self.links:
            link._advance()
        self.factors = [min(1.0, c / d) if d > 0 else 1.0 for c, d in zip(self.capacities, self.demand(), strict=True)]
        for link in self.links:
            link._reschedule()


class SpineLink(FairShareLink):
    """A FairShareLink whose cross-leaf transfers also share the leaves' uplinks: transfer ``i``
    progresses at ``1 / n`` of the link, times its slowest leaf's factor when it has spine weights."""

    def __init__(self, env: simpy.Environment, name: str, spine: Spine) -> None:
        super().__init__(env, name)
        self.spine = spine
        self._weight: dict[int, tuple[tuple[int, float], ...]] = {}
        spine.links.append(self)

    def add_demand(self, out: list[float]) -> None:
        """Add this link's demand on each kind of leaf to ``out`` (each transfer at its 1 / n share)."""
        n = len(self._remaining)
        for tid in self._remaining:
            for leaf, w in self._weight.get(tid, ()):
                out[leaf] += w / n

    def _rate(self, tid: int, n: int) -> float:
        weights = self._weight.get(tid, ())
        return (self.spine.factor(weights) if weights else 1.0) / n

    def transfer(self, work_s: float, weight: tuple[tuple[int, float], ...] = ()) -> simpy.Event:
        done = self.env.event()
        if work_s <= 0:
            done.succeed()
            return done
        weight = tuple((leaf, w) for leaf, w in weight if w > 0)
        self.spine.refresh() if weight else self._advance()
        tid = self._next_id
        self._next_id += 1
        self._remaining[tid] = float(work_s)
        self._weight[tid] = weight
        self._events[tid] = done
        if weight or any(self._weight.get(t) for t in self._remaining):
            self.spine.refresh()   # the link's share of its spine flows changed
        else:
            self._reschedule()
        return done

    def _served_s(self, tid: int, dt: float, n: int) -> float:
        return dt * self._rate(tid, n)

    def _finish_delay_s(self, tid: int, left_s: float, n: int) -> float:
        return left_s / self._rate(tid, n)

    def _on_wakeup(self, _event: simpy.Event) -> None:
        self._advance()
        limit = _EPS * max(1.0, self.env.now)
        finished = sorted(tid for tid, left in self._remaining.items() if left <= limit)
        spine_flows = any(self._weight.get(t) for t in self._remaining)
        for tid in finished:
            del self._remaining[tid]
            self._weight.pop(tid, None)
            self._events.pop(tid).succeed()
        if spine_flows:
            self.spine.refresh()
        else:
            self._reschedule()
