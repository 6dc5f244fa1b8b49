"""Offload to host memory over the GPU's PCIe (or chip-to-chip) link: ``parallel.offload``.

* **Optimizer** (ZeRO-Offload, Ren et al. 2021, arXiv 2101.06840 §4; Megatron
  ``--optimizer-cpu-offload``): the fp32 master weights and Adam moments live in host memory; at
  the end of the step each GPU copies its shard of the fp32 gradients to the host (4 bytes per
  parameter, Megatron's main_grad), the host runs Adam on it, and the updated 16-bit parameters
  come back (2 bytes). The host Adam (DeepSpeed CPU-Adam, AVX-512 vectorised) is bound by host
  memory bandwidth: it moves the same 38 bytes per parameter as the GPU's fused Adam, fewer with
  SGD's one moment or bf16 moments (clustersim.compute.optimizer.moment_saving_bytes), at the
  cluster profile's ``host_memory_bw_GBps`` per node (each preset's figure with its source in
  hardware_profiles/clusters.yaml: DGX A100 409.6 GB/s, DGX H100 614.4 GB/s, ...) shared by the node's GPUs' optimizers. A profile without it falls back to the
  DGX H100's (``host_dram_bw``; the report's ``memory.host`` says which was used). The three parts run
  one after another (no "delayed parameter update", which ZeRO-Offload makes optional).
* **Activations** (ZeRO-Offload's activation checkpoint offload; Megatron fine-grained activation
  offloading): each layer's saved activations go to the host during the forward pass and come
  back before its backward, on the copy engines (no SMs), overlapped with the layer's compute; a
  copy longer than the compute it hides behind is exposed (cause ``offload``).
* **Parameters** (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv 2104.07857): ZeRO-3 parameter
  shards live in host memory and cross the host link before every all-gather.

The link is ``ClusterSpec.host_memory_link`` at its effective bandwidth: the profile's ``host_link``
where it names one (GB200: NVLink-C2C, 450 GB/s per direction, NVIDIA GB200 NVL72 / GH200
datasheets), else ``pcie`` (one x16 link per GPU on DGX/HGX boards).
"""

from __future__ import annotations

from clustersim.collectives import CollectivePlan, GroupShape, Phase
from clustersim.compute.optimizer import ADAM_MIXED_BYTES_PER_PARAM, moment_saving_bytes
from clustersim.hardware.spec import ClusterSpec
from clustersim.scenario import Scenario

# the fallback where a cluster profile gives no host_memory_bw_GBps: a DGX H100, two Xeon Platinum 8480C
# with eight DDR5-4800 channels each (NVIDIA DGX H100 datasheet; Intel ARK: 4800 MT/s x 8 bytes =
# 38.4 GB/s per channel), 614.4 GB/s per node
HOST_DRAM_BW_BYTES_PER_S_PER_NODE = 2 * 8 * 38.4e9
HOST_LINK_LATENCY_S = 10e-6                            # cudaMemcpyAsync launch and DMA setup, ~10 us


def host_bw(scenario: Scenario) -> float:
    """The GPU <-> host memory link's effective bandwidth (``ClusterSpec.host_memory_link``: the
    profile's host_link, NVLink-C2C on Grace Hopper / Grace Blackwell, else its pcie)."""
    link = scenario.cluster.host_memory_link
    return link.effective_bw_bytes_per_s if link is not None else 0.0


def host_copy_s(scenario: Scenario, size_bytes: float) -> float:
    bw = host_bw(scenario)
    return HOST_LINK_LATENCY_S + size_bytes / bw if bw > 0 and size_bytes > 0 else 0.0


def host_copy_plan(scenario: Scenario, size_bytes: float) -> CollectivePlan:
    """A copy between this GPU and host memory as a one-phase plan on the "host" link tier."""
    bw = host_bw(scenario)
    phases = (Phase("host", HOST_LINK_LATENCY_S, size_bytes, bw),) if bw > 0 and size_bytes > 0 else ()
    return CollectivePlan("host_copy", "dma", size_bytes, GroupShape(1, 1), phases)


def host_dram_bw(cluster: ClusterSpec) -> tuple[float, bool]:
    """(a node's host memory bandwidth in bytes/s, whether the cluster profile gives it): the
    profile's ``host_memory_bw_GBps``, else the DGX H100 fallback."""
    if cluster.host_memory_bw_bytes_per_s > 0:
        return cluster.host_memory_bw_bytes_per_s, True
    return HOST_DRAM_BW_BYTES_PER_S_PER_NODE, False


def host_optimizer_time_s(scenario: Scenario, shard: int) -> float:
    """ZeRO-Offload optimizer step of one GPU's ``shard`` of parameters (its ZeRO shard:
    clustersim.memory.report.state_shard_params): gradients down, host Adam, parameters up."""
    par = scenario.parallel
    per_gpu_bw = host_dram_bw(scenario.cluster)[0] / scenario.cluster.gpus_per_node
    saving = moment_saving_bytes(par.optimizer_moments, par.adam_moment_bytes)
    adam_s = shard * (ADAM_MIXED_BYTES_PER_PARAM - saving) / per_gpu_bw
    return host_copy_s(scenario, shard * 4) + adam_s + host_copy_s(scenario, shard * 2)
