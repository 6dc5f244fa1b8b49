"""The ``faults:`` section of a scenario (docs/perrank.md): what is slow within a step.

```yaml
faults:
  slow_gpus: [{rank: 17, speed: 0.5}]          # global rank (order tp-cp-dp-pp), fraction of nominal speed
  slow_links: [{node: 3, nic: 0, speed: 0.5}]  # a scale-out NIC at half its bandwidth
  stragglers: {fraction: 0.01, slowdown: 1.3}  # 1% of the GPUs, drawn at random, 1.3x slower
  seed: 0                                      # the draw of the stragglers (same seed, same GPUs)
```

Any of them switches `clustersim run` to per-rank simulation. A speed is in (0, 1]: a GPU at 0.5
takes twice as long for every kernel (a thermally throttled or power-capped GPU, a bad HBM stack
remapped, a noisy neighbour); a link at 0.5 moves half the bytes per second (a NIC that trained
down to a lower rate, a flapping port, a congested rail). Stragglers are GPUs that run ``slowdown``
times slower than nominal, drawn uniformly without replacement with Python's ``random.Random(seed)``
(``round(fraction x GPUs)`` of them), so the same seed picks the same GPUs on every machine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from pydantic import Field

from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_SLOWDOWN
from clustersim.section_model import Section


class SlowGpu(Section):
    rank: int = Field(ge=0)
    speed: float = Field(ge=1 / MAX_SLOWDOWN, le=1, allow_inf_nan=False)


class SlowLink(Section):
    node: int = Field(ge=0)
    nic: int = Field(ge=0)
    speed: float = Field(ge=1 / MAX_SLOWDOWN, le=1, allow_inf_nan=False)


class Stragglers(Section):
    fraction: float = Field(ge=0, le=1, allow_inf_nan=False)
    slowdown: float = Field(ge=1, le=MAX_SLOWDOWN, allow_inf_nan=False)


class FaultsSection(Section):
    slow_gpus: list[SlowGpu] = []
    slow_links: list[SlowLink] = []
    stragglers: Stragglers | None = None
    seed: int = Field(0, ge=0)


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """The faults of one step, resolved and checked against the cluster."""

    slow_gpus: tuple[tuple[int, float], ...] = ()         # (global rank, speed)
    slow_links: tuple[tuple[int, int, float], ...] = ()   # (node, NIC, speed)
    straggler_fraction: float = 0.0
    straggler_slowdown: float = 1.0
    seed: int = 0

    def straggler_ranks(self, num_gpus: int) -> tuple[int, ...]:
        """The GPUs drawn as stragglers: round(fraction x GPUs) of them, seeded."""
        count = round(self.straggler_fraction * num_gpus)
        if count <= 0 or self.straggler_slowdown == 1.0:
            return ()
        return tuple(sorted(random.Random(self.seed).sample(range(num_gpus), count)))

    def gpu_speeds(self, num_gpus: int) -> dict[int, tuple[float, str]]:
        """Degraded GPUs: global rank -> (speed, "slow_gpu" | "straggler"); the slower cause wins."""
        out: dict[int, tuple[float, str]] = {}
        for rank in self.straggler_ranks(num_gpus):
            out[rank] = (1.0 / self.straggler_slowdown, "straggler")
        for rank, speed in self.slow_gpus:
            if rank not in out or speed < out[rank][0]:
                out[rank] = (speed, "slow_gpu")
        return out

    def nic_speeds(self) -> dict[tuple[int, int], float]:
        out: dict[tuple[int, int], float] = {}
        for node, nic, speed in self.slow_links:
            out[(node, nic)] = min(speed, out.get((node, nic), 1.0))
        return out


def fault_spec(section: FaultsSection, cluster: ClusterSpec, nics_per_node: tuple[int, ...] | None = None) -> FaultSpec:
    """Check the section against ``cluster`` (ranks, nodes and NICs that exist) and resolve it.
    ``nics_per_node``: per node, where node groups differ (mixed clusters)."""
    gpus = cluster.num_gpus
    seen: dict[int, int] = {}
    for i, g in enumerate(section.slow_gpus):
        if g.rank >= gpus:
            raise InputError(f"faults.slow_gpus.{i}.rank", g.rank, f"a GPU rank 0..{gpus - 1} ({gpus} GPUs)")
        if g.rank in seen:   # which speed is it? (both were accepted, one silently taken)
            raise InputError(f"faults.slow_gpus.{i}.rank", g.rank, f"each GPU once (entry {seen[g.rank]} names it too)")
        seen[g.rank] = i
    links: dict[tuple[int, int], int] = {}
    for i, link in enumerate(section.slow_links):
        if (link.node, link.nic) in links:
            raise InputError(f"faults.slow_links.{i}", {"node": link.node, "nic": link.nic},
                             f"each NIC once (entry {links[(link.node, link.nic)]} names it too)")
        links[(link.node, link.nic)] = i
        if link.node >= cluster.num_nodes:
            raise InputError(f"faults.slow_links.{i}.node", link.node, f"a node 0..{cluster.num_nodes - 1}")
        nics = nics_per_node[link.node] if nics_per_node else cluster.nics_per_node
        if link.nic >= nics:
            raise InputError(f"faults.slow_links.{i}.nic", link.nic, f"a NIC 0..{nics - 1} of node {link.node}")
    st = section.stragglers
    return FaultSpec(
        slow_gpus=tuple((g.rank, g.speed) for g in section.slow_gpus),
        slow_links=tuple((s.node, s.nic, s.speed) for s in section.slow_links),
        straggler_fraction=st.fraction if st else 0.0,
        straggler_slowdown=st.slowdown if st else 1.0,
        seed=section.seed,
    )


def nic_of_gpu(local_gpu: int, gpus_per_node: int, nics_per_node: int) -> tuple[int, ...]:
    """The rail NICs a GPU sends through (rail-optimised nodes: GPU i on NIC i; with fewer NICs than
    GPUs, ``gpus_per_node / nics`` neighbours share one; with more, each GPU has its own few)."""
    if nics_per_node <= gpus_per_node:
        per_nic = max(1, gpus_per_node // nics_per_node)
        return (min(local_gpu // per_nic, nics_per_node - 1),)
    per_gpu = nics_per_node // gpus_per_node
    return tuple(range(local_gpu * per_gpu, (local_gpu + 1) * per_gpu))
