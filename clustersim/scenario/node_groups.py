"""Mixed GPUs in one job: the node groups of ``cluster.groups``.

```yaml
cluster:
  groups:                                   # node groups, in node order (group 0 holds nodes 0..)
    - {preset: dgx-a100, nodes: 16}
    - {preset: dgx-h100, nodes: 16}        # each group: preset, nodes, and the cluster overrides
  nodes_per_leaf: 32                        # (gpu, scale_up, scale_out, nics_per_node, pcie)
parallel: {tp: 8, pp: 4, dp: 8, balance: auto}   # auto (default) | even; or layers_per_stage: [...]
```

Ranks are placed on the nodes in order (tp-cp-dp-pp, block placement), so with Megatron's order a
pipeline stage usually sits in one group: the first stages on the first group's nodes. All groups
need the same GPUs per node (a TP group must not straddle node types). The fabric between groups
is one fat tree (``nodes_per_leaf``, ``oversubscription``, ``topology``, ``nodes_per_pod``,
``pod_oversubscription`` and the data centre's ``pue`` at the cluster level, or the groups' presets'
where they agree: ``JOB_FABRIC_KEYS``); a collective or a transfer between groups moves at the
slower side's rate.

Balancing the split to the groups' speeds runs after loading (clustersim.perrank.hetero).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pydantic import Field

from clustersim.errors import InputError
from clustersim.hardware.load import describe, list_clusters, load_cluster
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_GPUS, MAX_PER_NODE
from clustersim.section_model import Section


class NodeHardware(Section):
    """The keys that pick and override a node's hardware, written once: the cluster's own
    (``cluster:``, clustersim.scenario.sections.ClusterSection) and each node group's
    (``cluster.groups``). Both default to None: the preset's value."""

    preset: str | None = None
    nodes: int | None = Field(None, ge=1, le=MAX_GPUS)  # bounds: clustersim.limits
    gpu: str | None = None
    gpus_per_node: int | None = Field(None, ge=1, le=MAX_PER_NODE)
    scale_up: str | None = None
    scale_out: str | None = None
    nics_per_node: int | None = Field(None, ge=1, le=MAX_PER_NODE)
    pcie: str | None = None
    host_link: str | None = None   # GPU <-> host memory link where it is not pcie (NVLink-C2C)


class ClusterGroupSection(NodeHardware):
    """One node group: a preset and its node count are required."""

    preset: str
    nodes: int = Field(ge=1, le=MAX_GPUS)


# The keys that describe the whole job's fabric and data centre, not a node: one fat tree spans the
# groups (its leaves, spine and pod tiers) in one data centre (its PUE). Set at the cluster level
# they hold for every group; left out, the groups' presets must agree on them, else the answer would
# depend on which group comes first (docs/perrank.md, "Mixed GPUs in one job").
JOB_FABRIC_KEYS = ("nodes_per_leaf", "oversubscription", "topology", "nodes_per_pod", "pod_oversubscription", "pue")


def _fabric_text(key: str, value: object) -> str:
    """A preset's value of a JOB_FABRIC_KEYS field as the scenario writes it (0: the profile sets none)."""
    if key in ("nodes_per_pod", "pue") and not value:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes ``first_node .. first_node + nodes - 1``, all of the cluster ``cluster`` (whose
    ``num_nodes`` is the whole job's, so that the fabric's leaves and spines are the whole fabric's)."""

    preset: str
    nodes: int
    first_node: int
    cluster: ClusterSpec


def load_groups(groups: list[ClusterGroupSection], fabric: dict) -> tuple[ClusterSpec, tuple[NodeGroup, ...]]:
    """The node groups of ``cluster.groups`` and the cluster spec that stands for the whole job
    (group 0's hardware, every group's nodes, the one fabric). ``fabric``: the JOB_FABRIC_KEYS the
    scenario sets; a key it leaves out takes the presets' value, which they must share (else exit 2
    naming ``cluster.KEY``), so that no answer depends on the order of the groups."""
    total = sum(g.nodes for g in groups)
    # GPUs per node, checked once and before the groups load: a group of another node size (an
    # NVL72 tray beside DGX nodes) otherwise failed its scale-up domain check against a GPU count
    # that is no job's (an unknown preset fails in load_cluster, naming it)
    known = set(list_clusters())
    per_node = [g.gpus_per_node or (describe("clusters", g.preset).get("gpus_per_node") if g.preset in known else None)
                for g in groups]
    if len({n for n in per_node if n is not None}) > 1:
        raise InputError("cluster.groups", [f"{g.preset}: {n}" for g, n in zip(groups, per_node, strict=True)],
                         "groups with the same GPUs per node (a tensor-parallel group must not straddle node types)")
    out: list[NodeGroup] = []
    first = 0
    for i, g in enumerate(groups):
        overrides = {**g.model_dump(exclude={"preset", "nodes"}, exclude_none=True), **fabric}
        try:
            cluster = load_cluster(g.preset, total, **overrides)
        except InputError as exc:
            raise InputError(f"cluster.groups.{i}.{exc.field.removeprefix('cluster.')}", exc.value,
                             exc.allowed) from None
        out.append(NodeGroup(g.preset, g.nodes, first, cluster))
        first += g.nodes
    vendors = {g.cluster.gpu.vendor for g in out}
    if len(vendors) > 1:   # NCCL (NVIDIA) and RCCL (AMD) run no collective between each other's GPUs
        raise InputError("cluster.groups", [f"{g.preset}: {g.cluster.gpu.vendor}" for g in out],
                         "groups of one GPU vendor (one collective library, NCCL or RCCL, spans the job)")
    for key in JOB_FABRIC_KEYS:
        if key in fabric:
            continue
        values = {getattr(g.cluster, key) for g in out}
        if len(values) > 1:
            given = [f"{g.preset}: {_fabric_text(key, getattr(g.cluster, key))}" for g in out]
            raise InputError(f"cluster.{key}", given,
                             f"groups whose presets agree on {key}, or cluster.{key} set for the whole job (one "
                             f"fabric spans the groups; e.g. --set cluster.{key}=VALUE)")
    return out[0].cluster, tuple(out)


def group_of_node(groups: tuple[NodeGroup, ...], node: int) -> int:
    for i, g in enumerate(groups):
        if g.first_node <= node < g.first_node + g.nodes:
            return i
    raise ValueError(f"node {node} is in no group")


def one_kind(groups: tuple[NodeGroup, ...]) -> bool:
    """Whether every group has the same hardware (its preset's name apart): such a cluster runs as
    the plain preset does, without balancing (docs/perrank.md)."""
    return len({replace(g.cluster, name="", description="") for g in groups}) == 1

