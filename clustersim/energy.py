"""Power and energy of a training job: per GPU, per node, per step, per token and per run.

Model (pure functions of the cluster spec and the simulated step):

* A node's maximum power is its datasheet figure (``node_power_kW`` in the cluster preset, e.g.
  DGX H100 10.2 kW, DGX B200 14.3 kW, an NVL72 compute tray 6.7-7.5 kW with its share of the rack)
  or, where none is published, the GPUs' TDP plus ``HOST_W_PER_GPU`` of host, NIC, switch and fan
  power per GPU, taken from the DGX H100 (10.2 kW - 8 x 700 W = 4.6 kW per 8 GPUs).
* Under training a node draws ``TRAINING_LOAD_FRACTION`` of that maximum: Newkirk et al. 2025
  ("Empirically-Calibrated H100 Node Power Models", arXiv 2506.14551) measured LLM training on
  8-GPU H100 nodes at 76% of the 10.2 kW rating, and Latif et al. 2024 (arXiv 2412.08602) saw at
  most 8.4 kW (82%) on the same node class. No comparable measurement is published for Blackwell
  or Instinct nodes; the same fraction is applied (the TDP is the cap; a power-limited GPU runs
  near it while computing, the sustained-clock ratio in clustersim.compute.arch shows it).
  The per-GPU figure is the GPU's TDP times the same fraction.
* The facility draws ``pue`` times the IT power: the cluster preset's ``pue`` or the scenario's
  ``cluster.pue``, else ``DEFAULT_PUE`` = 1.56, the industry-average annual PUE of the Uptime
  Institute Global Data Center Survey 2024. (Meta's Llama 3 model card reports training energy as
  GPU-hours x the 700 W TDP, adjusted for PUE; the load fraction here is the measured refinement.)
* Energy per step = facility power x step time; per token = that / tokens per step; per run =
  per token x training tokens. Electricity is priced at ``DEFAULT_USD_PER_KWH`` = 0.081, the US
  average industrial retail price for 2024 (U.S. EIA, Electric Power Monthly, table 5.6.A),
  unless ``--price-per-kwh`` overrides it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clustersim.hardware.spec import ClusterSpec

TRAINING_LOAD_FRACTION = 0.76   # Newkirk et al. 2025, arXiv 2506.14551: LLM training at 76% of the DGX H100 rating
HOST_W_PER_GPU = (10_200 - 8 * 700) / 8   # DGX H100 datasheet: 10.2 kW max with 8 x 700 W GPUs -> 575 W per GPU
DEFAULT_PUE = 1.56              # Uptime Institute Global Data Center Survey 2024: average annual PUE 1.56
DEFAULT_USD_PER_KWH = 0.081     # U.S. EIA Electric Power Monthly, average industrial price 2024: 8.1 cents/kWh
J_PER_KWH = 3.6e6


def node_max_power_w(cluster: ClusterSpec) -> float:
    """The node's maximum power: its datasheet figure, else GPUs at TDP plus the DGX H100's host share."""
    if cluster.node_power_w > 0:
        return cluster.node_power_w
    return cluster.gpus_per_node * (cluster.gpu.tdp_w + HOST_W_PER_GPU)


def pue(cluster: ClusterSpec) -> float:
    return cluster.pue if cluster.pue > 0 else DEFAULT_PUE


@dataclass(frozen=True, slots=True)
class EnergyReport:
    gpu_power_w: float          # average draw of one GPU under training load
    node_power_w: float         # average draw of one node (GPUs, CPUs, NICs, switches, fans)
    num_nodes: int
    pue: float
    step_time_s: float
    tokens_per_step: float

    @property
    def it_power_w(self) -> float:
        return self.node_power_w * self.num_nodes

    @property
    def facility_power_w(self) -> float:
        return self.it_power_w * self.pue

    @property
    def energy_per_step_kwh(self) -> float:
        return self.facility_power_w * self.step_time_s / J_PER_KWH

    @property
    def energy_per_token_j(self) -> float:
        return self.facility_power_w * self.step_time_s / self.tokens_per_step

    def run_energy_kwh(self, tokens: float) -> float:
        """Facility energy of training on ``tokens`` tokens at this step's rate."""
        return self.energy_per_token_j * tokens / J_PER_KWH

    def to_json(self, tokens: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gpu_power_w": self.gpu_power_w,
            "node_power_w": self.node_power_w,
            "it_power_kw": self.it_power_w / 1e3,
            "pue": self.pue,
            "facility_power_kw": self.facility_power_w / 1e3,
            "energy_per_step_kwh": self.energy_per_step_kwh,
            "energy_per_token_j": self.energy_per_token_j,
            "energy_per_trillion_tokens_mwh": self.run_energy_kwh(1e12) / 1e3,
            "load_fraction": TRAINING_LOAD_FRACTION,
        }
        if tokens is not None:
            out["training_tokens"] = tokens
            out["training_run_mwh"] = self.run_energy_kwh(tokens) / 1e3
        return out


def energy_report(cluster: ClusterSpec, step_time_s: float, tokens_per_step: float) -> EnergyReport:
    """Power and energy of one step of a job on all of ``cluster``."""
    return EnergyReport(
        gpu_power_w=cluster.gpu.tdp_w * TRAINING_LOAD_FRACTION,
        node_power_w=node_max_power_w(cluster) * TRAINING_LOAD_FRACTION,
        num_nodes=cluster.num_nodes,
        pue=pue(cluster),
        step_time_s=step_time_s,
        tokens_per_step=tokens_per_step,
    )


def mixed_energy_report(groups: Sequence[tuple[ClusterSpec, int]], step_time_s: float,
                        tokens_per_step: float) -> EnergyReport:
    """Power and energy of one step on node groups of different hardware (``cluster.groups``):
    each group's nodes draw their own power (``node_max_power_w``); the report carries the mean
    node and GPU draw, so that ``it_power_w`` is the sum over the groups. One data centre: the
    first group's PUE."""
    nodes = sum(n for _, n in groups)
    gpus = sum(c.gpus_per_node * n for c, n in groups)
    return EnergyReport(
        gpu_power_w=sum(c.gpu.tdp_w * c.gpus_per_node * n for c, n in groups) / gpus * TRAINING_LOAD_FRACTION,
        node_power_w=sum(node_max_power_w(c) * n for c, n in groups) / nodes * TRAINING_LOAD_FRACTION,
        num_nodes=nodes,
        pue=pue(groups[0][0]),
        step_time_s=step_time_s,
        tokens_per_step=tokens_per_step,
    )
